//! The query protocol's front door: parameters from the query string and the form body,
//! routed by `Version` (EC2 `2016-11-15`, IAM `2010-05-08`; without one, by the action's
//! name) to the service.

use super::error::{Failure, WireError};
use super::form::Params;
use super::response::ec2_failure;
use super::{WireRequest, WireResponse, ec2, iam};
use crate::state::SimAws;

pub(crate) const EC2_VERSION: &str = "2016-11-15";
pub(crate) const IAM_VERSION: &str = "2010-05-08";

/// Answers a query protocol request.
pub(crate) async fn handle(sim: &SimAws, request: &WireRequest<'_>, id: &str) -> WireResponse {
    let params = match params(request) {
        Ok(params) => params,
        Err(e) => return ec2_failure(&Failure::Request(e), id),
    };
    let root = params.root();
    let Some(action) = root.get("Action").filter(|a| !a.is_empty()) else {
        return ec2_failure(&Failure::Request(WireError::MissingAction), id);
    };
    match root.get("Version") {
        Some(EC2_VERSION) => ec2::handle(sim, action, root, id).await,
        Some(IAM_VERSION) => iam::handle(sim, action, root, id).await,
        None if iam::serves(action) => iam::handle(sim, action, root, id).await,
        None => ec2::handle(sim, action, root, id).await,
        Some(other) => ec2_failure(
            &Failure::Request(WireError::NoSuchVersion(other.to_string())),
            id,
        ),
    }
}

/// The query string's parameters, then the body's when it is a form (or untyped).
fn params(request: &WireRequest<'_>) -> Result<Params, WireError> {
    let mut params = Params::default();
    if let Some(query) = request.query {
        params.extend_from(query.as_bytes())?;
    }
    let form = request.content_type.is_none_or(|t| {
        t.trim_start()
            .to_ascii_lowercase()
            .starts_with("application/x-www-form-urlencoded")
    });
    if form {
        params.extend_from(request.body)?;
    }
    Ok(params)
}
