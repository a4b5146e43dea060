//! Starting a disruption command, whatever chose it (drift, emptiness, single- or multi-node
//! consolidation): record it on every candidate (replacement names and start time), mark each
//! with its DisruptionReason, taint their nodes, then create the replacement NodeClaims — or,
//! with none, delete the candidates. The order makes it resumable from the API objects alone.

use crate::api::{
    add_taint, delete, disrupted_taint, is_conflict, modify, modify_status, nodeclaims, nodes,
    set_claim_condition,
};
use crate::context::Context;
use crate::events::EventType;
use crate::metrics::Metrics;
use crate::nodeclaim_template::build_nodeclaim;
use crate::state::Snapshot;
use driftwood_api::NodeClaim;
use driftwood_api::condition::STATUS_TRUE;
use driftwood_api::wellknown::{
    ANNOTATION_DISRUPTION_REPLACEMENT_FOR, CONDITION_DISRUPTION_REASON,
};
use driftwood_disruption::command::InFlight;
use driftwood_disruption::consolidation::ConsolidationCommand;
use driftwood_disruption::plan::{Command, Decision};
use driftwood_scheduling::NewNodeClaim;
use kube::api::PostParams;
use std::collections::BTreeMap;

/// A node a command disrupts.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub nodeclaim: String,
    pub node: Option<String>,
    pub nodepool: String,
    pub pods: usize,
}

/// A command ready to start.
#[derive(Debug, Clone)]
pub struct Start {
    /// Drifted, Unhealthy, Empty or Underutilized.
    pub reason: &'static str,
    /// Karpenter's consolidation_type label: "" for drift, else empty, single or multi.
    pub consolidation_type: &'static str,
    pub candidates: Vec<Candidate>,
    pub replacements: Vec<NewNodeClaim>,
    /// The DisruptionReason message.
    pub message: String,
}

impl Start {
    /// A command of a method that replaces nodes one by one (drift, repair), disrupted for
    /// `reason`.
    pub fn replacing(command: &Command, reason: &'static str) -> Self {
        Self {
            reason,
            consolidation_type: "",
            candidates: vec![Candidate {
                nodeclaim: command.nodeclaim.clone(),
                node: command.node.clone(),
                nodepool: command.nodepool.clone(),
                pods: command.pods.len(),
            }],
            replacements: match &command.decision {
                Decision::Replace(r) => r.clone(),
                Decision::Delete => Vec::new(),
            },
            message: if command.message.is_empty() {
                command.reason.clone()
            } else {
                format!("{}: {}", command.reason, command.message)
            },
        }
    }

    /// A consolidation command.
    pub fn consolidation(command: &ConsolidationCommand) -> Self {
        let reason = command.method.reason();
        let message = match &command.replacement {
            None => format!(
                "{reason}: deleting {} node(s) (${:.4}/hour)",
                command.candidates.len(),
                command.source_price
            ),
            Some(_) => format!(
                "{reason}: replacing {} node(s) (${:.4}/hour) with one cheaper node (from ${:.4}/hour)",
                command.candidates.len(),
                command.source_price,
                command.replacement_price
            ),
        };
        Self {
            reason,
            consolidation_type: command.method.consolidation_type(),
            candidates: command
                .candidates
                .iter()
                .map(|d| Candidate {
                    nodeclaim: d.nodeclaim.clone(),
                    node: d.node.clone(),
                    nodepool: d.nodepool.clone(),
                    pods: d.pods.len(),
                })
                .collect(),
            replacements: command.replacement.iter().cloned().collect(),
            message,
        }
    }

    fn decision(&self) -> &'static str {
        if self.replacements.is_empty() {
            "delete"
        } else {
            "replace"
        }
    }
}

