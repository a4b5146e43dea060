//! Drift marking end to end: the name-terms walkthrough (AMIDrift), template changes
//! (NodePoolDrifted naming the field), narrowed requirements (RequirementsDrifted on the nodes
//! outside only), and the fields that never drift (limits, weight, budgets).

use super::harness::{Harness, describe, kubelet_version, pod_ready};
use super::support::{
    MINUTE, claims_of, cluster, deployment, drift, edit, idle, initialized_of, name, nodepool,
    ready_pods,
};
use driftwood_api::wellknown::{
    DRIFT_NODEPOOL, DRIFT_REQUIREMENTS, LABEL_CAPACITY_TYPE, LABEL_NODE_INITIALIZED,
};
use driftwood_controller::{FeatureGates, Settings};
use std::collections::BTreeSet;

const NAME_TERMS: &str = "update-nodes-with-drift-name-terms";

#[tokio::test(start_paused = true)]
async fn name_terms_walkthrough_upgrades_1_27_to_1_28_by_ami_drift() {
    let settings = Settings {
        feature_gates: FeatureGates::parse("Drift=true").unwrap(),
        ..Settings::default()
    };
    let mut h = Harness::start("1.27", settings).await;
    let values = h.embedded.walkthrough_values("1.27").unwrap();
    h.apply_fixture(&format!("{NAME_TERMS}/latest-current-ami.yaml"), &values)
        .await;
    h.apply_fixture(&format!("{NAME_TERMS}/workload.yaml"), &values)
        .await;
    let app = "latest-current-ami";
    h.wait_until("3 pods on an initialized v1.27 node", 10 * MINUTE, |s| {
        ready_pods(s, app) == 3
    })
    .await;
    let s = h.snapshot();
    let old_nodes: BTreeSet<String> = s.store.nodes.keys().cloned().collect();
    assert_eq!(old_nodes.len(), 1, "{}", describe(&s));
    for node in s.store.nodes.values() {
        assert!(
            kubelet_version(node).starts_with("v1.27."),
            "{}",
            describe(&s)
        );
    }
    let old_instances: Vec<String> = h
        .embedded
        .cluster
        .aws()
        .instances()
        .into_iter()
        .map(|i| i.instance_id)
        .collect();
    assert_eq!(old_instances.len(), 1);

    // The walkthrough's upgrade: `kubectl get ec2nodeclass -o yaml | sed 's/1.27/1.28/' | apply`.
    let text = std::fs::read_to_string(
        super::super::blueprints().join(format!("{NAME_TERMS}/latest-current-ami.yaml")),
    )
    .unwrap()
    .replace("1.27", "1.28");
    h.min_ready.clear();
    h.apply(&driftwood::embedded::fill(&text, &values)).await;
    let mut reasons = BTreeSet::new();
    h.wait_until(
        "every node on v1.28 with the 3 pods on it",
        30 * MINUTE,
        |s| {
            for claim in s.store.nodeclaims.values() {
                if let Some((reason, _)) = drift(claim) {
                    reasons.insert(reason);
                }
            }
            !s.store.nodes.is_empty()
                && s.store.nodes.values().all(|n| {
                    kubelet_version(n).starts_with("v1.28.")
                        && n.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(LABEL_NODE_INITIALIZED))
                            .is_some_and(|v| v == "true")
                })
                && s.store.nodes.keys().all(|n| {
                    s.pods_on(n)
                        .iter()
                        .filter(|p| !p.is_terminating() && pod_ready(p))
                        .count()
                        == 3
                })
        },
    )
    .await;
    assert_eq!(
        reasons,
        BTreeSet::from(["AMIDrift".to_string()]),
        "the Drifted reason seen"
    );
    let s = h.snapshot();
    assert_eq!(s.store.nodes.len(), 1, "{}", describe(&s));
    assert!(s.store.nodes.keys().all(|n| !old_nodes.contains(n)));
    assert_eq!(ready_pods(&s, app), 3);
    // Wait out the simulated termination delay (30 s): the old instance is terminated.
    super::support::idle(&mut h, MINUTE).await;
    let aws = h.embedded.cluster.aws();
    for instance in aws.instances() {
        if old_instances.contains(&instance.instance_id) {
            assert_eq!(instance.state, "terminated", "{instance:?}");
        } else {
            assert_eq!(instance.state, "running", "{instance:?}");
        }
    }
    assert!(
        h.min_ready.get(app).copied().unwrap_or(0) >= 2,
        "availability: {:?}",
        h.min_ready
    );
}

