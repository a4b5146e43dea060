//! Steering a NodePool's rollout from outside the controller: pause and resume (the
//! `driftwood.sh/rollout-paused` annotation, which kubectl and GitOps tools can set as well;
//! resume also clears a rollout policy's halt) and
//! the rollout's progress read from the status the disruption loop writes
//! (`driftwood rollout pause|resume|status`).

use driftwood_api::NodePool;
use driftwood_api::wellknown::{ANNOTATION_ROLLOUT_PAUSED, CONDITION_ROLLOUT_COMPLETE};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Why a rollout command failed, naming the NodePool.
#[derive(Debug, thiserror::Error)]
pub enum RolloutError {
    #[error("nodepool {0:?} not found")]
    NotFound(String),
    #[error(
        "nodepool {0:?} has no rollout status: the driftwood controller has not written it yet, or the NodePool CRD installed is Karpenter's (it prunes status.rollout; install driftwood's: driftwood crds | kubectl apply -f -)"
    )]
    NoStatus(String),
    #[error("{target:?} is not a NodePool: write nodepool/NAME (or np/NAME, or NAME)")]
    NotANodePool { target: String },
    #[error("nodepool {name:?}: {source}")]
    Api {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The NodePool name in `nodepool/NAME`, `nodepools/NAME`, `np/NAME`,
/// `nodepool.karpenter.sh/NAME` or a bare `NAME`.
pub fn nodepool_name(target: &str) -> Result<&str, RolloutError> {
    let name = match target.split_once('/') {
        Some((kind, name))
            if [
                "nodepool",
                "nodepools",
                "np",
                "nps",
                "nodepool.karpenter.sh",
                "nodepools.karpenter.sh",
            ]
            .contains(&kind.to_ascii_lowercase().as_str()) =>
        {
            name
        }
        Some(_) => "",
        None => target,
    };
    if name.is_empty() || name.contains('/') {
        return Err(RolloutError::NotANodePool {
            target: target.to_string(),
        });
    }
    Ok(name)
}

/// Pauses (`paused`) or resumes the rollout of NodePool `name`: a merge patch of the one
/// annotation, so nothing else on the object is touched.
pub async fn set_paused(api: &Api<NodePool>, name: &str, paused: bool) -> Result<(), RolloutError> {
    let value = if paused { json!("true") } else { json!(null) };
    let patch = json!({"metadata": {"annotations": {ANNOTATION_ROLLOUT_PAUSED: value}}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            Err(RolloutError::NotFound(name.to_string()))
        }
        Err(source) => Err(RolloutError::Api {
            name: name.to_string(),
            source,
        }),
    }
}

/// Clears a halt of NodePool `name`'s rollout (a failed health gate of its rollout policy): a
/// merge patch of its status, conditional on the version read, so the soak of the halted wave
/// starts again. Returns the halt cleared (None: the rollout was not halted).
pub async fn clear_halt(
    api: &Api<NodePool>,
    name: &str,
) -> Result<Option<driftwood_api::nodepool::RolloutHalt>, RolloutError> {
    let api_error = |source| RolloutError::Api {
        name: name.to_string(),
        source,
    };
    let pool = api
        .get_opt(name)
        .await
        .map_err(api_error)?
        .ok_or_else(|| RolloutError::NotFound(name.to_string()))?;
    let halt = pool
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.policy.as_ref())
        .and_then(|p| p.halted.clone());
    if halt.is_none() {
        return Ok(None);
    }
    let patch = json!({
        "metadata": {"resourceVersion": pool.metadata.resource_version},
        "status": {"rollout": {"policy": {"halted": null, "soakStartedAt": null}}}
    });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(api_error)?;
    Ok(halt)
}

/// What `rollout status` says of a NodePool now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Every node up to date and nothing disrupting, judged against the pool's current spec.
    pub complete: bool,
    /// One line, as `kubectl rollout status` prints.
    pub line: String,
}

