//! Replacement safety: PDBs hold during a rollout, do-not-disrupt pods hold their node (until
//! they leave, or a terminationGracePeriod forces them out), a replacement that never
//! initializes is rolled back, a crash mid-command resumes without a duplicate, and `explain`
//! names the blocker in each case.

use super::harness::{Harness, describe};
use super::support::{
    DAEMONSET, MINUTE, claims_of, cluster, deployment, deployment_annotated, disrupting, drift,
    edit, events, events_about, explain, idle, initialized_of, name, nodepool, now, pdb,
    ready_pods,
};
use driftwood_api::condition::Conditions;
use driftwood_api::wellknown::{
    ANNOTATION_DISRUPTION_REPLACEMENTS, CONDITION_INITIALIZED, TAINT_DISRUPTED_KEY,
};
use driftwood_controller::Settings;
use kube::api::{Api, DeleteParams};
use std::collections::BTreeSet;
use std::time::Duration;

const DO_NOT_DISRUPT: &str = "{karpenter.sh/do-not-disrupt: \"true\"}";

fn node_has_disrupted_taint(h: &Harness, node: &str) -> bool {
    h.snapshot().store.nodes.get(node).is_some_and(|n| {
        n.spec
            .iter()
            .flat_map(|s| s.taints.iter().flatten())
            .any(|t| t.key == TAINT_DISRUPTED_KEY)
    })
}

/// Drifts every node of the pool `general` by adding a template label.
async fn drift_pool(h: &Harness, pool: &str) -> String {
    edit(
        h,
        pool,
        "        pool: general\n",
        "        pool: general\n        rev: \"2\"\n",
    )
    .await
}

fn originals(h: &Harness) -> BTreeSet<String> {
    claims_of(&h.snapshot(), "general")
        .into_iter()
        .map(name)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_pdb_holds_while_every_node_is_replaced() {
    let mut h = cluster(Settings::default()).await;
    // Budget 100%: only the PDB (minAvailable 2 of 3) paces the rollout.
    let pool = nodepool(
        "general",
        "  disruption:\n    budgets:\n    - nodes: \"100%\"\n",
        "",
    );
    h.apply(&pool).await;
    h.apply(&deployment("app", 3, "3", "general", "")).await;
    h.apply(&pdb("app", 2)).await;
    h.wait_until("three nodes, three pods", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 3 && ready_pods(s, "app") == 3
    })
    .await;
    let before = originals(&h);
    h.min_ready.clear();
    drift_pool(&h, &pool).await;
    // The harness asserts at every step that the PDB's 2 ready pods never drop below.
    h.wait_until("all three replaced", 60 * MINUTE, |s| {
        s.store.nodeclaims.keys().all(|n| !before.contains(n))
            && initialized_of(s, "general").len() == 3
            && ready_pods(s, "app") == 3
    })
    .await;
    assert!(
        h.min_ready.get("app").copied().unwrap_or(0) >= 2,
        "{:?}",
        h.min_ready
    );
}

#[tokio::test(start_paused = true)]
async fn a_pdb_at_zero_blocks_and_explain_says_so() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment("app", 1, "3", "general", "")).await;
    h.apply(&pdb("app", 1)).await;
    h.wait_until("a node", 10 * MINUTE, |s| ready_pods(s, "app") == 1)
        .await;
    let claim = originals(&h).into_iter().next().unwrap();
    drift_pool(&h, &pool).await;
    idle(&mut h, 5 * MINUTE).await;
    let s = h.snapshot();
    let c = &s.store.nodeclaims[&claim];
    assert!(drift(c).is_some(), "{}", describe(&s));
    assert!(!disrupting(c), "a PDB allowing 0 disruptions blocks it");
    let text = explain(&h, &claim).await;
    assert!(text.contains("spec.template.metadata.labels"), "{text}");
    assert!(text.contains("blocked:"), "{text}");
    assert!(text.contains("default/app"), "names the PDB: {text}");
}

