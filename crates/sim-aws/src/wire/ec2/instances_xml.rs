//! EC2 XML of instances (a reservation each), their state changes, their status checks and
//! events (DescribeInstanceStatus), and CreateFleet's answer (`fleetInstanceSet` and
//! `errorSet`, each naming its launch template and override).

use driftwood_aws::ports::{
    CreateFleetInput, CreateFleetOutput, FleetOverrideRef, Instance, InstanceStateChange,
    InstanceStatus, StatusCheck,
};

use super::resources_xml::tag_set;
use crate::ids::hex_id;
use crate::wire::xml::Xml;

/// EC2's numeric code of an instance state.
fn state_code(name: &str) -> u16 {
    match name {
        "pending" => 0,
        "running" => 16,
        "shutting-down" => 32,
        "terminated" => 48,
        "stopping" => 64,
        "stopped" => 80,
        _ => 0,
    }
}

fn state(x: &mut Xml, element: &str, name: &str) {
    x.el(element, |x| {
        x.value("code", state_code(name));
        x.leaf("name", name);
    });
}

/// One item of DescribeInstanceStatus's `instanceStatusSet`.
pub(crate) fn instance_status(x: &mut Xml, s: &InstanceStatus) {
    x.leaf("instanceId", &s.instance_id);
    x.leaf("availabilityZone", &s.availability_zone);
    state(x, "instanceState", &s.state);
    let check = |x: &mut Xml, element: &str, check: &Option<StatusCheck>| {
        let Some(check) = check else {
            return;
        };
        x.el(element, |x| {
            x.leaf("status", &check.status);
            x.list("details", "item", &check.details, |x, d| {
                x.leaf("name", &d.name);
                x.leaf("status", &d.status);
                if let Some(since) = d.impaired_since {
                    x.value("impairedSince", since);
                }
            });
        });
    };
    check(x, "systemStatus", &s.system_status);
    check(x, "instanceStatus", &s.instance_status);
    check(x, "attachedEbsStatus", &s.attached_ebs_status);
    x.list("eventsSet", "item", &s.events, |x, e| {
        x.leaf("code", &e.code);
        x.leaf("description", &e.description);
        if let Some(at) = e.not_before {
            x.value("notBefore", at);
        }
    });
}

/// One reservation holding `i`.
pub(crate) fn reservation(x: &mut Xml, i: &Instance, account: &str, seed: u64) {
    let reservation = hex_id(seed, &format!("reservation/{}", i.instance_id), 17);
    x.leaf("reservationId", &format!("r-{reservation}"));
    x.leaf("ownerId", account);
    x.el("groupSet", |_| {});
    x.list("instancesSet", "item", [i], |x, i| {
        instance(x, i, account, seed)
    });
}

fn instance(x: &mut Xml, i: &Instance, account: &str, seed: u64) {
    x.leaf("instanceId", &i.instance_id);
    x.leaf("imageId", &i.image_id);
    state(x, "instanceState", &i.state);
    x.leaf("privateDnsName", &i.private_dns_name);
    x.leaf("instanceType", &i.instance_type);
    x.value("launchTime", i.launch_time);
    x.el("placement", |x| {
        x.leaf("availabilityZone", &i.availability_zone);
        x.leaf("tenancy", "default");
    });
    x.leaf("subnetId", &i.subnet_id);
    x.leaf("vpcId", &i.vpc_id);
    x.leaf("privateIpAddress", &i.private_ip_address);
    x.list("groupSet", "item", &i.security_groups, |x, g| {
        x.leaf("groupId", &g.group_id);
        x.leaf("groupName", &g.group_name);
    });
    x.non_empty("architecture", &i.architecture);
    x.opt("platform", i.platform.as_deref());
    x.opt("instanceLifecycle", i.instance_lifecycle.as_deref());
    if let Some(profile) = &i.iam_instance_profile {
        x.el("iamInstanceProfile", |x| {
            x.leaf(
                "arn",
                &format!("arn:aws:iam::{account}:instance-profile/{profile}"),
            );
            let id = hex_id(seed, &format!("instance-profile/{profile}"), 17);
            x.leaf("id", &format!("AIPA{}", id.to_uppercase()));
        });
    }
    x.leaf("rootDeviceType", "ebs");
    x.leaf("virtualizationType", "hvm");
    x.leaf("hypervisor", "nitro");
    tag_set(x, &i.tags);
}

pub(crate) fn state_change(x: &mut Xml, c: &InstanceStateChange) {
    x.leaf("instanceId", &c.instance_id);
    state(x, "currentState", &c.current_state);
    state(x, "previousState", &c.previous_state);
}

/// CreateFleet's answer to `input`.
pub(crate) fn fleet(x: &mut Xml, input: &CreateFleetInput, out: &CreateFleetOutput) {
    x.leaf("fleetId", &out.fleet_id);
    x.list("errorSet", "item", &out.errors, |x, e| {
        overrides(x, input, &e.launch_template_and_overrides);
        x.non_empty("lifecycle", &e.lifecycle);
        x.leaf("errorCode", &e.error_code);
        x.leaf("errorMessage", &e.error_message);
    });
    x.list("fleetInstanceSet", "item", &out.instances, |x, i| {
        overrides(x, input, &i.launch_template_and_overrides);
        x.non_empty("lifecycle", &i.lifecycle);
        x.text_list("instanceIds", "item", &i.instance_ids);
        x.leaf("instanceType", &i.instance_type);
    });
}

/// `<launchTemplateAndOverrides>`: the template of the config the override came from, and
/// the override.
fn overrides(x: &mut Xml, input: &CreateFleetInput, o: &FleetOverrideRef) {
    let config = input.launch_template_configs.iter().find(|c| {
        c.overrides.iter().any(|v| {
            v.instance_type == o.instance_type
                && v.subnet_id == o.subnet_id
                && v.availability_zone == o.availability_zone
        })
    });
    x.el("launchTemplateAndOverrides", |x| {
        if let Some(config) = config {
            x.el("launchTemplateSpecification", |x| {
                x.leaf("launchTemplateName", &config.launch_template_name);
                x.leaf("version", &config.version);
            });
        }
        x.el("overrides", |x| {
            x.leaf("instanceType", &o.instance_type);
            x.leaf("subnetId", &o.subnet_id);
            x.leaf("availabilityZone", &o.availability_zone);
        });
    });
}
