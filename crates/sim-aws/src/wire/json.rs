//! The awsJson1_1 front door: `X-Amz-Target: Service.Operation` routed to SSM
//! (`AmazonSSM`) or the Pricing API (`AWSPriceListService`), the body read as JSON.

use serde::de::DeserializeOwned;

use super::error::{Failure, WireError};
use super::response::{json_failure, json_ok};
use super::{WireResponse, pricing, ssm};
use crate::state::SimAws;

/// Answers a JSON protocol request.
pub(crate) async fn handle(sim: &SimAws, target: &str, body: &[u8], id: &str) -> WireResponse {
    let answer = match target.trim().split_once('.') {
        Some(("AmazonSSM", operation)) => ssm::handle(sim, operation, body).await,
        Some(("AWSPriceListService", operation)) => pricing::handle(sim, operation, body).await,
        _ => Err(WireError::UnknownOperation(target.to_string()).into()),
    };
    match answer {
        Ok(value) => json_ok(&value, id),
        Err(failure) => json_failure(&failure, id),
    }
}

/// The request body as `T` (an empty body reads as `{}`).
pub(crate) fn body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Failure> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        body
    };
    serde_json::from_slice(body).map_err(|e| WireError::Serialization(e.to_string()).into())
}
