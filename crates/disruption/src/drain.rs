//! Drain planning: which pods of a terminating node to evict now, in waves (non-critical pods,
//! non-critical daemonset pods, critical pods, critical daemonset pods), which to leave, which
//! to delete because the NodeClaim's terminationGracePeriod is running out, and whether the
//! node is drained.

use std::fmt;

/// What drain needs to know about one pod on the node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrainPod {
    pub namespace: String,
    pub name: String,
    /// Owned by a DaemonSet.
    pub daemonset: bool,
    /// A static pod's mirror (owned by its Node, or annotated kubernetes.io/config.mirror): the
    /// kubelet owns it.
    pub mirror: bool,
    /// Phase Succeeded or Failed.
    pub terminal: bool,
    /// Already has a deletionTimestamp.
    pub terminating: bool,
    /// The deletionTimestamp (UTC seconds; the time its grace period ends), when terminating.
    pub deletion_timestamp: Option<i64>,
    /// priorityClassName system-cluster-critical or system-node-critical.
    pub critical: bool,
    /// Tolerates karpenter.sh/disrupted:NoSchedule (it would come straight back; left alone).
    pub tolerates_disrupted: bool,
    /// Annotated karpenter.sh/do-not-disrupt=true: not evicted; waits for the grace period.
    pub do_not_disrupt: bool,
    /// The pod's own terminationGracePeriodSeconds (Kubernetes default 30).
    pub grace_period_seconds: i64,
    /// Its controller (`Kind/namespace/name` of a ReplicaSet or StatefulSet), if any.
    pub owner: Option<String>,
    /// Selected by a PodDisruptionBudget (the Eviction API then paces it).
    pub pdb_protected: bool,
}

/// How many pods of one controller exist cluster-wide and how many are not Ready (or are
/// terminating) right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OwnerAvailability {
    pub total: usize,
    pub unavailable: usize,
}

/// driftwood's pacing of pods no PodDisruptionBudget protects: at most this percentage of a
/// controller's pods (at least one) may be unavailable while its pods are evicted — the
/// default a Deployment's own rolling update allows. `None` evicts them all at once, as
/// Karpenter does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnprotectedPacing {
    pub max_unavailable_percent: u32,
}

impl Default for UnprotectedPacing {
    fn default() -> Self {
        Self {
            max_unavailable_percent: 25,
        }
    }
}

/// The context of a drain beyond the node's own pods.
#[derive(Debug, Clone, Default)]
pub struct DrainContext {
    /// When the NodeClaim's terminationGracePeriod ends (UTC seconds), if it has one.
    pub deadline: Option<i64>,
    /// Availability of each controller, by the `owner` key of [`DrainPod`].
    pub owners: std::collections::BTreeMap<String, OwnerAvailability>,
    /// Pacing of unprotected pods; `None` evicts them all at once.
    pub pacing: Option<UnprotectedPacing>,
}

impl DrainPod {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Pods drain never removes: they end with the node. A pod still terminating more than
    /// [`STUCK_TERMINATING_SECONDS`] after its deletionTimestamp (its grace period already
    /// over) is stuck — a kubelet that is gone, a finalizer nobody removes — and no longer
    /// holds the drain, as in Karpenter.
    fn left_alone(&self, now: i64) -> bool {
        self.mirror
            || self.terminal
            || self.tolerates_disrupted
            || self
                .deletion_timestamp
                .is_some_and(|at| now - at > STUCK_TERMINATING_SECONDS)
    }
}

/// How long past its deletionTimestamp a terminating pod may hold a drain (Karpenter: 1 min).
pub const STUCK_TERMINATING_SECONDS: i64 = 60;

/// The eviction waves, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DrainWave {
    NonCritical,
    NonCriticalDaemonSet,
    Critical,
    CriticalDaemonSet,
}

impl DrainWave {
    /// The wave `pod` is drained in.
    pub fn of_pod(pod: &DrainPod) -> Self {
        Self::of(pod)
    }