/// A pool of two nodes (one 3-cpu pod each) whose budget lets nothing be disrupted, so drift
/// marks stay visible.
async fn two_held_nodes(spec_extra: &str) -> (Harness, String) {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool(
        "general",
        &format!("  disruption:\n    budgets:\n    - nodes: \"0\"\n{spec_extra}"),
        "",
    );
    h.apply(&pool).await;
    h.apply(&deployment("app", 2, "3", "general", "")).await;
    h.wait_until("two initialized nodes", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 2 && ready_pods(s, "app") == 2
    })
    .await;
    (h, pool)
}

#[tokio::test(start_paused = true)]
async fn limits_weight_and_budgets_drift_nothing() {
    let (mut h, pool) = two_held_nodes("  limits:\n    cpu: \"100\"\n  weight: 5\n").await;
    let pool = edit(&h, &pool, "cpu: \"100\"", "cpu: \"64\"").await;
    let pool = edit(&h, &pool, "weight: 5", "weight: 50").await;
    edit(
        &h,
        &pool,
        "    - nodes: \"0\"\n",
        "    - nodes: \"0\"\n    - nodes: \"1\"\n      reasons: [Drifted]\n",
    )
    .await;
    // Well past the drift re-check interval (5 min).
    idle(&mut h, 12 * MINUTE).await;
    let s = h.snapshot();
    let claims = claims_of(&s, "general");
    assert_eq!(claims.len(), 2);
    for claim in claims {
        assert_eq!(drift(claim), None, "{}", describe(&s));
    }
}

#[tokio::test(start_paused = true)]
async fn a_template_label_change_drifts_every_node_naming_the_field() {
    let (mut h, pool) = two_held_nodes("").await;
    edit(
        &h,
        &pool,
        "        pool: general\n",
        "        pool: general\n        team: blue\n",
    )
    .await;
    h.wait_until("both nodes drifted", 2 * MINUTE, |s| {
        let claims = claims_of(s, "general");
        claims.len() == 2 && claims.iter().all(|c| drift(c).is_some())
    })
    .await;
    for claim in claims_of(&h.snapshot(), "general") {
        let (reason, message) = drift(claim).unwrap();
        assert_eq!(reason, DRIFT_NODEPOOL, "{}", name(claim));
        assert!(
            message.contains("spec.template.metadata.labels"),
            "{}: {message}",
            name(claim)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn narrowing_a_requirement_drifts_only_the_nodes_outside_it() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool(
        "general",
        "  disruption:\n    budgets:\n    - nodes: \"0\"\n",
        "",
    )
    .replace(
        "values: [\"on-demand\"]",
        "values: [\"spot\", \"on-demand\"]",
    );
    h.apply(&pool).await;
    for capacity in ["spot", "on-demand"] {
        let selector = format!(
            "      nodeSelector:\n        pool: general\n        {LABEL_CAPACITY_TYPE}: {capacity}\n"
        );
        h.apply(&deployment(
            &format!("app-{capacity}"),
            1,
            "3",
            "",
            &selector,
        ))
        .await;
    }
    h.wait_until("a spot and an on-demand node", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 2
            && ready_pods(s, "app-spot") == 1
            && ready_pods(s, "app-on-demand") == 1
    })
    .await;
    type ClaimDrift = (String, String, Option<(String, String)>);
    let capacity_of = |h: &Harness| -> Vec<ClaimDrift> {
        claims_of(&h.snapshot(), "general")
            .into_iter()
            .map(|c| {
                let capacity = c
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_CAPACITY_TYPE))
                    .cloned()
                    .unwrap_or_default();
                (name(c), capacity, drift(c))
            })
            .collect()
    };
    edit(
        &h,
        &pool,
        "values: [\"spot\", \"on-demand\"]",
        "values: [\"on-demand\"]",
    )
    .await;
    h.wait_until("the spot node drifted", 2 * MINUTE, |s| {
        claims_of(s, "general").iter().any(|c| drift(c).is_some())
    })
    .await;
    // Past a full drift re-check, the on-demand node is still not drifted.
    idle(&mut h, 6 * MINUTE).await;
    let claims = capacity_of(&h);
    assert_eq!(claims.len(), 2, "{claims:?}");
    for (claim, capacity, drifted) in claims {
        match capacity.as_str() {
            "spot" => {
                let (reason, message) = drifted.unwrap_or_else(|| panic!("{claim} drifted"));
                assert_eq!(reason, DRIFT_REQUIREMENTS, "{claim}: {message}");
            }
            "on-demand" => assert_eq!(drifted, None, "{claim}"),
            other => panic!("{claim}: unexpected capacity type {other:?}"),
        }
    }
}
