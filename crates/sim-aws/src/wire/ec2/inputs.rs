//! EC2 query parameters read into the port's describe, tag and terminate inputs, with the
//! names the SDK's EC2 serializer writes (`Filter.N.Name`, `Filter.N.Value.M`, `ImageId.N`,
//! `Owner.N`, `GroupId.N`, `InstanceType.N`, `Tag.N.Key`, `TagSpecification.N.…`).

use driftwood_aws::ports::{
    CreateTagsInput, DescribeImagesInput, DescribeInstanceStatusInput,
    DescribeInstanceTypeOfferingsInput, DescribeInstanceTypesInput, DescribeInstancesInput,
    DescribeLaunchTemplatesInput, DescribeSecurityGroupsInput, DescribeSpotPriceHistoryInput,
    DescribeSubnetsInput, Filter, Tag, TagSpecification,
};
use jiff::Timestamp;

use crate::wire::error::WireError;
use crate::wire::form::Scope;

/// `Filter.N.Name` / `Filter.N.Value.M`.
pub(crate) fn filters(p: &Scope<'_>) -> Vec<Filter> {
    p.entries("Filter")
        .into_iter()
        .map(|f| Filter {
            name: f.get("Name").unwrap_or_default().to_string(),
            values: f.strings("Value"),
        })
        .collect()
}

/// The tags of list `name` (`name.N.Key` / `name.N.Value`).
pub(crate) fn tags(p: &Scope<'_>, name: &str) -> Vec<Tag> {
    p.entries(name)
        .into_iter()
        .map(|t| Tag {
            key: t.get("Key").unwrap_or_default().to_string(),
            value: t.get("Value").unwrap_or_default().to_string(),
        })
        .collect()
}

/// `TagSpecification.N.ResourceType` / `TagSpecification.N.Tag.M.…`.
pub(crate) fn tag_specifications(p: &Scope<'_>) -> Vec<TagSpecification> {
    p.entries("TagSpecification")
        .into_iter()
        .map(|s| TagSpecification {
            resource_type: s.get("ResourceType").unwrap_or_default().to_string(),
            tags: tags(&s, "Tag"),
        })
        .collect()
}

pub(crate) fn describe_images(p: &Scope<'_>) -> Result<DescribeImagesInput, WireError> {
    Ok(DescribeImagesInput {
        image_ids: p.strings("ImageId"),
        owners: p.strings("Owner"),
        filters: filters(p),
        include_deprecated: p.bool("IncludeDeprecated")?.unwrap_or(false),
    })
}

pub(crate) fn describe_subnets(p: &Scope<'_>) -> DescribeSubnetsInput {
    DescribeSubnetsInput {
        subnet_ids: p.strings("SubnetId"),
        filters: filters(p),
    }
}

/// DescribeSecurityGroups; `GroupName.N` becomes a `group-name` filter.
pub(crate) fn describe_security_groups(p: &Scope<'_>) -> DescribeSecurityGroupsInput {
    let mut filters = filters(p);
    let names = p.strings("GroupName");
    if !names.is_empty() {
        filters.push(Filter::new("group-name", names));
    }
    DescribeSecurityGroupsInput {
        group_ids: p.strings("GroupId"),
        filters,
    }
}

pub(crate) fn describe_instance_types(p: &Scope<'_>) -> DescribeInstanceTypesInput {
    DescribeInstanceTypesInput {
        instance_types: p.strings("InstanceType"),
        filters: filters(p),
    }
}

pub(crate) fn describe_instance_type_offerings(
    p: &Scope<'_>,
) -> DescribeInstanceTypeOfferingsInput {
    DescribeInstanceTypeOfferingsInput {
        location_type: p.get("LocationType").unwrap_or_default().to_string(),
        filters: filters(p),
    }
}

pub(crate) fn describe_spot_price_history(
    p: &Scope<'_>,
) -> Result<DescribeSpotPriceHistoryInput, WireError> {
    let start_time = match p.get("StartTime") {
        None => None,
        Some(t) => Some(t.parse::<Timestamp>().map_err(|e| {
            WireError::invalid(&p.key("StartTime"), t, format!("not an ISO 8601 time: {e}"))
        })?),
    };
    Ok(DescribeSpotPriceHistoryInput {
        instance_types: p.strings("InstanceType"),
        product_descriptions: p.strings("ProductDescription"),
        availability_zone: p.get("AvailabilityZone").map(str::to_string),
        start_time,
    })
}

pub(crate) fn describe_launch_templates(p: &Scope<'_>) -> DescribeLaunchTemplatesInput {
    DescribeLaunchTemplatesInput {
        launch_template_names: p.strings("LaunchTemplateName"),
        filters: filters(p),
    }
}

pub(crate) fn describe_instances(p: &Scope<'_>) -> DescribeInstancesInput {
    DescribeInstancesInput {
        instance_ids: p.strings("InstanceId"),
        filters: filters(p),
    }
}

/// DescribeInstanceStatus's `Filter.N`.
pub(crate) fn describe_instance_status(p: &Scope<'_>) -> DescribeInstanceStatusInput {
    DescribeInstanceStatusInput {
        filters: filters(p),
    }
}

/// TerminateInstances' `InstanceId.N` (at least one).
pub(crate) fn instance_ids(p: &Scope<'_>) -> Result<Vec<String>, WireError> {
    let ids = p.strings("InstanceId");
    if ids.is_empty() {
        return Err(WireError::MissingParameter("InstanceId".to_string()));
    }
    Ok(ids)
}

/// CreateTags' `ResourceId.N` and `Tag.N.…` (at least one resource).
pub(crate) fn create_tags(p: &Scope<'_>) -> Result<CreateTagsInput, WireError> {
    let resources = p.strings("ResourceId");
    if resources.is_empty() {
        return Err(WireError::MissingParameter("ResourceId".to_string()));
    }
    Ok(CreateTagsInput {
        resources,
        tags: tags(p, "Tag"),
    })
}
