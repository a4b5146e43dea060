//! Disruption candidates: what the planner knows of each managed node, and whether it may be
//! disrupted now (initialized, not being deleted, no do-not-disrupt, no PDB at zero).

use crate::drift::DriftFinding;
use std::collections::BTreeMap;
use std::fmt;

/// One managed node (its NodeClaim and, once registered, its Node) as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeView {
    pub nodeclaim: String,
    /// The Node's name once registered (the name of its `ExistingNode` in the simulation).
    pub node: Option<String>,
    pub nodepool: String,
    /// NodeClaim Initialized=True.
    pub initialized: bool,
    /// Node Ready=True.
    pub ready: bool,
    /// The NodeClaim or Node has a deletionTimestamp.
    pub deleting: bool,
    /// A disruption command is in flight for it (disrupted taint / DisruptionReason set).
    pub disrupting: bool,
    /// The reason of its DisruptionReason condition (Drifted, Empty, Underutilized), if set.
    pub disruption_reason: Option<String>,
    /// `karpenter.sh/do-not-disrupt: "true"` on the Node or NodeClaim: which one.
    pub do_not_disrupt: Option<&'static str>,
    /// Drifted=True: since when (UTC seconds) and why.
    pub drift: Option<(i64, DriftFinding)>,
    /// The pods bound to the node.
    pub pods: Vec<PodView>,
    /// The replacement NodeClaims of its disruption command in flight, if any.
    pub replacements: Vec<String>,
    /// Consolidatable=True on the NodeClaim: consolidateAfter has passed since its last pod event.
    pub consolidatable: bool,
    /// A condition of its Node matches a repair policy (Karpenter's node repair): which, and
    /// when its toleration runs out.
    pub unhealthy: Option<crate::repair::Unhealthy>,
    /// `karpenter.sh/do-not-repair: "true"` on the Node or NodeClaim (repair's veto).
    pub do_not_repair: bool,
    /// The NodeClaim has a terminationGracePeriod: its drift is eventual, as in Karpenter —
    /// pod-level blockers (a pod's do-not-disrupt, a PDB allowing 0) do not keep it from being
    /// chosen; the drain honours them until the grace period forces the pods out.
    pub eventual: bool,
}

/// How budgets count each node of `views` (one NodePool's): replacements named by a node whose
/// command is in flight stand in for it and are not counted twice.
pub fn budget_members(views: &[&NodeView]) -> Vec<crate::budget::BudgetMember> {
    let standing_in: std::collections::BTreeSet<&str> = views
        .iter()
        .filter(|v| v.deleting || v.disrupting)
        .flat_map(|v| v.replacements.iter().map(String::as_str))
        .collect();
    views
        .iter()
        .map(|v| crate::budget::BudgetMember {
            initialized: v.initialized,
            ready: v.ready,
            marked: v.deleting || v.disrupting,
            stands_in: standing_in.contains(v.nodeclaim.as_str()),
        })
        .collect()
}

/// The budgets of every NodePool for `reason` at `now`, over `nodes` (all managed nodes).
pub fn pool_budgets(
    nodes: &[NodeView],
    nodepools: &[driftwood_api::nodepool::NodePool],
    reason: &str,
    now: i64,
) -> Vec<crate::budget::AllowedDisruptions> {
    pool_budgets_counting(nodes, nodepools, reason, now, true)
}

/// [`pool_budgets`]; with `not_ready_disrupts` false, NotReady nodes do not count as
/// disrupting (Karpenter v1.15's rule for the `Unhealthy` reason: the unhealthy nodes are the
/// ones to replace, and counting them would leave no budget for it).
pub fn pool_budgets_counting(
    nodes: &[NodeView],
    nodepools: &[driftwood_api::nodepool::NodePool],
    reason: &str,
    now: i64,
    not_ready_disrupts: bool,
) -> Vec<crate::budget::AllowedDisruptions> {
    nodepools
        .iter()
        .map(|pool| {
            let name = pool.metadata.name.as_deref().unwrap_or_default();
            let members: Vec<&NodeView> = nodes.iter().filter(|n| n.nodepool == name).collect();
            let members = budget_members(&members).into_iter().map(|mut m| {
                m.ready |= !not_ready_disrupts;
                m
            });
            let (total, disrupting) = crate::budget::budget_counts(members);
            crate::budget::allowed_disruptions(pool, reason, total, disrupting, now)
        })
        .collect()
}