#[tokio::test(start_paused = true)]
async fn a_do_not_disrupt_pod_holds_its_node_until_it_leaves() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    // Both on one 4-cpu node: a 1-cpu do-not-disrupt pod and a 2-cpu ordinary one.
    h.apply(&deployment_annotated(
        "guard",
        1,
        "1",
        "general",
        "",
        DO_NOT_DISRUPT,
    ))
    .await;
    h.apply(&deployment("app", 1, "2", "general", "")).await;
    h.wait_until("both pods on one node", 10 * MINUTE, |s| {
        ready_pods(s, "guard") == 1
            && ready_pods(s, "app") == 1
            && initialized_of(s, "general").len() == 1
    })
    .await;
    let claim = originals(&h).into_iter().next().unwrap();
    drift_pool(&h, &pool).await;
    idle(&mut h, 10 * MINUTE).await;
    let s = h.snapshot();
    let c = &s.store.nodeclaims[&claim];
    assert!(drift(c).is_some(), "{}", describe(&s));
    assert!(!disrupting(c), "held by the do-not-disrupt pod");
    assert_eq!(s.store.nodeclaims.len(), 1, "no replacement launched");
    let text = explain(&h, &claim).await;
    assert!(text.contains("spec.template.metadata.labels"), "{text}");
    assert!(text.contains("blocked:"), "{text}");
    assert!(text.contains("do-not-disrupt"), "{text}");

    // The pod leaves: the node is replaced.
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
        h.embedded.cluster.client(),
        "default",
    )
    .delete("guard", &DeleteParams::default())
    .await
    .unwrap();
    h.wait_until("the node replaced", 20 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&claim)
            && initialized_of(s, "general").len() == 1
            && ready_pods(s, "app") == 1
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn termination_grace_period_forces_a_do_not_disrupt_pod_out() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "      terminationGracePeriod: 5m\n");
    h.apply(&pool).await;
    h.apply(&deployment_annotated(
        "guard",
        1,
        "3",
        "general",
        "",
        DO_NOT_DISRUPT,
    ))
    .await;
    h.wait_until("a node", 10 * MINUTE, |s| ready_pods(s, "guard") == 1)
        .await;
    let claim = originals(&h).into_iter().next().unwrap();
    let node = h
        .snapshot()
        .node_of(&h.snapshot().store.nodeclaims[&claim])
        .and_then(|n| n.metadata.name.clone())
        .unwrap();
    let deleted_at = now(&h);
    driftwood_controller::api::nodeclaims(&h.embedded.cluster.client())
        .delete(&claim, &DeleteParams::default())
        .await
        .unwrap();
    // Well before the deadline the pod is still there and the node waits.
    idle(&mut h, 3 * MINUTE).await;
    let s = h.snapshot();
    assert!(s.store.nodes.contains_key(&node), "{}", describe(&s));
    assert!(
        s.pods_on(&node)
            .iter()
            .any(|p| p.labels().get("app").is_some_and(|a| a == "guard")),
        "the do-not-disrupt pod is not evicted: {}",
        describe(&s)
    );
    h.wait_until("the node gone", 10 * MINUTE, |s| {
        !s.store.nodes.contains_key(&node) && !s.store.nodeclaims.contains_key(&claim)
    })
    .await;
    let gone = now(&h) - deleted_at;
    // Deadline 5 min; then the instance terminates and the node goes (plus a little slack).
    assert!(
        (4 * 60..=5 * 60 + 90).contains(&gone),
        "the node went {gone} s after deletion (terminationGracePeriod 5m)"
    );
    h.wait_until("the pod rescheduled", 10 * MINUTE, |s| {
        ready_pods(s, "guard") == 1
    })
    .await;
    // Karpenter's events: the deadline told on the NodeClaim and its Node, and the pod deleted
    // past its PDB and do-not-disrupt annotation told why.
    for object in [&claim, &node] {
        let expiring: Vec<String> = events_about(&h, "default", object)
            .await
            .into_iter()
            .filter(|(reason, _)| reason == "TerminationGracePeriodExpiring")
            .map(|(_, note)| note)
            .collect();
        assert!(
            expiring.len() == 1 && expiring[0].starts_with("All pods will be deleted by 20"),
            "{object}: {expiring:?}"
        );
    }
    let disrupted: Vec<String> = events(&h, "default")
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Disrupted"))
        .map(|e| e.note.unwrap_or_default())
        .collect();
    assert!(
        disrupted.len() == 1
            && disrupted[0].starts_with("Deleting the pod to accommodate the terminationTime 20")
            && disrupted[0]
                .contains("This bypasses the PDB of the pod and the do-not-disrupt annotation."),
        "{disrupted:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_replacement_that_never_initializes_is_rolled_back() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment("app", 1, "3", "general", "")).await;
    h.wait_until("a node", 10 * MINUTE, |s| ready_pods(s, "app") == 1)
        .await;
    let claim = originals(&h).into_iter().next().unwrap();
    let node = h
        .snapshot()
        .node_of(&h.snapshot().store.nodeclaims[&claim])
        .and_then(|n| n.metadata.name.clone())
        .unwrap();
    // A startup taint nothing removes: new nodes never initialize. Adding it also drifts the
    // existing node (startupTaints are in the template hash).
    edit(
        &h,
        &pool,
        "      nodeClassRef:\n",
        "      startupTaints:\n      - key: example.com/never-ready\n        effect: NoSchedule\n      nodeClassRef:\n",
    )
    .await;
    h.wait_until("the command started", 5 * MINUTE, |s| {
        s.store
            .nodeclaims
            .get(&claim)
            .is_some_and(|c| disrupting(c))
    })
    .await;
    let started = now(&h);
    let replacement = h.snapshot().store.nodeclaims[&claim]
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DISRUPTION_REPLACEMENTS))
        .cloned()
        .unwrap();
    assert!(node_has_disrupted_taint(&h, &node));
    let text = explain(&h, &claim).await;
    assert!(
        text.contains("startupTaints"),
        "names the drifted field: {text}"
    );
    assert!(text.contains("in flight"), "{text}");
    assert!(text.contains(&replacement), "{text}");
    h.wait_until("the command rolled back", 20 * MINUTE, |s| {
        s.store
            .nodeclaims
            .get(&claim)
            .is_some_and(|c| !disrupting(c))
    })
    .await;
    let rolled_back = now(&h) - started;
    assert!(
        (600..=630).contains(&rolled_back),
        "rolled back {rolled_back} s after the command started (timeout 600 s)"
    );
    let s = h.snapshot();
    let c = &s.store.nodeclaims[&claim];
    assert!(
        c.metadata.deletion_timestamp.is_none(),
        "the old node keeps running"
    );
    assert!(c.is_true(CONDITION_INITIALIZED));
    assert!(s.store.nodes.contains_key(&node));
    assert!(!node_has_disrupted_taint(&h, &node), "its taint is removed");
    assert!(
        c.metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(ANNOTATION_DISRUPTION_REPLACEMENTS)),
        "the command is cleared"
    );
    assert_eq!(ready_pods(&s, "app"), 1);
    assert!(
        s.store
            .nodeclaims
            .get(&replacement)
            .is_none_or(|r| !r.is_true(CONDITION_INITIALIZED)),
        "the replacement never initialized"
    );
    let events = events_about(&h, "default", &claim).await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "DisruptionBlocked" && note.contains("rolled back")),
        "{events:?}"
    );
    // Karpenter's orchestration queue counts the failed command's replacement that never
    // initialized, once.
    let metrics = h.embedded.ctx().expect("controllers run").metrics.render();
    assert!(
        metrics.contains(
            "karpenter_voluntary_disruption_queue_failures_total{decision=\"replace\",reason=\"drifted\",consolidation_type=\"replace\"} 1\n"
        ),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("queue_failures"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[tokio::test(start_paused = true)]
async fn a_crash_mid_command_resumes_without_a_duplicate_replacement() {
    let (mut h, claim) = one_drifted_node().await;
    // The command is recorded on the candidate first, its replacement created after (a write's
    // latency later), then launched: crash once all three are written, before the replacement
    // initialized. (A crash between CreateFleet's answer and the providerID's write leaves an
    // instance no NodeClaim names, which the next leader launches again and garbage collection
    // terminates, as in Karpenter; the chaos campaign's orphaned-instance invariant judges that
    // window.)
    h.wait_until("the command started", 5 * MINUTE, |s| {
        s.store.nodeclaims.get(&claim).is_some_and(|c| {
            disrupting(c)
                && recorded_replacement(c).is_some_and(|r| {
                    s.store.nodeclaims.get(&r).is_some_and(|r| {
                        r.status.as_ref().is_some_and(|st| st.provider_id.is_some())
                    })
                })
        })
    })
    .await;
    let s = h.snapshot();
    let replacement = recorded_replacement(&s.store.nodeclaims[&claim]).unwrap();
    assert!(
        !s.store.nodeclaims[&replacement].is_true(CONDITION_INITIALIZED),
        "crashing before the replacement initialized"
    );
    h.embedded.kill_controllers();
    idle(&mut h, Duration::from_secs(90)).await;
    h.embedded.start_controllers();
    h.wait_until("the old node replaced", 20 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&claim)
            && initialized_of(s, "general").len() == 1
            && ready_pods(s, "app") == 1
    })
    .await;
    idle(&mut h, 3 * MINUTE).await;
    let s = h.snapshot();
    let names: Vec<String> = s.store.nodeclaims.keys().cloned().collect();
    assert_eq!(
        names,
        vec![replacement],
        "the recorded replacement, no other"
    );
    // Two instances ever: the original and the one replacement.
    assert_eq!(h.embedded.cluster.aws().instances().len(), 2);
    assert_eq!(h.embedded.cluster.aws().fleet_calls(), 2);
}

