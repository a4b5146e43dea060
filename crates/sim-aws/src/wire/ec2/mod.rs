//! EC2 over the query protocol: every action of the `Ec2Api` port, its parameters read into the
//! port's input, the port's answer written as EC2's XML. Describe actions page their answers
//! (`MaxResults`, `NextToken`; DescribeInstanceTypes 100 and DescribeSpotPriceHistory and
//! DescribeInstanceTypeOfferings 1000 at a time by default, as EC2 does), each page one call
//! of the port.

mod inputs;
mod instance_types_xml;
mod instances_xml;
mod launch_inputs;
mod resources_xml;

use driftwood_aws::ports::{AwsError, Ec2Api};

use super::WireResponse;
use super::error::{Failure, WireError};
use super::form::Scope;
use super::paging::page;
use super::response::{ec2_failure, ec2_ok};
use super::xml::Xml;
use crate::state::SimAws;

/// An i64 as EC2's 32-bit integer fields carry it (clamped).
pub(crate) fn narrow(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
}

/// Answers EC2 `action`.
pub(crate) async fn handle(sim: &SimAws, action: &str, p: Scope<'_>, id: &str) -> WireResponse {
    match answer(sim, action, &p, id).await {
        Ok(response) => response,
        Err(failure) => ec2_failure(&failure, id),
    }
}

/// A describe answer: the page `p` asks for of `all`, as `<set><item>…</item></set>` and
/// `nextToken`.
fn paged<T>(
    action: &str,
    id: &str,
    p: &Scope<'_>,
    all: Vec<T>,
    default_page: Option<usize>,
    set: &str,
    mut write: impl FnMut(&mut Xml, &T),
) -> Result<WireResponse, Failure> {
    let page = page(all, p.get("NextToken"), p.int("MaxResults")?, default_page)?;
    Ok(ec2_ok(action, id, |x| {
        x.list(set, "item", &page.items, |x, item| write(x, item));
        x.opt("nextToken", page.next_token.as_deref());
    }))
}

async fn answer(
    sim: &SimAws,
    action: &str,
    p: &Scope<'_>,
    id: &str,
) -> Result<WireResponse, Failure> {
    let account = sim.config().account_id.clone();
    let seed = sim.config().seed;
    match action {
        "DescribeImages" => {
            let all = sim.describe_images(inputs::describe_images(p)?).await?;
            paged(action, id, p, all, None, "imagesSet", resources_xml::image)
        }
        "DescribeSubnets" => {
            let all = sim.describe_subnets(inputs::describe_subnets(p)).await?;
            paged(action, id, p, all, None, "subnetSet", |x, s| {
                resources_xml::subnet(x, s, &account)
            })
        }
        "DescribeSecurityGroups" => {
            let all = sim
                .describe_security_groups(inputs::describe_security_groups(p))
                .await?;
            paged(action, id, p, all, None, "securityGroupInfo", |x, g| {
                resources_xml::security_group(x, g, &account)
            })
        }
        "DescribeInstanceTypes" => {
            let all = sim
                .describe_instance_types(inputs::describe_instance_types(p))
                .await?;
            paged(
                action,
                id,
                p,
                all,
                Some(100),
                "instanceTypeSet",
                instance_types_xml::instance_type,
            )
        }
        "DescribeInstanceTypeOfferings" => {
            let all = sim
                .describe_instance_type_offerings(inputs::describe_instance_type_offerings(p))
                .await?;
            paged(
                action,
                id,
                p,
                all,
                Some(1000),
                "instanceTypeOfferingSet",
                resources_xml::offering,
            )
        }
        "DescribeSpotPriceHistory" => {
            let all = sim
                .describe_spot_price_history(inputs::describe_spot_price_history(p)?)
                .await?;
            paged(
                action,
                id,
                p,
                all,
                Some(1000),
                "spotPriceHistorySet",
                resources_xml::spot_price,
            )
        }
        "CreateLaunchTemplate" => {
            let input = launch_inputs::create_launch_template(p)?;
            let created = sim.create_launch_template(input).await?;
            Ok(ec2_ok(action, id, |x| {
                x.el("launchTemplate", |x| {
                    resources_xml::launch_template(x, &created, &account)
                })
            }))
        }
        "DescribeLaunchTemplates" => {
            let mut all = sim
                .describe_launch_templates(inputs::describe_launch_templates(p))
                .await?;
            // The port selects by name only: `LaunchTemplateId.N` (the CLI's other way) is
            // applied here.
            let ids = p.strings("LaunchTemplateId");
            if let Some(missing) = ids
                .iter()
                .find(|id| !all.iter().any(|t| &t.launch_template_id == *id))
            {
                return Err(AwsError::new(
                    "InvalidLaunchTemplateId.NotFound",
                    format!(
                        "The specified launch template, with template ID {missing}, does not exist."
                    ),
                )
                .into());
            }
            if !ids.is_empty() {
                all.retain(|t| ids.contains(&t.launch_template_id));
            }
            paged(action, id, p, all, None, "launchTemplates", |x, t| {
                resources_xml::launch_template(x, t, &account)
            })
        }
        "DeleteLaunchTemplate" => {
            let name = p
                .get("LaunchTemplateName")
                .ok_or_else(|| WireError::MissingParameter("LaunchTemplateName".to_string()))?;
            sim.delete_launch_template(name).await?;
            Ok(ec2_ok(action, id, |x| {
                x.el("launchTemplate", |x| x.leaf("launchTemplateName", name))
            }))
        }
        "CreateFleet" => {
            let input = launch_inputs::create_fleet(p)?;
            let out = sim.create_fleet(input.clone()).await?;
            Ok(ec2_ok(action, id, |x| {
                instances_xml::fleet(x, &input, &out)
            }))
        }
        "DescribeInstances" => {
            let all = sim
                .describe_instances(inputs::describe_instances(p))
                .await?;
            paged(action, id, p, all, None, "reservationSet", |x, i| {
                instances_xml::reservation(x, i, &account, seed)
            })
        }
        "DescribeInstanceStatus" => {
            let all = sim
                .describe_instance_status(inputs::describe_instance_status(p))
                .await?;
            paged(
                action,
                id,
                p,
                all,
                None,
                "instanceStatusSet",
                instances_xml::instance_status,
            )
        }
        "TerminateInstances" => {
            let changes = sim.terminate_instances(inputs::instance_ids(p)?).await?;
            Ok(ec2_ok(action, id, |x| {
                x.list(
                    "instancesSet",
                    "item",
                    &changes,
                    instances_xml::state_change,
                )
            }))
        }
        "CreateTags" => {
            sim.create_tags(inputs::create_tags(p)?).await?;
            Ok(ec2_ok(action, id, |x| x.value("return", true)))
        }
        other => Err(WireError::InvalidAction(other.to_string()).into()),
    }
}