/// A pod on a candidate node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodView {
    /// namespace/name
    pub key: String,
    /// Must move when the node goes (not a DaemonSet pod, mirror pod or finished pod).
    pub reschedulable: bool,
    /// `karpenter.sh/do-not-disrupt: "true"` on the pod.
    pub do_not_disrupt: bool,
    /// Keys (namespace/name) of the PodDisruptionBudgets that select the pod.
    pub pdbs: Vec<String>,
    /// Not subject to the PDB check (Karpenter's evictable set leaves it out): finished or
    /// terminating, a mirror pod, or tolerating `karpenter.sh/disrupted:NoSchedule` (it stays).
    /// DaemonSet pods are checked.
    pub pdb_exempt: bool,
    /// Ready=False and its one PDB has `unhealthyPodEvictionPolicy: AlwaysAllow`: the eviction
    /// API lets it through whatever the budget says.
    pub unhealthy_evictable: bool,
    /// `controller.kubernetes.io/pod-deletion-cost` (0 when absent or unreadable).
    pub deletion_cost: i32,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
}

/// Why a node is not a candidate now. The Display text is the DisruptionBlocked event message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocked {
    NotInitialized,
    BeingDeleted,
    AlreadyDisrupting,
    DoNotDisrupt {
        on: &'static str,
    },
    PodDoNotDisrupt {
        pod: String,
    },
    PdbAtZero {
        pod: String,
        pdb: String,
    },
    MultiplePdbs {
        pod: String,
        pdbs: Vec<String>,
    },
    Budget {
        /// The disruption reason whose budget is full (Drifted, Unhealthy).
        reason: &'static str,
        nodepool: String,
        detail: String,
    },
    PodsFitNowhere {
        pods: Vec<(String, String)>,
    },
    Simulation {
        error: String,
    },
    /// The NodePool's rollout is paused (`driftwood.sh/rollout-paused`).
    Paused {
        nodepool: String,
    },
    /// The NodePool's rollout policy (waves, soak, rate, a halt) allows no more this pass.
    Policy {
        nodepool: String,
        /// Whether the policy stops the rollout until an operator acts (a halt, a bad policy).
        halts: bool,
        detail: String,
    },
    /// Repair: `karpenter.sh/do-not-repair` on the Node or NodeClaim.
    DoNotRepair,
    /// Repair: too many of the NodePool's nodes are unhealthy (Karpenter's NodeRepairBlocked).
    RepairThreshold {
        message: String,
    },
}