/// One node running one pod in pool `general`, just drifted: the harness and its NodeClaim.
async fn one_drifted_node() -> (Harness, String) {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment("app", 1, "3", "general", "")).await;
    h.wait_until("a node", 10 * MINUTE, |s| ready_pods(s, "app") == 1)
        .await;
    let claim = originals(&h).into_iter().next().unwrap();
    drift_pool(&h, &pool).await;
    (h, claim)
}

/// The replacement a candidate's command records, if it records one.
fn recorded_replacement(claim: &driftwood_api::NodeClaim) -> Option<String> {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DISRUPTION_REPLACEMENTS))
        .filter(|r| !r.is_empty())
        .cloned()
}

/// Found with the API server's latency on: a leader that dies after recording a command on
/// its candidate and before creating the replacement it names. The next leader waits the
/// visibility grace for the named replacement, rolls the command back ("a replacement
/// nodeclaim is gone"), and plans the node again with a replacement of its own: one node
/// replaced, one replacement instance launched, the name recorded first never created.
#[tokio::test(start_paused = true)]
async fn a_crash_between_recording_a_command_and_creating_its_replacement_rolls_back_and_replans() {
    let (mut h, claim) = one_drifted_node().await;
    h.wait_until("the command recorded", 5 * MINUTE, |s| {
        s.store
            .nodeclaims
            .get(&claim)
            .is_some_and(|c| disrupting(c) && recorded_replacement(c).is_some())
    })
    .await;
    let recorded = recorded_replacement(&h.snapshot().store.nodeclaims[&claim]).unwrap();
    h.embedded.kill_controllers();
    let nodeclaims: Api<driftwood_api::NodeClaim> = Api::all(h.embedded.cluster.client());
    assert!(
        nodeclaims.get_opt(&recorded).await.unwrap().is_none(),
        "the leader died before creating {recorded} (the API server's write latency leaves that window)"
    );
    idle(&mut h, Duration::from_secs(30)).await;
    h.embedded.start_controllers();
    h.wait_until("the old node replaced", 20 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&claim)
            && initialized_of(s, "general").len() == 1
            && ready_pods(s, "app") == 1
    })
    .await;
    idle(&mut h, 3 * MINUTE).await;
    let s = h.snapshot();
    let names: Vec<String> = s.store.nodeclaims.keys().cloned().collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert_ne!(names[0], recorded, "the recorded name was never created");
    assert_eq!(h.embedded.cluster.aws().instances().len(), 2);
    assert_eq!(h.embedded.cluster.aws().fleet_calls(), 2);
    let events = events_about(&h, "default", &claim).await;
    assert!(
        events
            .iter()
            .any(|(reason, note)| reason == "DisruptionBlocked"
                && note.contains("a replacement nodeclaim is gone")),
        "{events:?}"
    );
}