/// Reads the rollout of `pool` from its status.
pub fn progress(pool: &NodePool) -> Result<Progress, RolloutError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let status = pool.status.as_ref();
    let rollout = status
        .and_then(|s| s.rollout.as_ref())
        .ok_or_else(|| RolloutError::NoStatus(name.clone()))?;
    let condition = status
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == CONDITION_ROLLOUT_COMPLETE)
        })
        .ok_or_else(|| RolloutError::NoStatus(name.clone()))?;
    let message = condition.message.clone().unwrap_or_default();
    // A status written before the last spec change says nothing yet about the new spec.
    let current = rollout.observed_generation == pool.metadata.generation
        && condition.observed_generation == pool.metadata.generation;
    if !current {
        return Ok(Progress {
            complete: false,
            line: format!(
                "Waiting for nodepool {name:?} rollout to start: the controller has not compared the nodes with generation {} yet",
                pool.metadata.generation.unwrap_or_default()
            ),
        });
    }
    if condition.status == "True" {
        return Ok(Progress {
            complete: true,
            line: format!("nodepool {name:?} successfully rolled out: {message}"),
        });
    }
    let reason = condition.reason.clone().unwrap_or_default();
    Ok(Progress {
        complete: false,
        line: format!("Waiting for nodepool {name:?} rollout to finish ({reason}): {message}"),
    })
}

/// Fetches NodePool `name` and reads its rollout.
pub async fn current(api: &Api<NodePool>, name: &str) -> Result<Progress, RolloutError> {
    match api.get_opt(name).await {
        Ok(Some(pool)) => progress(&pool),
        Ok(None) => Err(RolloutError::NotFound(name.to_string())),
        Err(source) => Err(RolloutError::Api {
            name: name.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(generation: i64, status: serde_json::Value) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "general", "generation": generation},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}},
            "status": status
        }))
        .expect("nodepool")
    }

    fn status(generation: i64, complete: &str, reason: &str, message: &str) -> serde_json::Value {
        json!({
            "rollout": {"observedGeneration": generation, "upToDate": 3, "drifted": 1, "disrupting": 1, "blocked": 0, "paused": false},
            "conditions": [{"type": "RolloutComplete", "status": complete, "reason": reason, "message": message,
                            "observedGeneration": generation, "lastTransitionTime": "2026-07-20T09:00:00Z"}]
        })
    }

    #[test]
    fn targets_name_a_nodepool_as_kubectl_does() {
        for target in [
            "nodepool/general",
            "np/general",
            "nodepools.karpenter.sh/general",
            "general",
        ] {
            assert_eq!(nodepool_name(target).unwrap(), "general", "{target}");
        }
        for target in ["deployment/web", "nodepool/", "nodepool/a/b", ""] {
            let error = nodepool_name(target).unwrap_err().to_string();
            assert!(error.contains("is not a NodePool"), "{target}: {error}");
        }
    }

    #[test]
    fn progress_reads_the_condition_of_the_current_generation() {
        let done = progress(&pool(
            2,
            status(2, "True", "Complete", "5 of 5 nodes up to date"),
        ))
        .unwrap();
        assert!(done.complete);
        assert_eq!(
            done.line,
            "nodepool \"general\" successfully rolled out: 5 of 5 nodes up to date"
        );
        let going = progress(&pool(
            2,
            status(2, "False", "Blocked", "every drifted node is blocked"),
        ))
        .unwrap();
        assert!(!going.complete);
        assert_eq!(
            going.line,
            "Waiting for nodepool \"general\" rollout to finish (Blocked): every drifted node is blocked"
        );
        // Complete for generation 1 says nothing of generation 2's nodes.
        let stale = progress(&pool(
            2,
            status(1, "True", "Complete", "5 of 5 nodes up to date"),
        ))
        .unwrap();
        assert!(!stale.complete, "{}", stale.line);
        assert!(stale.line.contains("generation 2"), "{}", stale.line);
        let error = progress(&pool(2, json!({}))).unwrap_err().to_string();
        assert!(
            error.contains("no rollout status") && error.contains("prunes status.rollout"),
            "{error}"
        );
    }
}
