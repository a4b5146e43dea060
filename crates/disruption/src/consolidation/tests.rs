//! Consolidation planning, with cases re-expressed from Karpenter's consolidation, emptiness
//! and validation suites (pkg/controllers/disruption/*_test.go), named after the test they
//! come from.

use super::*;
use crate::candidate::PodView;
use driftwood_api::nodepool::{Budget, NodePoolSpec as ApiNodePoolSpec};
use driftwood_api::wellknown::{CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, LABEL_CAPACITY_TYPE};
use driftwood_scheduling::resources::{CPU, MEMORY, PODS};
use driftwood_scheduling::testkit::{self, GIB, MIB};
use driftwood_scheduling::{ExistingNode, Resources, SimulationInput};
use std::sync::Arc;

const ZONE: &str = "test-zone-1";

struct Cluster {
    views: Vec<NodeView>,
    world: SimulationInput,
    pools: Vec<NodePool>,
    spot_to_spot: bool,
}

/// fake-it-N: N+1 cores, 2(N+1) GiB, priced 0.033/h per core on demand (spot 30% less).
fn price_of(it: usize, capacity_type: &str) -> f64 {
    let p = (it as f64 + 1.0) * 0.025 + 2.0 * (it as f64 + 1.0) * 0.004;
    if capacity_type == CAPACITY_TYPE_SPOT {
        p * 0.7
    } else {
        p
    }
}

impl Cluster {
    fn new() -> Self {
        Self {
            views: Vec::new(),
            world: SimulationInput {
                nodepools: vec![
                    testkit::nodepool("default", testkit::fake_instance_types(20)),
                    testkit::nodepool("other", testkit::fake_instance_types(20)),
                ],
                ..Default::default()
            },
            pools: vec![pool("default"), pool("other")],
            spot_to_spot: false,
        }
    }