/// An untyped API for a cluster-scoped kind, so tests see and write fields driftwood's types do
/// not model.
fn dynamic_api(
    h: &Harness,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
) -> Api<kube::api::DynamicObject> {
    let resource = kube::api::ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    };
    Api::all_with(h.embedded.cluster.client(), &resource)
}

/// The raw JSON of a cluster-scoped object (unknown fields included).
async fn raw(
    h: &Harness,
    (group, version, kind, plural): (&str, &str, &str, &str),
    name: &str,
) -> Option<serde_json::Value> {
    let object = dynamic_api(h, group, version, kind, plural)
        .get_opt(name)
        .await
        .unwrap()?;
    Some(serde_json::to_value(object).unwrap())
}

/// A merge patch of a cluster-scoped object.
async fn merge(
    h: &Harness,
    (group, version, kind, plural): (&str, &str, &str, &str),
    name: &str,
    patch: serde_json::Value,
) {
    dynamic_api(h, group, version, kind, plural)
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(patch),
        )
        .await
        .unwrap();
}

const NODECLAIMS: (&str, &str, &str, &str) = ("karpenter.sh", "v1", "NodeClaim", "nodeclaims");
const NODES: (&str, &str, &str, &str) = ("", "v1", "Node", "nodes");

/// Issue 14, item 7: driftwood's writes are patches, so what its types do not model survives:
/// a NodeClaim adopted from Karpenter (a status field of a newer CRD that driftwood lacks, another
/// controller's annotation, Karpenter's hash version) and its Node (a field from a newer
/// Kubernetes) stay intact while driftwood re-stamps the hashes, marks drift, taints the node
/// and sets DisruptionReason.
#[tokio::test(start_paused = true)]
async fn fields_driftwood_does_not_model_survive_its_writes() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment("app", 1, "3", "general", "")).await;
    h.wait_until("one node", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 1 && ready_pods(s, "app") == 1
    })
    .await;
    let claim = name(initialized_of(&h.snapshot(), "general")[0]);
    let node = h.snapshot().store.nodeclaims[&claim]
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    // A newer NodeClaim CRD declares a status field driftwood's types lack (the API server
    // prunes fields its CRD does not declare, and a NodeClaim's spec is immutable, so a status
    // field of a newer CRD is where a NodeClaim carries what driftwood does not model).
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(h.embedded.cluster.client());
    crds.patch(
        "nodeclaims.karpenter.sh",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Json::<()>(
            serde_json::from_value(serde_json::json!([{"op": "add",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/futureStatus",
                "value": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}]))
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    merge(
        &h,
        NODECLAIMS,
        &claim,
        serde_json::json!({
            "metadata": {"annotations": {
                "other.example.com/owned": "keep",
                "karpenter.sh/nodepool-hash-version": "v3"
            }}
        }),
    )
    .await;
    dynamic_api(&h, NODECLAIMS.0, NODECLAIMS.1, NODECLAIMS.2, NODECLAIMS.3)
        .patch_status(
            &claim,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"status": {"futureStatus": {"kept": true}}}),
            ),
        )
        .await
        .unwrap();
    merge(
        &h,
        NODES,
        &node,
        serde_json::json!({"spec": {"futureNodeField": "kept"}, "metadata": {"labels": {"other.example.com/zone-group": "a"}}}),
    )
    .await;
    // Re-stamped under driftwood's hash version, not drifted.
    h.wait_until("re-stamped", 5 * MINUTE, |s| {
        s.store.nodeclaims[&claim]
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("karpenter.sh/nodepool-hash-version"))
            .is_some_and(|v| v.starts_with("dw-"))
    })
    .await;
    assert!(drift(&h.snapshot().store.nodeclaims[&claim]).is_none());
    // Now drift it and let the command start: Drifted, DisruptionReason, taint.
    drift_pool(&h, &pool).await;
    h.wait_until("the node tainted for disruption", 10 * MINUTE, |s| {
        disrupting(&s.store.nodeclaims[&claim])
    })
    .await;
    let claim_json = raw(&h, NODECLAIMS, &claim).await.unwrap();
    assert_eq!(
        claim_json["status"]["futureStatus"]["kept"], true,
        "{claim_json:#}"
    );
    assert_eq!(
        claim_json["metadata"]["annotations"]["other.example.com/owned"],
        "keep"
    );
    let conditions: Vec<&str> = claim_json["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert!(conditions.contains(&"Drifted") && conditions.contains(&"DisruptionReason"));
    let node_json = raw(&h, NODES, &node).await.unwrap();
    assert_eq!(
        node_json["spec"]["futureNodeField"], "kept",
        "{node_json:#}"
    );
    assert_eq!(
        node_json["metadata"]["labels"]["other.example.com/zone-group"],
        "a"
    );
    assert!(node_has_disrupted_taint(&h, &node));
}

