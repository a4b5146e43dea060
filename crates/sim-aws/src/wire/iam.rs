//! IAM over the query protocol: the instance-profile actions of the `IamApi` port
//! (GetInstanceProfile, CreateInstanceProfile with `Tags.member.N.…`, Add/RemoveRole…,
//! DeleteInstanceProfile), answered as IAM's XML (`…Result`, lists of `member`s).

use driftwood_aws::ports::{CreateInstanceProfileInput, IamApi, InstanceProfile, Tag};

use super::WireResponse;
use super::error::{Failure, WireError};
use super::form::Scope;
use super::response::{iam_failure, iam_ok};
use super::xml::Xml;
use crate::ids::hex_id;
use crate::state::SimAws;

const ACTIONS: &[&str] = &[
    "GetInstanceProfile",
    "CreateInstanceProfile",
    "AddRoleToInstanceProfile",
    "RemoveRoleFromInstanceProfile",
    "DeleteInstanceProfile",
];

/// Whether `action` is an IAM action this endpoint serves.
pub(crate) fn serves(action: &str) -> bool {
    ACTIONS.contains(&action)
}

/// Answers IAM `action`.
pub(crate) async fn handle(sim: &SimAws, action: &str, p: Scope<'_>, id: &str) -> WireResponse {
    match answer(sim, action, &p, id).await {
        Ok(response) => response,
        Err(failure) => iam_failure(&failure, id),
    }
}

async fn answer(
    sim: &SimAws,
    action: &str,
    p: &Scope<'_>,
    id: &str,
) -> Result<WireResponse, Failure> {
    let required = |name: &str| {
        p.get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| WireError::MissingParameter(name.to_string()))
    };
    match action {
        "GetInstanceProfile" => {
            let profile = sim
                .get_instance_profile(required("InstanceProfileName")?)
                .await?;
            Ok(profile_answer(sim, action, id, &profile))
        }
        "CreateInstanceProfile" => {
            let tags = p
                .sub("Tags")
                .entries("member")
                .into_iter()
                .map(|t| Tag {
                    key: t.get("Key").unwrap_or_default().to_string(),
                    value: t.get("Value").unwrap_or_default().to_string(),
                })
                .collect();
            let input = CreateInstanceProfileInput {
                instance_profile_name: required("InstanceProfileName")?.to_string(),
                path: p.get("Path").unwrap_or("/").to_string(),
                tags,
            };
            let profile = sim.create_instance_profile(input).await?;
            Ok(profile_answer(sim, action, id, &profile))
        }
        "AddRoleToInstanceProfile" => {
            sim.add_role_to_instance_profile(
                required("InstanceProfileName")?,
                required("RoleName")?,
            )
            .await?;
            Ok(iam_ok(action, id, None))
        }
        "RemoveRoleFromInstanceProfile" => {
            sim.remove_role_from_instance_profile(
                required("InstanceProfileName")?,
                required("RoleName")?,
            )
            .await?;
            Ok(iam_ok(action, id, None))
        }
        "DeleteInstanceProfile" => {
            sim.delete_instance_profile(required("InstanceProfileName")?)
                .await?;
            Ok(iam_ok(action, id, None))
        }
        other => Err(WireError::InvalidAction(other.to_string()).into()),
    }
}

fn profile_answer(sim: &SimAws, action: &str, id: &str, profile: &InstanceProfile) -> WireResponse {
    let write = |x: &mut Xml| instance_profile(x, sim, profile);
    iam_ok(action, id, Some(&write))
}

/// `<InstanceProfile>` with its roles (`<Roles><member>`) and tags. The simulation keeps no
/// creation dates: they read as the current simulated time.
fn instance_profile(x: &mut Xml, sim: &SimAws, p: &InstanceProfile) {
    let config = sim.config();
    let now = sim.now();
    x.el("InstanceProfile", |x| {
        x.leaf("Path", &p.path);
        x.leaf("InstanceProfileName", &p.instance_profile_name);
        x.leaf("InstanceProfileId", &p.instance_profile_id);
        x.leaf("Arn", &p.arn);
        x.value("CreateDate", now);
        x.list("Roles", "member", &p.roles, |x, role| {
            x.leaf("Path", "/");
            x.leaf("RoleName", role);
            let role_id = hex_id(config.seed, &format!("role/{role}"), 17).to_uppercase();
            x.leaf("RoleId", &format!("AROA{role_id}"));
            x.leaf(
                "Arn",
                &format!("arn:aws:iam::{}:role/{role}", config.account_id),
            );
            x.value("CreateDate", now);
        });
        x.list("Tags", "member", &p.tags, |x, t| {
            x.leaf("Key", &t.key);
            x.leaf("Value", &t.value);
        });
    });
}
