//! Validation of a consolidation command after its wait, as Karpenter's validators do: its
//! candidates must still be candidates of the method (no pod arrived on an empty node, none
//! became un-Consolidatable or blocked), within the budgets, and — for single- and multi-node
//! consolidation — the simulation must still say the same thing (a delete is still a delete; a
//! replacement still one node offering at least the command's instance types).

use super::candidates::Candidate;
use super::{ConsolidationCommand, ConsolidationInput, Method, Prepared, allowance, prepare};
use std::fmt;

/// Why a command was abandoned at validation (Karpenter's failed-validation kinds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidationFailure {
    /// Candidates are no longer candidates (pods arrived, a block appeared).
    Churn(String),
    /// A budget no longer allows the command.
    Budget(String),
    /// The simulation now says something else.
    Scheduling(String),
}

impl ValidationFailure {
    /// churn, budget or scheduling.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Churn(_) => "churn",
            Self::Budget(_) => "budget",
            Self::Scheduling(_) => "scheduling",
        }
    }
}

impl fmt::Display for ValidationFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Churn(m) | Self::Budget(m) | Self::Scheduling(m) => f.write_str(m),
        }
    }
}

/// `command` re-checked against the cluster now: the command to carry out (for emptiness, the
/// candidates still empty and within budget), or why it is abandoned.
pub fn validate(
    command: &ConsolidationCommand,
    input: ConsolidationInput<'_>,
) -> Result<ConsolidationCommand, ValidationFailure> {
    let method = command.method;
    let Prepared {
        mut world,
        candidates,
        budgets,
        ..
    } = prepare(input, method);
    let still: Vec<&Candidate<'_>> = command
        .candidates
        .iter()
        .filter_map(|d| candidates.iter().find(|c| c.view.nodeclaim == d.nodeclaim))
        .collect();
    let mut allowed = allowance(&budgets);
    if method == Method::Emptiness {
        if still.is_empty() {
            return Err(ValidationFailure::Churn(format!(
                "{} candidates are no longer valid",
                command.candidates.len()
            )));
        }
        let within: Vec<String> = still
            .iter()
            .filter(|c| {
                let left = allowed.entry(c.view.nodepool.clone()).or_default();
                let ok = *left > 0;
                *left = left.saturating_sub(1);
                ok
            })
            .map(|c| c.view.nodeclaim.clone())
            .collect();
        if within.is_empty() {
            return Err(ValidationFailure::Budget(format!(
                "{} candidates failed validation because they would violate disruption budgets",
                command.candidates.len()
            )));
        }
        let mut kept = command.clone();
        kept.candidates.retain(|d| within.contains(&d.nodeclaim));
        kept.source_price = kept.candidates.iter().map(|d| d.price).sum();
        return Ok(kept);
    }
    if still.len() != command.candidates.len() {
        return Err(ValidationFailure::Churn(format!(
            "{} candidates are no longer valid",
            command.candidates.len() - still.len()
        )));
    }
    for c in &still {
        let left = allowed.entry(c.view.nodepool.clone()).or_default();
        if *left == 0 {
            return Err(ValidationFailure::Budget(
                "a candidate can no longer be disrupted without violating budgets".into(),
            ));
        }
        *left -= 1;
    }
    let positions: Vec<usize> = still.iter().map(|c| c.position).collect();
    let result = world
        .simulate_removal(&positions)
        .map_err(|b| ValidationFailure::Scheduling(b.to_string()))?;
    if !result.unschedulable.is_empty() {
        let pods: Vec<String> = result
            .unschedulable
            .iter()
            .map(|u| format!("{} => {}", u.pod, u.reason))
            .collect();
        return Err(ValidationFailure::Scheduling(pods.join("; ")));
    }
    let changed =
        || ValidationFailure::Scheduling("scheduling simulation produced new results".into());
    match (&command.replacement, result.new_nodeclaims.as_slice()) {
        (None, []) => Ok(command.clone()),
        (Some(planned), [now]) => {
            if planned
                .instance_types
                .iter()
                .all(|t| now.instance_types.contains(t))
            {
                Ok(command.clone())
            } else {
                Err(changed())
            }
        }
        _ => Err(changed()),
    }
}