/// The PersistentVolumes attached to more than one node at once (never allowed for these
/// ReadWriteOnce volumes).
fn multi_attached(s: &driftwood_controller::state::Snapshot) -> Vec<String> {
    let mut nodes_of: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for va in s.store.volume_attachments.values() {
        if let Some(pv) = &va.spec.source.persistent_volume_name {
            nodes_of
                .entry(pv.clone())
                .or_default()
                .insert(va.spec.node_name.clone());
        }
    }
    nodes_of
        .into_iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|(pv, _)| pv)
        .collect()
}

/// Issue 14, item 5: a StatefulSet pod with a persistent volume moves to the replacement node
/// without a multi-attach window. The node leaves external load balancers when its drain
/// starts; its instance is terminated only once its VolumeAttachment is gone (the embedded
/// cluster's attach/detach controller detaches it after the pod has left, and attaches the
/// volume to the new node only then); the StatefulSet recreates the pod only once the old one
/// is gone; and at no step is the volume attached to two nodes.
#[tokio::test(start_paused = true)]
async fn a_statefulset_volume_moves_without_a_multi_attach_window() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(
        r#"
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: default
spec:
  replicas: 1
  serviceName: db
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      nodeSelector:
        pool: general
      containers:
      - name: db
        image: public.ecr.aws/eks-distro/kubernetes/pause:v1.33.0-eks-1-33-4
        resources:
          requests:
            cpu: "3"
            memory: 1Gi
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: ["ReadWriteOnce"]
      resources:
        requests:
          storage: 10Gi
"#,
    )
    .await;
    h.wait_until("db-0 running with its volume attached", 10 * MINUTE, |s| {
        ready_pods(s, "db") == 1 && s.store.volume_attachments.len() == 1
    })
    .await;
    let claim = name(initialized_of(&h.snapshot(), "general")[0]);
    let node = h.snapshot().store.nodeclaims[&claim]
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    drift_pool(&h, &pool).await;
    let mut labelled = false;
    let mut explained = false;
    let mut detached_before_termination = false;
    let mut volumes_awaited = false;
    for _ in 0..(30 * 60) {
        let s = h.snapshot();
        // Karpenter's VolumesDetached condition: Unknown (AwaitingVolumeDetachment) while the
        // attachment holds the instance. (It turns True in the pass that terminates the
        // instance and releases the NodeClaim, too briefly to sample; the termination decision
        // tests cover it.)
        if let Some(c) = s.store.nodeclaims.get(&claim)
            && let Some(volumes) = c.condition(driftwood_api::wellknown::CONDITION_VOLUMES_DETACHED)
        {
            volumes_awaited |= volumes.status == "Unknown"
                && volumes.reason.as_deref() == Some("AwaitingVolumeDetachment");
        }
        assert!(
            multi_attached(&s).is_empty(),
            "multi-attach: {:?}\n{}",
            multi_attached(&s),
            describe(&s)
        );
        let attached_here = s
            .store
            .volume_attachments
            .values()
            .any(|va| va.spec.node_name == node);
        let terminating =
            s.store.nodeclaims.get(&claim).is_none_or(|c| {
                c.is_true(driftwood_api::wellknown::CONDITION_INSTANCE_TERMINATING)
            });
        assert!(
            !(attached_here && terminating),
            "the instance is terminating with its volume still attached"
        );
        if terminating && !attached_here {
            detached_before_termination = true;
        }
        if let Some(n) = s.store.nodes.get(&node) {
            labelled |= n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("node.kubernetes.io/exclude-from-external-load-balancers"))
                .is_some_and(|v| v == "karpenter");
        }
        let drained = s
            .store
            .nodeclaims
            .get(&claim)
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
            && s.pods_on(&node).is_empty()
            && attached_here;
        if drained && !explained {
            let text = explain(&h, &claim).await;
            assert!(
                text.contains(
                    "waiting for 1 VolumeAttachment(s) to detach before the instance is terminated"
                ),
                "{text}"
            );
            explained = true;
        }
        let moved = !s.store.nodes.contains_key(&node)
            && ready_pods(&s, "db") == 1
            && s.store
                .volume_attachments
                .values()
                .all(|va| va.spec.node_name != node);
        if moved {
            break;
        }
        idle(&mut h, Duration::from_secs(1)).await;
    }
    let s = h.snapshot();
    assert!(!s.store.nodes.contains_key(&node), "{}", describe(&s));
    assert_eq!(ready_pods(&s, "db"), 1, "{}", describe(&s));
    assert!(
        labelled,
        "the node was labelled out of external load balancers"
    );
    assert!(
        explained,
        "explain named the VolumeAttachment it waited for"
    );
    assert!(detached_before_termination);
    assert!(
        volumes_awaited,
        "VolumesDetached was Unknown while the volume was attached"
    );
    let awaiting: Vec<String> = events_about(&h, "default", &node)
        .await
        .into_iter()
        .filter(|(reason, _)| reason == "AwaitingVolumeDetachment")
        .map(|(_, note)| note)
        .collect();
    assert_eq!(
        awaiting.len(),
        1,
        "said once, when the wait began: {awaiting:?}"
    );
    assert!(
        awaiting[0].starts_with("Awaiting deletion of bound volumeattachments (csi-"),
        "{awaiting:?}"
    );
    let va = s.store.volume_attachments.values().next().unwrap();
    assert_ne!(
        va.spec.node_name, node,
        "the volume is attached to the new node"
    );
}

