//! SSM over awsJson1_1: GetParameter, and GetParameters as one GetParameter per name (names
//! that do not exist come back in `InvalidParameters`).

use driftwood_aws::ports::{GetParameterInput, Parameter, SsmApi, codes};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{Failure, WireError};
use super::json::body;
use crate::state::SimAws;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GetParameterRequest {
    name: Option<String>,
    with_decryption: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GetParametersRequest {
    names: Option<Vec<String>>,
    with_decryption: Option<bool>,
}

/// Answers SSM `operation`.
pub(crate) async fn handle(sim: &SimAws, operation: &str, raw: &[u8]) -> Result<Value, Failure> {
    match operation {
        "GetParameter" => {
            let request: GetParameterRequest = body(raw)?;
            let name = request
                .name
                .ok_or_else(|| WireError::MissingParameter("Name".to_string()))?;
            let parameter = sim
                .get_parameter(GetParameterInput {
                    name,
                    with_decryption: request.with_decryption.unwrap_or(false),
                })
                .await?;
            Ok(json!({ "Parameter": parameter_json(sim, &parameter) }))
        }
        "GetParameters" => {
            let request: GetParametersRequest = body(raw)?;
            let names = request
                .names
                .ok_or_else(|| WireError::MissingParameter("Names".to_string()))?;
            let mut found = Vec::new();
            let mut invalid = Vec::new();
            for name in names {
                let input = GetParameterInput {
                    name: name.clone(),
                    with_decryption: request.with_decryption.unwrap_or(false),
                };
                match sim.get_parameter(input).await {
                    Ok(p) => found.push(parameter_json(sim, &p)),
                    Err(e) if e.code == codes::PARAMETER_NOT_FOUND => invalid.push(name),
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(json!({ "Parameters": found, "InvalidParameters": invalid }))
        }
        other => Err(WireError::UnknownOperation(format!("AmazonSSM.{other}")).into()),
    }
}

/// A parameter as SSM returns it (public `/aws/service/…` parameters have no account in
/// their ARN).
fn parameter_json(sim: &SimAws, p: &Parameter) -> Value {
    let config = sim.config();
    let account = if p.name.starts_with("/aws/service/") {
        ""
    } else {
        config.account_id.as_str()
    };
    let slash = if p.name.starts_with('/') { "" } else { "/" };
    json!({
        "Name": p.name,
        "Type": p.type_,
        "Value": p.value,
        "Version": p.version,
        "ARN": format!("arn:aws:ssm:{}:{account}:parameter{slash}{}", config.region, p.name),
        "DataType": "text",
    })
}