impl Blocked {
    /// Whether this holds a drifted node for a reason of its own, not merely because the
    /// budget is full this pass, the node is not ready yet, or its command already runs.
    pub fn holds_the_rollout(&self) -> bool {
        match self {
            Self::NotInitialized
            | Self::BeingDeleted
            | Self::AlreadyDisrupting
            | Self::Budget { .. } => false,
            Self::Policy { halts, .. } => *halts,
            _ => true,
        }
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotInitialized => {
                f.write_str("Cannot disrupt NodeClaim: state node isn't initialized")
            }
            Self::BeingDeleted => {
                f.write_str("Cannot disrupt NodeClaim: state node is marked for deletion")
            }
            Self::AlreadyDisrupting => {
                f.write_str("Cannot disrupt NodeClaim: a disruption command is already in flight")
            }
            Self::DoNotDisrupt { on } => {
                write!(
                    f,
                    "Cannot disrupt {on}: disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation"
                )
            }
            Self::PodDoNotDisrupt { pod } => {
                write!(
                    f,
                    "Cannot disrupt NodeClaim: pod {pod:?} has \"karpenter.sh/do-not-disrupt\" annotation"
                )
            }
            Self::PdbAtZero { pod, pdb } => {
                write!(
                    f,
                    "Cannot disrupt NodeClaim: pdb {pdb:?} prevents pod evictions (pod {pod:?}, 0 disruptions allowed)"
                )
            }
            Self::MultiplePdbs { pod, pdbs } => {
                write!(
                    f,
                    "Cannot disrupt NodeClaim: pod {pod:?} is selected by more than one pdb ({}), so it cannot be evicted",
                    pdbs.join(", ")
                )
            }
            Self::Budget {
                reason,
                nodepool,
                detail,
            } => {
                write!(
                    f,
                    "No allowed disruptions for disruption reason {reason} due to blocking budget in nodepool {nodepool:?}: {detail}"
                )
            }
            Self::PodsFitNowhere { pods } => {
                let list: Vec<String> = pods
                    .iter()
                    .map(|(p, why)| format!("{p} => {why}"))
                    .collect();
                write!(
                    f,
                    "Cannot disrupt NodeClaim: not all pods would schedule, {}",
                    list.join("; ")
                )
            }
            Self::Simulation { error } => write!(
                f,
                "Cannot disrupt NodeClaim: scheduling simulation failed: {error}"
            ),
            Self::Paused { nodepool } => write!(
                f,
                "Cannot disrupt NodeClaim: the rollout of nodepool {nodepool:?} is paused (annotation \"driftwood.sh/rollout-paused\")"
            ),
            Self::Policy {
                nodepool, detail, ..
            } => write!(
                f,
                "Cannot disrupt NodeClaim: nodepool {nodepool:?}: {detail}"
            ),
            Self::DoNotRepair => f.write_str(
                "Cannot repair NodeClaim: repair is blocked through the \"karpenter.sh/do-not-repair\" annotation",
            ),
            Self::RepairThreshold { message } => {
                write!(f, "Cannot repair NodeClaim: {message}")
            }
        }
    }
}