/// Starts `start`. A failure part-way leaves candidates marked with replacements that do not
/// exist; the in-flight check rolls those back after the visibility grace.
pub async fn start(ctx: &Context, snapshot: &Snapshot, start: &Start) -> Result<(), kube::Error> {
    let replaced: Vec<&str> = start
        .candidates
        .iter()
        .map(|c| c.nodeclaim.as_str())
        .collect();
    let mut replacements: Vec<(String, NodeClaim)> = Vec::new();
    for planned in &start.replacements {
        // A replace whose replacement cannot be built must not become a delete.
        let Some(pool) = snapshot.nodepool(&planned.nodepool) else {
            tracing::warn!(nodeclaims = %replaced.join(","), nodepool = %planned.nodepool, "replacement's nodepool is gone; not disrupting");
            return Ok(());
        };
        let name = ctx.names.nodeclaim_name(&planned.nodepool, |n| {
            snapshot.store.nodeclaims.contains_key(n) || replacements.iter().any(|(r, _)| r == n)
        });
        let mut claim = build_nodeclaim(&name, pool, planned);
        claim
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                ANNOTATION_DISRUPTION_REPLACEMENT_FOR.to_string(),
                replaced.join(","),
            );
        replacements.push((name, claim));
    }
    let names: Vec<String> = replacements.iter().map(|(n, _)| n.clone()).collect();
    let recorded = InFlight::annotations(&names, ctx.clock.now());
    let api = nodeclaims(&ctx.client);
    let now = ctx.now();
    for candidate in &start.candidates {
        modify(&ctx.state, &api, &candidate.nodeclaim, |c| {
            let a = c.metadata.annotations.get_or_insert_with(BTreeMap::new);
            a.extend(recorded.iter().cloned());
            true
        })
        .await?;
        modify_status(&ctx.state, &api, &candidate.nodeclaim, |c| {
            set_claim_condition(
                c,
                CONDITION_DISRUPTION_REASON,
                STATUS_TRUE,
                start.reason,
                &start.message,
                now.clone(),
            )
        })
        .await?;
        if let Some(node) = &candidate.node
            && modify(&ctx.state, &nodes(&ctx.client), node, |n| {
                add_taint(n, &disrupted_taint())
            })
            .await?
            .is_some()
        {
            tracing::info!(node = %node, taint = "karpenter.sh/disrupted:NoSchedule", "tainted node");
        }
    }
    let decision = start.decision();
    let reason = start.reason.to_lowercase();
    let disrupted: Vec<String> = start
        .candidates
        .iter()
        .map(|c| c.node.clone().unwrap_or_else(|| c.nodeclaim.clone()))
        .collect();
    tracing::info!(
        reason = %reason,
        decision,
        consolidation_type = start.consolidation_type,
        disrupted_node_count = start.candidates.len(),
        replacement_node_count = names.len(),
        pod_count = start.candidates.iter().map(|c| c.pods).sum::<usize>(),
        disrupted_nodes = %disrupted.join(","),
        replacement_nodeclaims = %names.join(","),
        command = %start.message,
        "disrupting node(s)"
    );
    Metrics::inc(
        &ctx.metrics.voluntary_disruption_decisions,
        &[
            ("decision", decision),
            ("reason", &reason),
            ("consolidation_type", start.consolidation_type),
        ],
    );
    for candidate in &start.candidates {
        Metrics::inc(
            &ctx.metrics.voluntary_disruption_decisions_by_nodepool,
            &[
                ("nodepool", &candidate.nodepool),
                ("decision", decision),
                ("reason", &reason),
                ("consolidation_type", start.consolidation_type),
            ],
        );
        if let Some(claim) = snapshot.store.nodeclaims.get(&candidate.nodeclaim) {
            let note = if names.is_empty() {
                format!("Disrupting NodeClaim: {} ({})", start.reason, start.message)
            } else {
                format!(
                    "Launching NodeClaim: {} (replacing with {})",
                    start.reason,
                    names.join(", ")
                )
            };
            ctx.events
                .publish(
                    claim.as_ref(),
                    EventType::Normal,
                    "DisruptionLaunching",
                    &note,
                )
                .await;
        }
    }
    let first_pool = start
        .candidates
        .first()
        .map(|c| c.nodepool.clone())
        .unwrap_or_default();
    for (name, claim) in &replacements {
        match api.create(&PostParams::default(), claim).await {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, nodepool = %first_pool, reason = "disruption", "created nodeclaim");
                // driftwood never relaxes minValues (no MinValuesPolicy BestEffort).
                Metrics::inc(
                    &ctx.metrics.nodeclaims_created,
                    &[
                        ("reason", "disruption"),
                        ("nodepool", &first_pool),
                        ("min_values_relaxed", "false"),
                    ],
                );
            }
            Err(e) if is_conflict(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if replacements.is_empty() {
        for candidate in &start.candidates {
            delete(&api, &candidate.nodeclaim).await?;
            ctx.metrics.count_disrupted(
                snapshot,
                &candidate.nodeclaim,
                &candidate.nodepool,
                &reason,
            );
        }
    }
    Ok(())
}
