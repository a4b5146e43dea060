//! EC2 XML of images, subnets, security groups, instance type offerings, spot prices and
//! launch templates, with the element names the SDK's EC2 deserializers read (`imageOwnerId`,
//! `imageState`, `groupDescription`, `tagSet`, lists of `item`s).

use driftwood_aws::ports::{
    Image, InstanceTypeOffering, LaunchTemplate, SecurityGroup, SpotPrice, Subnet, Tag,
};

use crate::wire::xml::Xml;

/// `<tagSet><item><key/><value/></item>…</tagSet>`.
pub(crate) fn tag_set(x: &mut Xml, tags: &[Tag]) {
    x.list("tagSet", "item", tags, |x, t| {
        x.leaf("key", &t.key);
        x.leaf("value", &t.value);
    });
}

pub(crate) fn image(x: &mut Xml, i: &Image) {
    x.leaf("imageId", &i.image_id);
    x.leaf("name", &i.name);
    x.non_empty("description", &i.description);
    x.leaf("imageOwnerId", &i.owner_id);
    x.opt("imageOwnerAlias", i.image_owner_alias.as_deref());
    x.non_empty("architecture", &i.architecture);
    x.leaf("creationDate", &i.creation_date);
    x.opt("deprecationTime", i.deprecation_time.as_deref());
    x.non_empty("imageState", &i.state);
    x.non_empty("platformDetails", &i.platform_details);
    x.leaf("imageType", "machine");
    x.value("isPublic", i.image_owner_alias.as_deref() == Some("amazon"));
    x.leaf("rootDeviceType", "ebs");
    x.leaf("virtualizationType", "hvm");
    x.leaf("hypervisor", "xen");
    tag_set(x, &i.tags);
}

pub(crate) fn subnet(x: &mut Xml, s: &Subnet, owner: &str) {
    x.leaf("subnetId", &s.subnet_id);
    x.leaf("state", "available");
    x.leaf("vpcId", &s.vpc_id);
    x.leaf("cidrBlock", &s.cidr_block);
    x.value(
        "availableIpAddressCount",
        super::narrow(s.available_ip_address_count),
    );
    x.leaf("availabilityZone", &s.availability_zone);
    x.leaf("availabilityZoneId", &s.availability_zone_id);
    x.value("defaultForAz", false);
    x.value("mapPublicIpOnLaunch", s.map_public_ip_on_launch);
    x.leaf("ownerId", owner);
    tag_set(x, &s.tags);
}

pub(crate) fn security_group(x: &mut Xml, g: &SecurityGroup, owner: &str) {
    x.leaf("groupId", &g.group_id);
    x.leaf("groupName", &g.group_name);
    x.leaf("groupDescription", &g.description);
    x.leaf("vpcId", &g.vpc_id);
    x.leaf("ownerId", owner);
    tag_set(x, &g.tags);
}

pub(crate) fn offering(x: &mut Xml, o: &InstanceTypeOffering) {
    x.leaf("instanceType", &o.instance_type);
    x.leaf("locationType", &o.location_type);
    x.leaf("location", &o.location);
}

pub(crate) fn spot_price(x: &mut Xml, p: &SpotPrice) {
    x.leaf("instanceType", &p.instance_type);
    x.leaf("productDescription", &p.product_description);
    x.leaf("spotPrice", &p.spot_price);
    x.value("timestamp", p.timestamp);
    x.leaf("availabilityZone", &p.availability_zone);
}

/// A launch template's summary (EC2 does not return its data here either).
pub(crate) fn launch_template(x: &mut Xml, t: &LaunchTemplate, owner: &str) {
    x.leaf("launchTemplateId", &t.launch_template_id);
    x.leaf("launchTemplateName", &t.launch_template_name);
    x.value("createTime", t.create_time);
    x.leaf("createdBy", &format!("arn:aws:iam::{owner}:root"));
    x.value("defaultVersionNumber", 1);
    x.value("latestVersionNumber", 1);
    tag_set(x, &t.tags);
}