    fn of(pod: &DrainPod) -> Self {
        match (pod.critical, pod.daemonset) {
            (false, false) => Self::NonCritical,
            (false, true) => Self::NonCriticalDaemonSet,
            (true, false) => Self::Critical,
            (true, true) => Self::CriticalDaemonSet,
        }
    }
}

impl fmt::Display for DrainWave {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NonCritical => "non-critical pods",
            Self::NonCriticalDaemonSet => "non-critical daemonset pods",
            Self::Critical => "critical pods",
            Self::CriticalDaemonSet => "critical daemonset pods",
        })
    }
}

/// A pod to delete outright, with the grace it may still have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForcedDeletion {
    pub pod: String,
    pub grace_period_seconds: i64,
}

/// What to do next for one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrainPlan {
    /// The wave being drained (None when nothing is left to evict).
    pub wave: Option<DrainWave>,
    /// Pods to evict through the Eviction API now (the current wave).
    pub evict: Vec<String>,
    /// Pods to delete now because the termination grace period is running out.
    pub delete: Vec<ForcedDeletion>,
    /// Pods the node still waits for: terminating, do-not-disrupt, or in a later wave.
    pub waiting_for: Vec<String>,
    /// Nothing that must leave is left: the instance may be terminated.
    pub drained: bool,
}

/// Plans the next drain step. `deadline` is when the NodeClaim's terminationGracePeriod ends
/// (deletion time + period; UTC seconds), if it has one.
///
/// Pods that are mirror pods, finished, or tolerate the disrupted taint are left. The first
/// wave that still has evictable pods is evicted; later waves wait for it. do-not-disrupt
/// pods are never evicted; they keep the node until they leave or the grace period forces
/// them out. With a deadline, any pod whose own grace period would overrun it is deleted
/// now with the time that remains, so everything is gone when the deadline comes.
pub fn plan_drain(pods: &[DrainPod], deadline: Option<i64>, now: i64) -> DrainPlan {
    plan_drain_with(
        pods,
        &DrainContext {
            deadline,
            ..Default::default()
        },
        now,
    )
}

/// As [`plan_drain`], with controller availability and pacing of unprotected pods: a pod no
/// PDB selects is evicted only while its controller has fewer unavailable pods than the
/// pacing allows (percent of its pods, rounded up, at least one), so a workload without a PDB
/// keeps serving while it moves.
pub fn plan_drain_with(pods: &[DrainPod], context: &DrainContext, now: i64) -> DrainPlan {
    let deadline = context.deadline;
    let mut plan = DrainPlan::default();
    let remaining: Vec<&DrainPod> = pods.iter().filter(|p| !p.left_alone(now)).collect();
    if remaining.is_empty() {
        plan.drained = true;
        return plan;
    }
    if let Some(deadline) = deadline {
        // Karpenter's rule: a pod whose own grace period would end after the deadline is
        // deleted once now > deadline - its grace, with the time left (at least a second, so it
        // is never a grace-0 force deletion); a pod already terminating past the deadline is
        // deleted again with the shorter grace.
        let left = (deadline - now).max(1);
        for pod in &remaining {
            let due = if pod.terminating {
                pod.deletion_timestamp.is_some_and(|at| at > deadline)
            } else {
                now > deadline - pod.grace_period_seconds.max(0)
            };
            if due {
                plan.delete.push(ForcedDeletion {
                    pod: pod.key(),
                    grace_period_seconds: left,
                });
            }
        }
    }
    let forced: Vec<&str> = plan.delete.iter().map(|d| d.pod.as_str()).collect();
    // The current wave is the earliest that still has a pod on the node (terminating and
    // do-not-disrupt pods included): later waves wait until it is empty.
    plan.wave = remaining
        .iter()
        .filter(|p| !forced.contains(&p.key().as_str()))
        .map(|p| DrainWave::of(p))
        .min();
    if let Some(wave) = plan.wave {
        let mut unavailable: std::collections::BTreeMap<&str, usize> = context
            .owners
            .iter()
            .map(|(k, a)| (k.as_str(), a.unavailable))
            .collect();
        for pod in remaining
            .iter()
            .filter(|p| DrainWave::of(p) == wave && !p.terminating && !p.do_not_disrupt)
        {
            if forced.contains(&pod.key().as_str()) {
                continue;
            }
            if let (Some(pacing), Some(owner), false) =
                (context.pacing, pod.owner.as_deref(), pod.pdb_protected)
            {
                let total = context.owners.get(owner).map_or(1, |a| a.total.max(1));
                let allowed = (total * pacing.max_unavailable_percent as usize)
                    .div_ceil(100)
                    .max(1);
                let down = unavailable.entry(owner).or_insert(0);
                if *down >= allowed {
                    continue;
                }
                *down += 1;
            }
            plan.evict.push(pod.key());
        }
    }
    plan.waiting_for = remaining
        .iter()
        .map(|p| p.key())
        .filter(|k| !plan.evict.contains(k) && !forced.contains(&k.as_str()))
        .collect();
    plan.evict.sort();
    plan.waiting_for.sort();
    plan.delete.sort_by(|a, b| a.pod.cmp(&b.pod));
    plan
}