/// Issue 14, item 4 (Karpenter termination suite: "should delete nodes with no underlying
/// instance even if not fully drained"): a node whose drain a do-not-disrupt pod holds forever
/// (no terminationGracePeriod) is released without a drain once it is NotReady and its
/// instance is gone.
#[tokio::test(start_paused = true)]
async fn a_not_ready_node_whose_instance_is_gone_is_released_without_a_drain() {
    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool("general", "", "")).await;
    h.apply(&deployment_annotated(
        "app",
        1,
        "3",
        "general",
        "",
        DO_NOT_DISRUPT,
    ))
    .await;
    h.wait_until("one node", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 1 && ready_pods(s, "app") == 1
    })
    .await;
    let claim = name(initialized_of(&h.snapshot(), "general")[0]);
    let provider_id = h.snapshot().store.nodeclaims[&claim]
        .status
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap();
    let node = h.snapshot().store.nodeclaims[&claim]
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    let api: Api<driftwood_api::NodeClaim> = Api::all(h.embedded.cluster.client());
    api.delete(&claim, &DeleteParams::default()).await.unwrap();
    idle(&mut h, Duration::from_secs(60)).await;
    assert!(
        h.snapshot().store.nodes.contains_key(&node),
        "the do-not-disrupt pod holds the drain while the node is Ready"
    );
    // The instance goes away behind driftwood's back (a spot interruption, a manual stop).
    let instance = provider_id.rsplit('/').next().unwrap().to_string();
    h.embedded
        .cluster
        .aws_ports()
        .ec2
        .terminate_instances(vec![instance])
        .await
        .unwrap();
    h.wait_until("the NodeClaim and its node released", 5 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&claim) && !s.store.nodes.contains_key(&node)
    })
    .await;
}