/// Whether `node` may be disrupted now, given each PDB's disruptionsAllowed (by key), by
/// Karpenter's rules: node-level blocks always apply (not initialized, being deleted, already
/// disrupting, do-not-disrupt on the Node or NodeClaim); pod-level ones (a pod's do-not-disrupt,
/// a PDB at zero or several PDBs on one pod, over the evictable pods, DaemonSet pods included)
/// apply unless the NodeClaim's drift is eventual (it has a terminationGracePeriod).
pub fn check_candidate(
    node: &NodeView,
    pdb_allowed: &BTreeMap<String, i32>,
) -> Result<(), Blocked> {
    if !node.initialized {
        return Err(Blocked::NotInitialized);
    }
    if node.deleting {
        return Err(Blocked::BeingDeleted);
    }
    if node.disrupting {
        return Err(Blocked::AlreadyDisrupting);
    }
    if let Some(on) = node.do_not_disrupt {
        return Err(Blocked::DoNotDisrupt { on });
    }
    if node.eventual {
        return Ok(());
    }
    for pod in &node.pods {
        if pod.do_not_disrupt {
            return Err(Blocked::PodDoNotDisrupt {
                pod: pod.key.clone(),
            });
        }
    }
    for pod in node.pods.iter().filter(|p| !p.pdb_exempt) {
        if pod.pdbs.len() > 1 {
            return Err(Blocked::MultiplePdbs {
                pod: pod.key.clone(),
                pdbs: pod.pdbs.clone(),
            });
        }
        for pdb in &pod.pdbs {
            if !pod.unhealthy_evictable && pdb_allowed.get(pdb).copied().unwrap_or(0) <= 0 {
                return Err(Blocked::PdbAtZero {
                    pod: pod.key.clone(),
                    pdb: pdb.clone(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeView {
        NodeView {
            nodeclaim: "nc".into(),
            node: Some("n".into()),
            nodepool: "default".into(),
            initialized: true,
            ready: true,
            pods: vec![PodView {
                key: "default/app".into(),
                reschedulable: true,
                pdbs: vec!["default/app".into()],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn eligible_node_passes() {
        let pdbs = BTreeMap::from([("default/app".to_string(), 1)]);
        assert_eq!(check_candidate(&node(), &pdbs), Ok(()));
    }

    #[test]
    fn each_filter_blocks_with_its_reason() {
        let pdbs = BTreeMap::from([("default/app".to_string(), 1)]);
        let cases: Vec<(NodeView, &str)> = vec![
            (
                NodeView {
                    initialized: false,
                    ..node()
                },
                "isn't initialized",
            ),
            (
                NodeView {
                    deleting: true,
                    ..node()
                },
                "marked for deletion",
            ),
            (
                NodeView {
                    disrupting: true,
                    ..node()
                },
                "already in flight",
            ),
            (
                NodeView {
                    do_not_disrupt: Some("Node"),
                    ..node()
                },
                "Cannot disrupt Node: disruption is blocked",
            ),
            (
                NodeView {
                    pods: vec![PodView {
                        key: "default/x".into(),
                        do_not_disrupt: true,
                        ..Default::default()
                    }],
                    ..node()
                },
                "pod \"default/x\" has \"karpenter.sh/do-not-disrupt\"",
            ),
        ];
        for (view, expected) in cases {
            let blocked = check_candidate(&view, &pdbs).unwrap_err();
            assert!(blocked.to_string().contains(expected), "{blocked}");
        }
    }

    /// Karpenter candidate filtering: "should not consider candidates that have fully blocking
    /// PDBs" (also on daemonset pods), "should consider candidates that have fully blocking
    /// PDBs on mirror pods / terminal pods / terminating pods", "can replace nodes, considers
    /// PDB policy" (AlwaysAllow with unready pods), "should not consider candidates that have
    /// multiple PDBs on the same pod".
    #[test]
    fn pdb_checks_use_karpenters_evictable_set() {
        let pdbs = BTreeMap::from([("default/app".to_string(), 0)]);
        let blocked = check_candidate(&node(), &pdbs).unwrap_err();
        assert_eq!(
            blocked.to_string(),
            "Cannot disrupt NodeClaim: pdb \"default/app\" prevents pod evictions (pod \"default/app\", 0 disruptions allowed)"
        );
        let mut ds = node();
        ds.pods[0].reschedulable = false; // a DaemonSet pod: still checked
        assert!(matches!(
            check_candidate(&ds, &pdbs),
            Err(Blocked::PdbAtZero { .. })
        ));
        let mut exempt = node();
        exempt.pods[0].pdb_exempt = true; // mirror, finished, or tolerating the disrupted taint
        assert_eq!(check_candidate(&exempt, &pdbs), Ok(()));
        let mut unhealthy = node();
        unhealthy.pods[0].unhealthy_evictable = true;
        assert_eq!(check_candidate(&unhealthy, &pdbs), Ok(()));
        let mut two = node();
        two.pods[0].pdbs.push("default/other".into());
        assert!(matches!(
            check_candidate(&two, &BTreeMap::new()),
            Err(Blocked::MultiplePdbs { .. })
        ));
    }

    /// Karpenter candidate filtering: "should consider candidates that have do-not-disrupt pods
    /// scheduled with a terminationGracePeriod set for eventual disruption", "... PDB-blocked
    /// pods ...", and "should not consider candidates that have do-not-disrupt on nodes".
    #[test]
    fn a_termination_grace_period_makes_pod_blockers_eventual_but_not_node_ones() {
        let zero = BTreeMap::from([("default/app".to_string(), 0)]);
        let mut view = node();
        view.eventual = true;
        assert_eq!(check_candidate(&view, &zero), Ok(()));
        view.pods[0].do_not_disrupt = true;
        assert_eq!(check_candidate(&view, &zero), Ok(()));
        view.do_not_disrupt = Some("Node");
        assert!(matches!(
            check_candidate(&view, &zero),
            Err(Blocked::DoNotDisrupt { on: "Node" })
        ));
        let mut uninitialized = node();
        uninitialized.eventual = true;
        uninitialized.initialized = false;
        assert_eq!(
            check_candidate(&uninitialized, &zero),
            Err(Blocked::NotInitialized)
        );
    }
}