    /// A Consolidatable node of `nodepool` on instance type fake-it-`it` with one pod per entry
    /// of `pods` (millicores each).
    fn node(&mut self, name: &str, nodepool: &str, it: usize, capacity_type: &str, pods: &[i64]) {
        let sim_pods: Vec<_> = pods
            .iter()
            .enumerate()
            .map(|(i, cpu)| testkit::pod(&format!("default/{name}-{i}"), *cpu, 64 * MIB))
            .collect();
        let cores = it as i64 + 1;
        self.world.existing_nodes.push(Arc::new(ExistingNode {
            name: name.into(),
            labels: testkit::labels(&[
                ("kubernetes.io/hostname", name),
                ("topology.kubernetes.io/zone", ZONE),
                ("karpenter.sh/nodepool", nodepool),
                (LABEL_CAPACITY_TYPE, capacity_type),
                ("node.kubernetes.io/instance-type", &format!("fake-it-{it}")),
                ("kubernetes.io/arch", "amd64"),
                ("kubernetes.io/os", "linux"),
            ]),
            allocatable: Resources::from_milli([
                (CPU, cores * 1000 - 80),
                (MEMORY, (2 * cores * GIB - 356 * MIB) * 1000),
                (PODS, 110_000),
            ]),
            pods: sim_pods.clone(),
            initialized: true,
            ..Default::default()
        }));
        self.views.push(NodeView {
            nodeclaim: format!("nc-{name}"),
            node: Some(name.into()),
            nodepool: nodepool.into(),
            initialized: true,
            ready: true,
            consolidatable: true,
            pods: sim_pods
                .iter()
                .map(|p| PodView {
                    key: p.key.clone(),
                    reschedulable: true,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
    }

    fn input(&self) -> ConsolidationInput<'_> {
        ConsolidationInput {
            now: 1_000_000,
            nodes: &self.views,
            pdb_allowed: &EMPTY_PDBS,
            nodepools: &self.pools,
            world: PassWorld::of(&self.views, self.world.clone()),
            spot_to_spot: self.spot_to_spot,
        }
    }

    fn emptiness(&self) -> MethodOutcome {
        plan_emptiness(self.input())
    }

    fn single(&self) -> MethodOutcome {
        plan_single_node(self.input(), &[], &mut || false)
    }

    fn multi(&self) -> MethodOutcome {
        plan_multi_node(self.input(), &mut || false)
    }

    /// Only on-demand capacity in every NodePool (no cheaper spot replacement).
    fn on_demand_only(&mut self) {
        for pool in &mut self.world.nodepools {
            pool.requirements.add(
                LABEL_CAPACITY_TYPE,
                driftwood_scheduling::Requirement::is_in([CAPACITY_TYPE_ON_DEMAND]),
            );
        }
    }

    fn pool_mut(&mut self, name: &str) -> &mut NodePool {
        self.pools
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .expect("pool")
    }
}

static EMPTY_PDBS: BTreeMap<String, i32> = BTreeMap::new();

/// A NodePool whose budget lets every node go (Karpenter's default is 10%).
fn pool(name: &str) -> NodePool {
    let mut pool = NodePool::new(name, ApiNodePoolSpec::default());
    pool.spec.disruption.budgets = vec![budget("100%", &[])];
    pool
}

fn budget(nodes: &str, reasons: &[&str]) -> Budget {
    Budget {
        nodes: nodes.into(),
        reasons: (!reasons.is_empty()).then(|| reasons.iter().map(|r| r.to_string()).collect()),
        ..Default::default()
    }
}

fn names(command: &ConsolidationCommand) -> Vec<&str> {
    command
        .candidates
        .iter()
        .map(|d| d.nodeclaim.as_str())
        .collect()
}

fn why<'a>(outcome: &'a MethodOutcome, nodeclaim: &str) -> Option<&'a str> {
    outcome
        .unconsolidatable
        .iter()
        .find(|(n, _)| n == nodeclaim)
        .map(|(_, w)| w.as_str())
}

/// Emptiness "can delete empty nodes" and "should only allow 3 empty nodes to be disrupted"
/// (a 30% Empty budget over 10 empty nodes): many deleted in one command, within the budget.
#[test]
fn emptiness_deletes_every_empty_node_the_budget_allows() {
    let mut cluster = Cluster::new();
    for i in 0..10 {
        cluster.node(&format!("e{i}"), "default", 1, CAPACITY_TYPE_ON_DEMAND, &[]);
    }
    cluster.node("busy", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[500]);
    cluster.pool_mut("default").spec.disruption.budgets = vec![budget("30%", &["Empty"])];
    let outcome = cluster.emptiness();
    let command = outcome.command.expect("a command");
    assert_eq!(command.method, Method::Emptiness);
    assert_eq!(command.decision(), "delete");
    assert_eq!(command.candidates.len(), 4, "30% of 11 nodes, rounded up");
    assert!(outcome.constrained_by_budgets);
    assert_eq!(outcome.eligible, 10, "the busy node is not empty");
    assert!(!names(&command).contains(&"nc-busy"));
}

/// Emptiness "should ignore nodes without the consolidatable status condition" and "should
/// not consolidate empty nodes with consolidateAfter Never" (consolidation disabled).
#[test]
fn emptiness_needs_consolidatable_and_consolidation_on() {
    let mut cluster = Cluster::new();
    cluster.node("e", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[]);
    cluster.views[0].consolidatable = false;
    assert_eq!(cluster.emptiness().command, None);
    cluster.views[0].consolidatable = true;
    cluster
        .pool_mut("default")
        .spec
        .disruption
        .consolidate_after = driftwood_api::duration::NillableDuration::never();
    let outcome = cluster.emptiness();
    assert_eq!(outcome.command, None);
    assert_eq!(
        why(&outcome, "nc-e"),
        Some("NodePool \"default\" has consolidation disabled")
    );
}

/// Consolidation "can delete nodes": a node whose pods fit on another node is deleted.
#[test]
fn a_node_whose_pods_fit_elsewhere_is_deleted() {
    let mut cluster = Cluster::new();
    cluster.node("big", "default", 3, CAPACITY_TYPE_ON_DEMAND, &[1000]);
    cluster.node("small", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[500]);
    let command = cluster.single().command.expect("a command");
    assert_eq!(command.method, Method::SingleNode);
    assert_eq!(command.decision(), "delete");
    // The best value per unit of disruption first: big costs twice as much for the same pods.
    assert_eq!(names(&command), ["nc-big"]);
    assert!((command.savings() - price_of(3, CAPACITY_TYPE_ON_DEMAND)).abs() < 1e-9);
}

/// Consolidation "can replace node" / "can replace nodes if another nodePool returns no
/// instance types": an oversized on-demand node is replaced by a cheaper one, launched as
/// spot only ("should consolidate on-demand to spot and require spot for the replacement").
#[test]
fn an_oversized_node_is_replaced_by_a_cheaper_one() {
    let mut cluster = Cluster::new();
    cluster.node("huge", "default", 7, CAPACITY_TYPE_ON_DEMAND, &[500]);
    let command = cluster.single().command.expect("a command");
    assert_eq!(command.decision(), "replace");
    let replacement = command.replacement.as_ref().expect("replacement");
    assert_eq!(
        replacement.instance_types.first().map(String::as_str),
        Some("fake-it-0")
    );
    // Priced as the spot they must launch as: every type cheaper than the on-demand node.
    let source = price_of(7, CAPACITY_TYPE_ON_DEMAND);
    for t in &replacement.instance_types {
        let n: usize = t.trim_start_matches("fake-it-").parse().expect("fake type");
        assert!(
            price_of(n, CAPACITY_TYPE_SPOT) < source,
            "{t} is not cheaper"
        );
    }
    assert!(
        replacement
            .instance_types
            .contains(&"fake-it-10".to_string())
    );
    assert!(
        !replacement
            .instance_types
            .contains(&"fake-it-11".to_string())
    );
    let ct = replacement
        .requirements
        .get(LABEL_CAPACITY_TYPE)
        .expect("capacity type");
    assert!(ct.has(CAPACITY_TYPE_SPOT) && !ct.has(CAPACITY_TYPE_ON_DEMAND));
    assert!(command.replacement_price < command.source_price);
}

/// Consolidation "won't replace node if any spot replacement is more expensive" / "Can't
/// replace with a cheaper node": a right-sized node stays, and says why.
#[test]
fn a_right_sized_node_is_not_replaced() {
    let mut cluster = Cluster::new();
    cluster.node("fit", "default", 0, CAPACITY_TYPE_ON_DEMAND, &[800]);
    cluster.pool_mut("default").spec.template.spec.requirements = vec![
        serde_json::from_value(serde_json::json!({
            "key": LABEL_CAPACITY_TYPE, "operator": "In", "values": [CAPACITY_TYPE_ON_DEMAND]
        }))
        .expect("requirement"),
    ];
    cluster.world.nodepools[0].requirements.add(
        LABEL_CAPACITY_TYPE,
        driftwood_scheduling::Requirement::is_in([CAPACITY_TYPE_ON_DEMAND]),
    );
    let outcome = cluster.single();
    assert_eq!(outcome.command, None);
    assert_eq!(
        why(&outcome, "nc-fit"),
        Some("Can't replace with a cheaper node")
    );
}

/// Consolidation "spot to spot consolidation" cases: off by default; on, it needs 15 cheaper
/// types for one node and launches from the 15 cheapest.
#[test]
fn spot_to_spot_is_gated_and_needs_fifteen_cheaper_types() {
    let mut cluster = Cluster::new();
    cluster.node("spot", "default", 19, CAPACITY_TYPE_SPOT, &[500]);
    let outcome = cluster.single();
    assert_eq!(outcome.command, None);
    assert_eq!(
        why(&outcome, "nc-spot"),
        Some("SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node")
    );
    cluster.spot_to_spot = true;
    let command = cluster.single().command.expect("a command");
    let replacement = command.replacement.as_ref().expect("replacement");
    assert_eq!(replacement.instance_types.len(), 15);
    assert_eq!(replacement.instance_types[0], "fake-it-0");
    // A spot node with fewer than 15 cheaper types stays.
    let mut small = Cluster::new();
    small.spot_to_spot = true;
    small.node("spot", "default", 9, CAPACITY_TYPE_SPOT, &[500]);
    let outcome = small.single();
    assert_eq!(outcome.command, None);
    assert_eq!(
        why(&outcome, "nc-spot"),
        Some(
            "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 9"
        )
    );
}

/// Consolidation "can merge 3 nodes into 1": three underused nodes become one cheaper node.
#[test]
fn multi_node_merges_underused_nodes_into_one() {
    let mut cluster = Cluster::new();
    for i in 0..3 {
        cluster.node(
            &format!("n{i}"),
            "default",
            3,
            CAPACITY_TYPE_ON_DEMAND,
            &[600],
        );
    }
    let outcome = cluster.multi();
    let command = outcome.command.expect("a command");
    assert_eq!(command.method, Method::MultiNode);
    assert_eq!(command.candidates.len(), 3);
    assert_eq!(command.decision(), "replace");
    assert!(command.savings() > 0.0);
}

/// Consolidation "won't merge 2 nodes into 1 of the same type" (filterOutSameInstanceType):
/// replacing two fake-it-1 nodes by one fake-it-1 is the same as deleting one of them.
#[test]
fn multi_node_does_not_replace_with_a_type_being_removed() {
    let mut cluster = Cluster::new();
    cluster.node("a", "default", 1, CAPACITY_TYPE_SPOT, &[700]);
    cluster.node("b", "default", 1, CAPACITY_TYPE_SPOT, &[700]);
    cluster.spot_to_spot = true;
    let outcome = cluster.multi();
    assert!(
        outcome.command.is_none(),
        "{:?}",
        outcome.command.map(|c| c.replacement)
    );
}

/// Budgets: "should not consolidate if the budget for Underutilized is 0" — and drift's own
/// budget is not consulted here.
#[test]
fn an_underutilized_budget_of_zero_blocks_consolidation() {
    let mut cluster = Cluster::new();
    cluster.node("big", "default", 3, CAPACITY_TYPE_ON_DEMAND, &[1000]);
    cluster.node("small", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[500]);
    cluster.node("small2", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[500]);
    cluster.pool_mut("default").spec.disruption.budgets = vec![
        budget("0", &["Underutilized"]),
        budget("100%", &["Drifted"]),
    ];
    let single = cluster.single();
    assert_eq!(single.command, None);
    assert!(single.constrained_by_budgets);
    let multi = cluster.multi();
    assert_eq!(multi.command, None);
    assert!(multi.constrained_by_budgets);
}

/// "should not consolidate nodes with pods when policy is WhenEmpty": an underutilized node of
/// a WhenEmpty pool stays, and says why; an empty one still goes.
#[test]
fn a_when_empty_pool_keeps_underutilized_nodes() {
    let mut cluster = Cluster::new();
    cluster.node("big", "default", 3, CAPACITY_TYPE_ON_DEMAND, &[1000]);
    cluster.node("small", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[500]);
    cluster.node("empty", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[]);
    cluster
        .pool_mut("default")
        .spec
        .disruption
        .consolidation_policy = "WhenEmpty".into();
    let outcome = cluster.single();
    assert_eq!(outcome.command, None);
    assert_eq!(
        why(&outcome, "nc-small"),
        Some("NodePool \"default\" has consolidation policy WhenEmpty, but node is not empty")
    );
    assert_eq!(cluster.multi().command, None);
    let empty = cluster.emptiness().command.expect("empty node deleted");
    assert_eq!(names(&empty), ["nc-empty"]);
}

/// Consolidation is graceful: "should not consider candidates that have do-not-disrupt pods
/// scheduled with a terminationGracePeriod set for graceful disruption".
#[test]
fn pod_blocks_hold_for_consolidation_even_with_a_termination_grace_period() {
    let mut cluster = Cluster::new();
    cluster.node("big", "default", 3, CAPACITY_TYPE_ON_DEMAND, &[1000]);
    cluster.node("small", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[500]);
    cluster.views[1].eventual = true;
    cluster.views[1].pods[0].do_not_disrupt = true;
    let outcome = cluster.single();
    assert!(why(&outcome, "nc-small").is_some_and(|w| w.contains("do-not-disrupt")));
    assert!(
        outcome
            .command
            .is_none_or(|c| c.candidates.iter().all(|d| d.nodeclaim != "nc-small"))
    );
}

/// Multi-node consolidation "should stop after a timeout and return the last valid command":
/// out of time before the first simulation finds nothing; after one, the best so far.
#[test]
fn multi_node_stops_when_out_of_time() {
    let mut cluster = Cluster::new();
    for i in 0..6 {
        cluster.node(
            &format!("n{i}"),
            "default",
            3,
            CAPACITY_TYPE_ON_DEMAND,
            &[300],
        );
    }
    let outcome = plan_multi_node(cluster.input(), &mut || true);
    assert!(outcome.timed_out);
    assert_eq!(outcome.command, None);
    let mut asked = 0;
    let outcome = plan_multi_node(cluster.input(), &mut || {
        asked += 1;
        asked > 1
    });
    assert!(outcome.timed_out);
    let command = outcome.command.expect("the first valid prefix");
    assert_eq!(
        command.candidates.len(),
        4,
        "the first midpoint: candidates[0..=3]"
    );
    let whole = cluster.multi().command.expect("whole search");
    assert_eq!(whole.candidates.len(), 6);
}

/// Single-node consolidation interleaves NodePools ("should consider candidates from
/// all nodepools"), those not reached last time first, and reports the pools it did not reach
/// when out of time.
#[test]
fn single_node_takes_nodepools_in_turn_and_remembers_unseen_ones() {
    let mut cluster = Cluster::new();
    cluster.node("anchor-d", "default", 7, CAPACITY_TYPE_ON_DEMAND, &[7000]);
    cluster.node("d", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[300]);
    cluster.node("o", "other", 1, CAPACITY_TYPE_ON_DEMAND, &[300]);
    let unseen = vec!["other".to_string()];
    let command = plan_single_node(cluster.input(), &unseen, &mut || false)
        .command
        .expect("a command");
    assert_eq!(command.candidates[0].nodepool, "other");
    let outcome = plan_single_node(cluster.input(), &[], &mut || true);
    assert!(outcome.timed_out);
    assert_eq!(outcome.unseen_nodepools, ["default", "other"]);
}

/// Validation "should not disrupt an empty node if a pod schedules to it during validation"
/// (churn), and "should fail validation if the budget no longer allows it".
#[test]
fn validation_abandons_a_command_the_cluster_no_longer_supports() {
    let mut cluster = Cluster::new();
    cluster.node("e", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[]);
    cluster.node("busy", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[500]);
    let command = cluster.emptiness().command.expect("a command");
    assert_eq!(validate(&command, cluster.input()), Ok(command.clone()));
    // A pod arrived.
    cluster.views[0].pods.push(PodView {
        key: "default/new".into(),
        reschedulable: true,
        ..Default::default()
    });
    assert!(matches!(
        validate(&command, cluster.input()),
        Err(ValidationFailure::Churn(_))
    ));
    cluster.views[0].pods.clear();
    cluster.pool_mut("default").spec.disruption.budgets = vec![budget("0", &["Empty"])];
    assert_eq!(
        validate(&command, cluster.input()).map_err(|f| f.kind()),
        Err("budget")
    );
}

/// Validation "should fail validation if the scheduling simulation produces a different
/// result": the spare room a delete counted on was taken meanwhile.
#[test]
fn validation_fails_when_the_simulation_changed() {
    let mut cluster = Cluster::new();
    cluster.node("big", "default", 3, CAPACITY_TYPE_ON_DEMAND, &[1000]);
    cluster.node("small", "default", 1, CAPACITY_TYPE_ON_DEMAND, &[300]);
    let command = cluster.single().command.expect("a command");
    assert_eq!(command.decision(), "delete");
    assert_eq!(names(&command), ["nc-big"]);
    // A pod bound to small meanwhile takes the room big's pod was to move to.
    let arrived = testkit::pod("default/arrived", 1500, GIB);
    Arc::make_mut(&mut cluster.world.existing_nodes[1])
        .pods
        .push(arrived);
    assert_eq!(
        validate(&command, cluster.input()).map_err(|f| f.kind()),
        Err("scheduling")
    );
}

/// Balanced (Karpenter v1.14, balanced_scoring_test.go): a move passes when its share of the
/// pool's cost saved is at least half its share of the pool's disruption.
#[test]
fn balanced_approves_only_moves_worth_their_disruption() {
    use super::balanced::{PoolTotals, score};
    let totals = PoolTotals {
        cost: 10.0,
        disruption: 100.0,
    };
    // 10% saved for 10% disrupted: score 1 (passes); 10% saved for 30% disrupted: 1/3 (fails).
    assert_eq!(score(1.0, 10.0, totals).value(), 1.0);
    assert!(score(1.0, 10.0, totals).approved());
    assert!(score(1.0, 30.0, totals).value() < 0.5);
    assert!(!score(1.0, 30.0, totals).approved());
    assert_eq!(score(0.0, 10.0, totals).value(), 0.0);
    assert_eq!(score(1.0, 0.0, totals).value(), f64::INFINITY);
    // "should reject when candidate NodePool is missing from totals map": nothing to measure
    // against, score 0, rejected.
    assert_eq!(score(1.0, 1.0, PoolTotals::default()).value(), 0.0);
    assert!(!score(1.0, 1.0, PoolTotals::default()).approved());
    assert_eq!(
        score(1.0, 10.0, totals).message(),
        "score 1.00 >= threshold 0.50 (k: 2, savings 10.0%, disruption 10.0%)"
    );
    // End to end: a Balanced pool with many busy nodes does not disrupt a busy cheap node.
    let mut cluster = Cluster::new();
    cluster
        .pool_mut("default")
        .spec
        .disruption
        .consolidation_policy = "Balanced".into();
    cluster.node("big", "default", 15, CAPACITY_TYPE_ON_DEMAND, &[1000]);
    cluster.node("cheap", "default", 0, CAPACITY_TYPE_ON_DEMAND, &[100; 8]);
    let outcome = cluster.single();
    assert!(
        outcome
            .command
            .as_ref()
            .is_none_or(|c| c.candidates[0].nodeclaim != "nc-cheap"),
        "{:?}",
        outcome.command
    );
}

/// The moves recorded for `karpenter_consolidation_moves_total` / `_score` as Karpenter's
/// balancedEvaluator records them (balanced.go ApproveCommand / EmitMultiNodeEvents, and
/// balanced_scoring_test.go "should skip non-Balanced pools and approve unconditionally"): a
/// command of a WhenEmptyOrUnderutilized pool is one approved, unscored move; in a Balanced
/// pool every simulated single-node move is scored, turned down below 1/k, and the command is
/// the approved one; multi-node records the move it found, unscored outside Balanced.
#[test]
fn scored_moves_are_recorded_as_karpenter_records_them() {
    use super::balanced::MoveKind;
    let mut cluster = Cluster::new();
    for i in 0..3 {
        cluster.node(
            &format!("n{i}"),
            "default",
            3,
            CAPACITY_TYPE_ON_DEMAND,
            &[600],
        );
    }
    let multi = cluster.multi();
    let command = multi.command.as_ref().expect("a command");
    assert_eq!(multi.moves.len(), 1, "{:?}", multi.moves);
    let found = &multi.moves[0];
    assert_eq!(found.kind, MoveKind::Multi);
    assert!(found.approved);
    assert_eq!(found.candidates.len(), command.candidates.len());
    assert_eq!(found.pools.len(), 1);
    assert_eq!(found.pools[0].policy, "WhenEmptyOrUnderutilized");
    assert_eq!(found.pools[0].score, None);
    let single = cluster.single();
    let command = single.command.as_ref().expect("a command");
    let last = single.moves.last().expect("a move");
    assert_eq!(last.kind, MoveKind::Single);
    assert!(last.approved && last.pools[0].score.is_none());
    assert_eq!(last.candidates[0].0, command.candidates[0].nodeclaim);

    // Balanced, approved: the big node's pod moves to a much cheaper node (80% of the pool's
    // cost saved for 2 of its 9 units of disruption).
    let balanced = |nodes: &[(&str, usize, &[i64])]| {
        let mut cluster = Cluster::new();
        cluster
            .pool_mut("default")
            .spec
            .disruption
            .consolidation_policy = "Balanced".into();
        for (name, it, pods) in nodes {
            cluster.node(name, "default", *it, CAPACITY_TYPE_ON_DEMAND, pods);
        }
        cluster
    };
    let cluster = balanced(&[("big", 15, &[1000]), ("busy", 3, &[300; 6])]);
    let single = cluster.single();
    assert_eq!(single.moves.len(), 1, "{:?}", single.moves);
    let m = &single.moves[0];
    let score = m.pools[0].score.expect("Balanced moves are scored");
    assert!(m.approved && score.approved());
    assert_eq!(m.pools[0].policy, "Balanced");
    assert!((score.savings_fraction - 0.8).abs() < 1e-9, "{score:?}");
    assert_eq!(
        m.candidates,
        vec![("nc-big".to_string(), Some("big".to_string()))]
    );
    assert_eq!(
        single
            .command
            .as_ref()
            .map(|c| c.candidates[0].nodeclaim.as_str()),
        Some("nc-big")
    );
    // Balanced, rejected: each node's two pods fit nowhere else, so each move is a replacement
    // saving under half its share of the disruption; both are recorded, neither is a command.
    let cluster = balanced(&[("a", 7, &[2900, 2900]), ("b", 7, &[2900, 2900])]);
    let single = cluster.single();
    assert_eq!(single.command, None);
    let names: Vec<&str> = single
        .moves
        .iter()
        .map(|m| m.candidates[0].0.as_str())
        .collect();
    assert_eq!(names, ["nc-a", "nc-b"]);
    for m in &single.moves {
        let score = m.pools[0].score.expect("scored");
        assert!(!m.approved && !score.approved());
        assert!(score.value() > 0.0 && score.value() < 0.5, "{score:?}");
    }
    // Multi-node records the move it turned down once, not each step of its search.
    let multi = cluster.multi();
    assert_eq!(multi.command, None);
    assert_eq!(multi.moves.len(), 1, "{:?}", multi.moves);
    assert_eq!(multi.moves[0].kind, MoveKind::Multi);
    assert!(!multi.moves[0].approved);
    assert_eq!(multi.moves[0].candidates.len(), 2);
}

/// Karpenter excludes nodes nominated for pending pods ("should not consolidate a node that is
/// nominated for a pending pod"); driftwood also leaves out the replacement of a command in
/// flight, whose pods have not moved yet — an empty replacement must not be deleted for being
/// empty.
#[test]
fn nominated_nodes_and_replacements_in_flight_are_no_candidates() {
    let mut cluster = Cluster::new();
    cluster.node("old", "default", 3, CAPACITY_TYPE_ON_DEMAND, &[1000]);
    cluster.node("new", "default", 3, CAPACITY_TYPE_ON_DEMAND, &[]);
    cluster.views[0].disrupting = true;
    cluster.views[0].replacements = vec!["nc-new".into()];
    assert_eq!(cluster.emptiness().command, None, "the replacement stays");
    // Not a replacement, but the room for a pending pod.
    let mut cluster = Cluster::new();
    cluster.node("spare", "default", 3, CAPACITY_TYPE_ON_DEMAND, &[]);
    cluster.world.pods = vec![testkit::pod("default/pending", 1000, GIB)];
    let outcome = cluster.emptiness();
    assert_eq!(outcome.command, None);
    assert_eq!(
        why(&outcome, "nc-spare"),
        Some("Cannot disrupt NodeClaim: state node is nominated for a pending pod")
    );
}

/// The memo of failed shapes changes nothing: generated fleets (nodes of a few types and
/// zones, pods of a few sizes, some nodes full, some with room) give the same command with and
/// without it; and a fleet of identical full nodes is simulated once.
#[test]
fn single_node_memo_matches_simulating_every_candidate() {
    for seed in 0..40u64 {
        let mut next =
            driftwood_scheduling::testkit::seeded(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut cluster = Cluster::new();
        cluster.on_demand_only();
        for i in 0..10 {
            let it = [1, 3][next(2) as usize];
            let cores = it as i64 + 1;
            let pods: Vec<i64> = (0..1 + next(3))
                .map(|_| [600, 900][next(2) as usize])
                .collect();
            let used: i64 = pods.iter().sum();
            let pods = if used > cores * 1000 - 80 {
                vec![600]
            } else {
                pods
            };
            cluster.node(
                &format!("n{i:02}"),
                "default",
                it,
                CAPACITY_TYPE_ON_DEMAND,
                &pods,
            );
        }
        let with = single_node(cluster.input(), &[], &mut || false, true);
        let without = single_node(cluster.input(), &[], &mut || false, false);
        assert_eq!(with.command, without.command, "seed {seed}");
        let names = |o: &MethodOutcome| {
            o.unconsolidatable
                .iter()
                .map(|(n, _)| n.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&with), names(&without), "seed {seed}");
    }
    let mut full = Cluster::new();
    full.on_demand_only();
    for i in 0..6 {
        full.node(
            &format!("f{i}"),
            "default",
            1,
            CAPACITY_TYPE_ON_DEMAND,
            &[900, 900],
        );
    }
    let outcome = full.single();
    assert_eq!(outcome.command, None);
    assert_eq!(outcome.unconsolidatable.len(), 6);
    assert!(
        outcome.unconsolidatable[1..]
            .iter()
            .all(|(_, why)| why.contains("(as for nc-f0: the same node and pods)")),
        "{:?}",
        outcome.unconsolidatable
    );
}

/// The memo of failed shapes holds when pods depend on other pods: generated fleets over three
/// zones whose pods belong to Deployments with a zone spread (DoNotSchedule), a hostname spread
/// (ScheduleAnyway), a required hostname anti-affinity or none give the same command and the
/// same unconsolidatable nodes with and without it; and a fleet of identical full nodes of
/// spread pods is simulated once per zone.
#[test]
fn single_node_memo_matches_simulating_every_candidate_when_pods_depend_on_each_other() {
    use driftwood_api::wellknown::{LABEL_HOSTNAME, LABEL_TOPOLOGY_ZONE};
    use driftwood_scheduling::pod::{NamespaceSelection, PodAffinityTerm, TopologySpread};
    use driftwood_scheduling::{PodConstraints, Requirements, Shared};
    let zones = ["test-zone-1", "test-zone-2", "test-zone-3"];
    let app = |name: &str, kind: usize| {
        let labels = testkit::labels(&[("app", name)]);
        let selector = Some(Requirements::from_labels(&labels));
        let mut c = PodConstraints {
            namespace: "default".into(),
            labels,
            ..PodConstraints::default()
        };
        match kind {
            0 => c.spreads.push(TopologySpread {
                topology_key: LABEL_TOPOLOGY_ZONE.into(),
                max_skew: 1,
                hard: true,
                selector,
                min_domains: None,
            }),
            1 => c.spreads.push(TopologySpread {
                topology_key: LABEL_HOSTNAME.into(),
                max_skew: 1,
                hard: false,
                selector,
                min_domains: None,
            }),
            2 => c.anti_affinity.push(PodAffinityTerm {
                topology_key: LABEL_HOSTNAME.into(),
                selector,
                namespaces: NamespaceSelection::default(),
            }),
            _ => {}
        }
        Shared::new(c)
    };
    let apps = [
        app("zonal", 0),
        app("spread", 1),
        app("solo", 2),
        app("plain", 3),
    ];
    // Gives the last node `zone` and its pods the constraints of `kinds` (by pod).
    let shape_last = |cluster: &mut Cluster, zone: &str, kinds: &[usize]| {
        let node = Arc::make_mut(cluster.world.existing_nodes.last_mut().expect("a node"));
        node.labels
            .insert(LABEL_TOPOLOGY_ZONE.to_string(), zone.to_string());
        for (pod, kind) in node.pods.iter_mut().zip(kinds) {
            pod.constraints = apps[*kind].clone();
        }
    };
    let mut memo_answered = 0;
    for seed in 0..120u64 {
        let mut next =
            driftwood_scheduling::testkit::seeded(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut cluster = Cluster::new();
        cluster.on_demand_only();
        let mut recipe = (1, vec![600], vec![3], zones[0]);
        for i in 0..12 {
            // Half the nodes repeat the one before (a Deployment's rollout makes many alike).
            if i == 0 || next(2) == 0 {
                let it = [1, 3][next(2) as usize];
                let cores = it as i64 + 1;
                // Most nodes full (their pods fit nowhere else), some with a slot free.
                let size = [600, 900][next(2) as usize];
                let slots = (cores * 1000 - 80) / size;
                let count = (slots - next(2) as i64).max(1);
                let pods: Vec<i64> = (0..count).map(|_| size).collect();
                let kinds: Vec<usize> = pods.iter().map(|_| next(4) as usize).collect();
                recipe = (it, pods, kinds, zones[next(3) as usize]);
            }
            let (it, pods, kinds, zone) = &recipe;
            cluster.node(
                &format!("n{i:02}"),
                "default",
                *it,
                CAPACITY_TYPE_ON_DEMAND,
                pods,
            );
            shape_last(&mut cluster, zone, kinds);
        }
        let with = single_node(cluster.input(), &[], &mut || false, true);
        let without = single_node(cluster.input(), &[], &mut || false, false);
        assert_eq!(with.command, without.command, "seed {seed}");
        let names = |o: &MethodOutcome| {
            o.unconsolidatable
                .iter()
                .map(|(n, _)| n.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&with), names(&without), "seed {seed}");
        memo_answered += with
            .unconsolidatable
            .iter()
            .filter(|(_, why)| why.contains("the same node and pods"))
            .count();
    }
    assert!(memo_answered > 0, "the generated fleets never met the memo");
    // Nine identical full nodes, three a zone, their pods spread over zones: one simulation
    // per zone answers the other six.
    let mut full = Cluster::new();
    full.on_demand_only();
    for i in 0..9 {
        full.node(
            &format!("f{i}"),
            "default",
            1,
            CAPACITY_TYPE_ON_DEMAND,
            &[900, 900],
        );
        shape_last(&mut full, zones[i % 3], &[0, 0]);
    }
    let outcome = full.single();
    assert_eq!(outcome.command, None);
    assert_eq!(outcome.unconsolidatable.len(), 9);
    let answered = outcome
        .unconsolidatable
        .iter()
        .filter(|(_, why)| why.contains("the same node and pods"))
        .count();
    assert_eq!(answered, 6, "{:?}", outcome.unconsolidatable);
}