/// Plans the drains of several nodes at once (`(pods, deadline)` per node), sharing each
/// controller's availability across them: a pod evicted from one node counts as unavailable
/// when the next node is planned, so nodes draining together never take more of a controller
/// than the pacing allows.
pub fn plan_drains(
    nodes: &[(Vec<DrainPod>, Option<i64>)],
    owners: std::collections::BTreeMap<String, OwnerAvailability>,
    pacing: Option<UnprotectedPacing>,
    now: i64,
) -> Vec<DrainPlan> {
    let mut context = DrainContext {
        deadline: None,
        owners,
        pacing,
    };
    nodes
        .iter()
        .map(|(pods, deadline)| {
            context.deadline = *deadline;
            let plan = plan_drain_with(pods, &context, now);
            for key in &plan.evict {
                let paced = pods
                    .iter()
                    .find(|p| &p.key() == key)
                    .filter(|p| !p.pdb_protected)
                    .and_then(|p| p.owner.clone());
                if let Some(owner) = paced {
                    context.owners.entry(owner).or_default().unavailable += 1;
                }
            }
            plan
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> DrainPod {
        DrainPod {
            namespace: "default".into(),
            name: name.into(),
            grace_period_seconds: 30,
            ..Default::default()
        }
    }

    #[test]
    fn waves_in_order() {
        let pods = vec![
            DrainPod {
                critical: true,
                daemonset: true,
                ..pod("cds")
            },
            DrainPod {
                critical: true,
                ..pod("c")
            },
            DrainPod {
                daemonset: true,
                ..pod("ds")
            },
            pod("app"),
        ];
        let plan = plan_drain(&pods, None, 0);
        assert_eq!(plan.wave, Some(DrainWave::NonCritical));
        assert_eq!(plan.evict, vec!["default/app"]);
        assert_eq!(
            plan.waiting_for,
            vec!["default/c", "default/cds", "default/ds"]
        );
        assert!(!plan.drained);

        let plan = plan_drain(&pods[..3], None, 0);
        assert_eq!(
            (plan.wave, plan.evict.clone()),
            (
                Some(DrainWave::NonCriticalDaemonSet),
                vec!["default/ds".into()]
            )
        );
        let plan = plan_drain(&pods[..2], None, 0);
        assert_eq!(
            (plan.wave, plan.evict.clone()),
            (Some(DrainWave::Critical), vec!["default/c".into()])
        );
        let plan = plan_drain(&pods[..1], None, 0);
        assert_eq!(
            (plan.wave, plan.evict),
            (
                Some(DrainWave::CriticalDaemonSet),
                vec!["default/cds".into()]
            )
        );
        assert!(plan_drain(&[], None, 0).drained);
    }

    #[test]
    fn a_wave_waits_for_terminating_pods_of_earlier_waves() {
        let pods = vec![
            DrainPod {
                terminating: true,
                ..pod("app")
            },
            DrainPod {
                daemonset: true,
                ..pod("ds")
            },
        ];
        let plan = plan_drain(&pods, None, 0);
        // The terminating app pod is not evicted again, and the daemonset wave waits for it.
        assert_eq!(plan.wave, Some(DrainWave::NonCritical));
        assert!(plan.evict.is_empty());
        assert_eq!(plan.waiting_for, vec!["default/app", "default/ds"]);
        assert!(!plan.drained);
    }

    #[test]
    fn mirror_finished_and_tolerating_pods_are_left() {
        let pods = vec![
            DrainPod {
                mirror: true,
                ..pod("kube-proxy-static")
            },
            DrainPod {
                terminal: true,
                ..pod("job-done")
            },
            DrainPod {
                tolerates_disrupted: true,
                ..pod("agent")
            },
        ];
        let plan = plan_drain(&pods, None, 0);
        assert!(plan.drained);
        assert!(plan.evict.is_empty() && plan.waiting_for.is_empty());
    }

    #[test]
    fn do_not_disrupt_pods_hold_the_node_without_a_grace_period() {
        let pods = vec![
            DrainPod {
                do_not_disrupt: true,
                ..pod("precious")
            },
            pod("app"),
            DrainPod {
                daemonset: true,
                ..pod("ds")
            },
        ];
        let plan = plan_drain(&pods, None, 1_000_000);
        assert_eq!(plan.evict, vec!["default/app"]);
        assert_eq!(plan.waiting_for, vec!["default/ds", "default/precious"]);
        let plan = plan_drain(&pods[..1], None, 1_000_000);
        assert!(plan.evict.is_empty() && plan.delete.is_empty() && !plan.drained);
    }

    #[test]
    fn unprotected_pods_of_one_controller_move_a_quarter_at_a_time() {
        let owner = Some("ReplicaSet/default/web".to_string());
        let pods: Vec<DrainPod> = (0..3)
            .map(|i| DrainPod {
                owner: owner.clone(),
                ..pod(&format!("web-{i}"))
            })
            .collect();
        let mut context = DrainContext {
            pacing: Some(UnprotectedPacing::default()),
            ..Default::default()
        };
        context.owners.insert(
            "ReplicaSet/default/web".into(),
            OwnerAvailability {
                total: 3,
                unavailable: 0,
            },
        );
        let plan = plan_drain_with(&pods, &context, 0);
        assert_eq!(plan.evict, vec!["default/web-0"], "25% of 3 rounds up to 1");
        assert_eq!(plan.waiting_for, vec!["default/web-1", "default/web-2"]);
        // While one is still unavailable (its replacement not Ready yet), nothing more goes.
        context.owners.insert(
            "ReplicaSet/default/web".into(),
            OwnerAvailability {
                total: 3,
                unavailable: 1,
            },
        );
        assert!(plan_drain_with(&pods[1..], &context, 0).evict.is_empty());
        // A controller with 8 pods may lose 2 at once.
        let many: Vec<DrainPod> = (0..8)
            .map(|i| DrainPod {
                owner: owner.clone(),
                ..pod(&format!("web-{i}"))
            })
            .collect();
        context.owners.insert(
            "ReplicaSet/default/web".into(),
            OwnerAvailability {
                total: 8,
                unavailable: 0,
            },
        );
        assert_eq!(plan_drain_with(&many, &context, 0).evict.len(), 2);
        // PDB-protected pods are paced by the Eviction API instead; without pacing all go.
        let protected: Vec<DrainPod> = many
            .iter()
            .map(|p| DrainPod {
                pdb_protected: true,
                ..p.clone()
            })
            .collect();
        assert_eq!(plan_drain_with(&protected, &context, 0).evict.len(), 8);
        context.pacing = None;
        assert_eq!(plan_drain_with(&many, &context, 0).evict.len(), 8);
    }

    #[test]
    fn nodes_draining_together_share_a_controllers_allowance() {
        let owner = Some("ReplicaSet/default/web".to_string());
        let node = |i: usize| {
            (
                vec![DrainPod {
                    owner: owner.clone(),
                    ..pod(&format!("web-{i}"))
                }],
                None,
            )
        };
        let owners = std::collections::BTreeMap::from([(
            "ReplicaSet/default/web".to_string(),
            OwnerAvailability {
                total: 3,
                unavailable: 0,
            },
        )]);
        let plans = plan_drains(
            &[node(0), node(1), node(2)],
            owners,
            Some(UnprotectedPacing::default()),
            0,
        );
        let evicted: Vec<usize> = plans.iter().map(|p| p.evict.len()).collect();
        assert_eq!(
            evicted,
            vec![1, 0, 0],
            "one pod of the three at a time, across nodes"
        );
    }

    #[test]
    fn grace_period_forces_pods_out_in_time() {
        let pods = vec![
            DrainPod {
                do_not_disrupt: true,
                grace_period_seconds: 60,
                ..pod("precious")
            },
            DrainPod {
                grace_period_seconds: 10,
                ..pod("quick")
            },
        ];
        let deadline = 1000;
        // 100 s before the deadline nothing is forced; quick is evicted normally.
        let plan = plan_drain(&pods, Some(deadline), 900);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.evict, vec!["default/quick"]);
        // Exactly 60 s before, precious (grace 60) still waits (Karpenter: strictly after);
        // a second later it must go with the 59 s that remain.
        assert!(plan_drain(&pods, Some(deadline), 940).delete.is_empty());
        let plan = plan_drain(&pods, Some(deadline), 941);
        assert_eq!(
            plan.delete,
            vec![ForcedDeletion {
                pod: "default/precious".into(),
                grace_period_seconds: 59
            }]
        );
        // Past the deadline everything left is deleted with the least grace, one second (never
        // a grace-0 force deletion).
        let plan = plan_drain(&pods, Some(deadline), 1200);
        assert_eq!(plan.delete.len(), 2);
        assert!(plan.delete.iter().all(|d| d.grace_period_seconds == 1));
        assert!(plan.evict.is_empty());
    }

    /// Karpenter termination suite: "should only delete pods when their
    /// terminationGracePeriodSeconds is less than the node's remaining terminationGracePeriod"
    /// (node TGP 300 s, pod grace 60 s, do-not-disrupt: kept at +90 s, deleted at +265 s) and
    /// "should update deletion timestamp for terminating pods when it is after node deletion
    /// timestamp" (a pod terminating with grace 6000 s is deleted again with what is left).
    #[test]
    fn karpenter_deadline_cases() {
        let deleted = 10_000;
        let deadline = deleted + 300;
        let kept = vec![DrainPod {
            do_not_disrupt: true,
            grace_period_seconds: 60,
            ..pod("p")
        }];
        assert!(
            plan_drain(&kept, Some(deadline), deleted + 90)
                .delete
                .is_empty()
        );
        assert_eq!(
            plan_drain(&kept, Some(deadline), deleted + 265).delete[0].grace_period_seconds,
            35
        );
        let slow = vec![DrainPod {
            terminating: true,
            deletion_timestamp: Some(deleted + 6000),
            grace_period_seconds: 6000,
            ..pod("slow")
        }];
        let plan = plan_drain(&slow, Some(deadline), deleted + 90);
        assert_eq!(plan.delete[0].grace_period_seconds, 210);
        // Without a deadline a terminating pod is only waited for.
        assert!(plan_drain(&slow, None, deleted + 90).delete.is_empty());
    }

    /// Karpenter: "should bypass pods which are stuck terminating past their grace period" —
    /// a pod still there a minute after its deletionTimestamp no longer holds the drain.
    #[test]
    fn pods_stuck_terminating_stop_holding_the_drain() {
        let pods = vec![DrainPod {
            terminating: true,
            deletion_timestamp: Some(1000),
            ..pod("stuck")
        }];
        let plan = plan_drain(&pods, None, 1060);
        assert!(!plan.drained && plan.waiting_for == vec!["default/stuck"]);
        assert!(plan_drain(&pods, None, 1061).drained);
    }
}