/// Issue 14, item 6: expiration is forceful and outside budgets, as in Karpenter — a drift
/// command in flight for the same NodeClaim (its replacement never initializing) does not hold
/// it back.
#[tokio::test(start_paused = true)]
async fn expiration_is_not_held_by_a_drift_command_in_flight() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "      expireAfter: 15m\n");
    h.apply(&pool).await;
    h.apply(&deployment("app", 1, "3", "general", "")).await;
    h.wait_until("one node", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 1 && ready_pods(s, "app") == 1
    })
    .await;
    let claim = name(initialized_of(&h.snapshot(), "general")[0]);
    let created = h.snapshot().store.nodeclaims[&claim]
        .metadata
        .creation_timestamp
        .as_ref()
        .unwrap()
        .0
        .as_second();
    // A startup taint nothing removes: the node drifts and its replacement never initializes,
    // so a drift command stays in flight (rolled back and retried every 10 minutes).
    edit(
        &h,
        &pool,
        "      expireAfter: 15m\n",
        "      expireAfter: 15m\n      startupTaints:\n      - key: example.com/never-ready\n        effect: NoSchedule\n",
    )
    .await;
    h.wait_until("a drift command in flight", 5 * MINUTE, |s| {
        disrupting(&s.store.nodeclaims[&claim])
    })
    .await;
    h.wait_until("the NodeClaim deleted on expiry", 20 * MINUTE, |s| {
        s.store
            .nodeclaims
            .get(&claim)
            .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
    })
    .await;
    let at = now(&h);
    assert!(
        at <= created + 15 * 60 + 30,
        "expired at +{}s, not within 30 s of its expiry (+900 s)",
        at - created
    );
}

/// Issue 14, item 3 (Karpenter candidate filtering: "should not consider candidates that have
/// fully blocking PDBs on daemonset pods"): a DaemonSet pod under a PDB that allows no
/// disruption blocks its node's drift, as in Karpenter's evictable set.
#[tokio::test(start_paused = true)]
async fn a_daemonset_pod_under_a_pdb_at_zero_blocks_drift() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment("app", 1, "2", "general", "")).await;
    h.apply(DAEMONSET).await;
    h.apply(&pdb("agent", 1)).await; // one agent pod, minAvailable 1: no disruption allowed
    h.wait_until("a node with both pods", 10 * MINUTE, |s| {
        ready_pods(s, "app") == 1 && ready_pods(s, "agent") == 1
    })
    .await;
    let claim = originals(&h).into_iter().next().unwrap();
    drift_pool(&h, &pool).await;
    idle(&mut h, 5 * MINUTE).await;
    let s = h.snapshot();
    let c = &s.store.nodeclaims[&claim];
    assert!(drift(c).is_some(), "{}", describe(&s));
    assert!(!disrupting(c), "the DaemonSet pod's PDB at zero blocks it");
    let text = explain(&h, &claim).await;
    assert!(text.contains("pdb \"default/agent\""), "{text}");
}

