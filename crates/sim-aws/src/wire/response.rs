//! The answer envelopes of the three protocols: EC2 query (XML, `<Response><Errors>` errors),
//! IAM query (XML with `…Result` and `ResponseMetadata`, `<ErrorResponse>` errors) and
//! awsJson1_1 (`__type` errors with the `x-amzn-errortype` header).

use driftwood_aws::ports::AwsError;

use super::WireResponse;
use super::error::{Failure, WireError, is_internal, is_unavailable};
use super::xml::Xml;

pub(crate) const EC2_NAMESPACE: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";
pub(crate) const IAM_NAMESPACE: &str = "https://iam.amazonaws.com/doc/2010-05-08/";
const XML: &str = "text/xml;charset=UTF-8";
const JSON: &str = "application/x-amz-json-1.1";

fn with_id(status: u16, content_type: &'static str, body: Vec<u8>, id: &str) -> WireResponse {
    WireResponse {
        status,
        content_type,
        body,
        headers: vec![("x-amzn-requestid", id.to_string())],
    }
}

/// `<{action}Response xmlns=EC2><requestId/>…</…>`, the rest written by `body`.
pub(crate) fn ec2_ok(action: &str, id: &str, body: impl FnOnce(&mut Xml)) -> WireResponse {
    let mut x = Xml::document();
    x.root(&format!("{action}Response"), EC2_NAMESPACE, |x| {
        x.leaf("requestId", id);
        body(x);
    });
    with_id(200, XML, x.finish(), id)
}

/// EC2's error document with `code` and `message`.
pub(crate) fn ec2_error(status: u16, code: &str, message: &str, id: &str) -> WireResponse {
    let mut x = Xml::document();
    x.el("Response", |x| {
        x.el("Errors", |x| {
            x.el("Error", |x| {
                x.leaf("Code", code);
                x.leaf("Message", message);
            })
        });
        x.leaf("RequestID", id);
    });
    with_id(status, XML, x.finish(), id)
}

/// The EC2 error answer for `failure`: 503 for throttling and unavailability (as EC2 answers
/// RequestLimitExceeded), 500 for internal errors, else 400.
pub(crate) fn ec2_failure(failure: &Failure, id: &str) -> WireResponse {
    match failure {
        Failure::Service(e) => {
            let status = if e.is_throttled() || is_unavailable(&e.code) {
                503
            } else if is_internal(&e.code) {
                500
            } else {
                400
            };
            ec2_error(status, &e.code, &e.message, id)
        }
        Failure::Request(e) => ec2_error(400, ec2_code(e), &e.to_string(), id),
    }
}

fn ec2_code(error: &WireError) -> &'static str {
    match error {
        WireError::MalformedQueryString(_) => "MalformedQueryString",
        WireError::MissingAction => "MissingAction",
        WireError::InvalidAction(_) | WireError::UnknownOperation(_) => "InvalidAction",
        WireError::NoSuchVersion(_) => "NoSuchVersion",
        WireError::MissingParameter(_) => "MissingParameter",
        WireError::InvalidParameterValue { .. } | WireError::Serialization(_) => {
            "InvalidParameterValue"
        }
        WireError::InvalidNextToken(_) => "InvalidNextToken",
    }
}

/// `<{action}Response xmlns=IAM><{action}Result>…</…><ResponseMetadata/></…>`; `result`
/// writes the result's members (`None`: an action without a result).
pub(crate) fn iam_ok(action: &str, id: &str, result: Option<&dyn Fn(&mut Xml)>) -> WireResponse {
    let mut x = Xml::document();
    x.root(&format!("{action}Response"), IAM_NAMESPACE, |x| {
        if let Some(result) = result {
            x.el(&format!("{action}Result"), result);
        }
        x.el("ResponseMetadata", |x| x.leaf("RequestId", id));
    });
    with_id(200, XML, x.finish(), id)
}

/// The IAM error answer for `failure`, with the statuses IAM uses (404 NoSuchEntity, 409 for
/// conflicts, 500 ServiceFailure, else 400).
pub(crate) fn iam_failure(failure: &Failure, id: &str) -> WireResponse {
    let (status, code, message) = match failure {
        Failure::Service(e) => (iam_status(e), e.code.clone(), e.message.clone()),
        Failure::Request(e) => (400, iam_code(e).to_string(), e.to_string()),
    };
    let mut x = Xml::document();
    x.root("ErrorResponse", IAM_NAMESPACE, |x| {
        x.el("Error", |x| {
            x.leaf("Type", if status >= 500 { "Receiver" } else { "Sender" });
            x.leaf("Code", &code);
            x.leaf("Message", &message);
        });
        x.leaf("RequestId", id);
    });
    with_id(status, XML, x.finish(), id)
}

fn iam_status(e: &AwsError) -> u16 {
    match e.code.as_str() {
        "NoSuchEntity" => 404,
        "EntityAlreadyExists" | "LimitExceeded" | "DeleteConflict" => 409,
        code if is_internal(code) => 500,
        code if is_unavailable(code) => 503,
        _ => 400,
    }
}

fn iam_code(error: &WireError) -> &'static str {
    match error {
        WireError::MissingParameter(_) => "ValidationError",
        WireError::InvalidParameterValue { .. } | WireError::Serialization(_) => "InvalidInput",
        other => ec2_code(other),
    }
}

/// A JSON protocol success.
pub(crate) fn json_ok(body: &serde_json::Value, id: &str) -> WireResponse {
    with_id(200, JSON, serde_json::to_vec(body).unwrap_or_default(), id)
}

/// A JSON protocol error: `{"__type":code,"message":…}` and the `x-amzn-errortype` header;
/// 500 for internal errors, 503 when unavailable, else 400 (throttling included, as SSM and
/// the Pricing API answer it).
pub(crate) fn json_failure(failure: &Failure, id: &str) -> WireResponse {
    let (code, message) = match failure {
        Failure::Service(e) => (e.code.clone(), e.message.clone()),
        Failure::Request(e) => (json_code(e).to_string(), e.to_string()),
    };
    let status = if is_internal(&code) {
        500
    } else if is_unavailable(&code) {
        503
    } else {
        400
    };
    let body = serde_json::json!({ "__type": code, "message": message });
    let mut response = with_id(
        status,
        JSON,
        serde_json::to_vec(&body).unwrap_or_default(),
        id,
    );
    response.headers.push(("x-amzn-errortype", code));
    response
}

fn json_code(error: &WireError) -> &'static str {
    match error {
        WireError::UnknownOperation(_) | WireError::InvalidAction(_) => "UnknownOperationException",
        WireError::Serialization(_) | WireError::MalformedQueryString(_) => {
            "SerializationException"
        }
        WireError::InvalidNextToken(_) => "InvalidNextTokenException",
        WireError::MissingParameter(_)
        | WireError::MissingAction
        | WireError::NoSuchVersion(_)
        | WireError::InvalidParameterValue { .. } => "ValidationException",
    }
}
