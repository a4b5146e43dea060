//! The simulated account over AWS's own wire protocols, so that aws-sdk-rust clients (and the
//! AWS CLI) pointed at one endpoint URL talk to it as to AWS: EC2 and IAM over the query
//! protocol (form-encoded `Action`/`Version`, XML answers), SSM and the Pricing API over
//! awsJson1_1 (`X-Amz-Target`). Pure over bytes: an HTTP server hands each request to
//! [`handle`] and writes back the [`WireResponse`]. Any credentials and signature are accepted.

mod ec2;
mod error;
mod form;
mod iam;
mod json;
mod paging;
mod pricing;
mod query;
mod request_id;
mod response;
mod ssm;
mod xml;

pub use error::WireError;

use crate::state::SimAws;

/// One HTTP request as the server received it.
#[derive(Debug, Clone, Copy)]
pub struct WireRequest<'a> {
    /// `POST` (what the SDKs send) or `GET`.
    pub method: &'a str,
    /// The request path (`/` from the SDKs; not used for routing).
    pub path: &'a str,
    /// The query string without its `?`, if any.
    pub query: Option<&'a str>,
    /// The `Content-Type` header.
    pub content_type: Option<&'a str>,
    /// The `X-Amz-Target` header: present for the JSON protocol services (SSM, Pricing).
    pub amz_target: Option<&'a str>,
    pub body: &'a [u8],
}

/// The HTTP response to send back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Extra headers (lowercase names): `x-amzn-requestid`, and `x-amzn-errortype` on JSON
    /// errors.
    pub headers: Vec<(&'static str, String)>,
}

/// Answers one request against `sim`: a JSON protocol call when it carries `X-Amz-Target`,
/// else a query protocol call. Never panics: a request the simulation cannot read gets the
/// protocol's error shape with status 400.
pub async fn handle(sim: &SimAws, request: WireRequest<'_>) -> WireResponse {
    let request_id = request_id::next();
    match request.amz_target {
        Some(target) => json::handle(sim, target, request.body, &request_id).await,
        None => query::handle(sim, &request, &request_id).await,
    }
}