/// Issue 14, item 3 (Karpenter candidate filtering: pods tolerating the disrupted taint are not
/// PDB-checked): a pod that tolerates `karpenter.sh/disrupted:NoSchedule` stays with its node,
/// so its PDB at zero does not hold the drift.
#[tokio::test(start_paused = true)]
async fn a_pod_tolerating_the_disrupted_taint_does_not_hold_drift_with_its_pdb() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment("app", 1, "2", "general", "")).await;
    h.apply(&deployment(
        "sticky",
        1,
        "1",
        "general",
        "      tolerations:\n      - key: karpenter.sh/disrupted\n        operator: Exists\n",
    ))
    .await;
    h.apply(&pdb("sticky", 1)).await;
    h.wait_until("a node with both pods", 10 * MINUTE, |s| {
        ready_pods(s, "app") == 1
            && ready_pods(s, "sticky") == 1
            && initialized_of(s, "general").len() == 1
    })
    .await;
    let claim = originals(&h).into_iter().next().unwrap();
    drift_pool(&h, &pool).await;
    h.wait_until("the node chosen for replacement", 5 * MINUTE, |s| {
        s.store
            .nodeclaims
            .get(&claim)
            .is_none_or(|c| disrupting(c) || c.metadata.deletion_timestamp.is_some())
    })
    .await;
}

/// Issue 14, item 4 (Karpenter termination suite: "should bypass pods which are stuck
/// terminating past their grace period"): a pod that never finishes terminating holds the drain
/// only until a minute past its deletionTimestamp; then the node goes, and explain says why.
#[tokio::test(start_paused = true)]
async fn a_pod_stuck_terminating_stops_holding_the_drain_a_minute_after_its_deadline() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment_annotated(
        "stuck",
        1,
        "2",
        "general",
        "",
        "{sim.driftwood.sh/termination: never}",
    ))
    .await;
    h.wait_until("one node", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 1 && ready_pods(s, "stuck") == 1
    })
    .await;
    let claim = originals(&h).into_iter().next().unwrap();
    let node = h.snapshot().store.nodeclaims[&claim]
        .status
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap();
    drift_pool(&h, &pool).await;
    let stuck_since = |s: &driftwood_controller::state::Snapshot| {
        s.pods_on(&node)
            .iter()
            .filter_map(|p| p.deleted)
            .map(|t| t.as_second())
            .min()
    };
    h.wait_until("the pod evicted and stuck terminating", 15 * MINUTE, |s| {
        stuck_since(s).is_some()
    })
    .await;
    let deletion = stuck_since(&h.snapshot()).unwrap();
    // Until a minute past its deletionTimestamp the drain waits for it.
    while now(&h) <= deletion + 60 {
        assert!(h.snapshot().store.nodes.contains_key(&node));
        idle(&mut h, Duration::from_secs(5)).await;
    }
    h.wait_until("the node released", 2 * MINUTE, |s| {
        !s.store.nodes.contains_key(&node)
    })
    .await;
}

/// Issue 14, item 3 (Karpenter: "can replace nodes, considers PDB policy"): with
/// `unhealthyPodEvictionPolicy: AlwaysAllow`, a pod that is not Ready does not hold its node even
/// though its PDB allows no disruption, and the Eviction API lets it through.
#[tokio::test(start_paused = true)]
async fn always_allow_lets_an_unready_pod_through_a_pdb_at_zero() {
    let mut h = cluster(Settings::default()).await;
    let pool = nodepool("general", "", "");
    h.apply(&pool).await;
    h.apply(&deployment_annotated(
        "flaky",
        1,
        "2",
        "general",
        "",
        "{sim.driftwood.sh/ready: \"false\"}",
    ))
    .await;
    h.apply(
        r#"
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: flaky
  namespace: default
spec:
  minAvailable: 1
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      app: flaky
"#,
    )
    .await;
    h.wait_until("one node with the unready pod", 10 * MINUTE, |s| {
        initialized_of(s, "general").len() == 1
            && s.store.pods.values().any(|p| {
                p.labels().get("app").map(String::as_str) == Some("flaky")
                    && p.phase.map(|phase| phase.as_str()) == Some("Running")
            })
    })
    .await;
    let claim = originals(&h).into_iter().next().unwrap();
    drift_pool(&h, &pool).await;
    h.wait_until("the node replaced", 15 * MINUTE, |s| {
        !s.store.nodeclaims.contains_key(&claim)
    })
    .await;
}
