//! A NodePool's rollout policy applied to one pass: which wave the rollout is in, whether it
//! soaks or has halted on a failed health gate, how many disruptions the rate budget leaves,
//! and the progress to write to `status.rollout.policy` before anything is started.

use crate::budget::format_utc;
use driftwood_api::hash::fnv1a64;
use driftwood_api::nodepool::{RolloutHalt, RolloutPolicyStatus};
use driftwood_api::rollout_policy::{HealthGates, RolloutPolicy};
use driftwood_api::wellknown::{ANNOTATION_EC2NODECLASS_HASH, ANNOTATION_NODEPOOL_HASH};
use driftwood_api::{EC2NodeClass, NodePool};
use std::fmt;

/// What the policy sees of its pool this pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolFacts {
    /// The pool's live nodes (up to date, drifted and disrupting).
    pub total: usize,
    /// Drifted nodes waiting to be replaced.
    pub drifted: usize,
    /// Nodes with a disruption command in flight.
    pub disrupting: usize,
    /// The health gates failing now, over the nodes this rollout made ([`gate_failures`]).
    pub failing: Vec<GateFailure>,
    /// The same counts per zone (for a zone-by-zone policy), by zone name.
    pub zones: Vec<ZoneFacts>,
    /// A gate that cannot be read now (its query failed): the soak cannot pass, nor fail.
    pub gate_unknown: Option<String>,
    /// What the pool's nodes are replaced to match now ([`rollout_target`]); None while the
    /// pool's hash is not stamped yet.
    pub target: Option<String>,
}

/// What a NodePool's drifted nodes are replaced to match: a hash of the pool's template hash,
/// its class's hash and the class's resolved AMIs, subnets and security groups (the dynamic
/// part of drift). None until the hash controller has stamped the pool.
pub fn rollout_target(pool: &NodePool, class: Option<&EC2NodeClass>) -> Option<String> {
    let hash = |annotations: Option<&std::collections::BTreeMap<String, String>>, key: &str| {
        annotations.and_then(|a| a.get(key)).cloned()
    };
    let mut text = format!(
        "pool={}",
        hash(pool.metadata.annotations.as_ref(), ANNOTATION_NODEPOOL_HASH)?
    );
    if let Some(class) = class {
        let class_hash = hash(
            class.metadata.annotations.as_ref(),
            ANNOTATION_EC2NODECLASS_HASH,
        );
        text.push_str(&format!(";class={}", class_hash.unwrap_or_default()));
        if let Some(status) = &class.status {
            // Sets: their order in the status is not part of the target.
            let ids = |ids: std::collections::BTreeSet<&str>| {
                ids.into_iter().collect::<Vec<_>>().join(",")
            };
            text.push_str(&format!(
                ";amis={};subnets={};securityGroups={}",
                ids(status.amis.iter().map(|a| a.id.as_str()).collect()),
                ids(status.subnets.iter().map(|s| s.id.as_str()).collect()),
                ids(status
                    .security_groups
                    .iter()
                    .map(|g| g.id.as_str())
                    .collect()),
            ));
        }
    }
    Some(fnv1a64(text.as_bytes()).to_string())
}

/// The rollout began again for a new target ([`rollout_target`]) this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retargeted {
    /// The halt of the rollout before, which no longer holds.
    pub dropped_halt: Option<RolloutHalt>,
    /// The disruptions in flight, counted as the new rollout's first starts.
    pub in_flight: usize,
}

/// A pool's nodes in one zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneFacts {
    pub zone: String,
    pub nodes: usize,
    pub drifted: usize,
    pub disrupting: usize,
}

/// One failed health gate: which, and what failed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateFailure {
    /// `Restarts`, `Unready` or `PdbBlocked`.
    pub gate: &'static str,
    pub message: String,
}

/// Why the policy holds the pool's drifted nodes this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyHold {
    /// The policy annotations could not be read: nothing starts until they are mended.
    Invalid { message: String },
    /// A health gate failed; the rollout waits for `driftwood rollout resume`.
    Halted {
        wave: usize,
        gate: String,
        message: String,
    },
    /// The wave's nodes are started; it waits for them to be replaced before soaking.
    WaveFinishing { wave: usize, target: usize },
    /// The finished wave is watched until `until` (UTC seconds).
    Soaking { wave: usize, until: i64 },
    /// Zone by zone: the zone's last nodes are being replaced; the next zone waits for them.
    ZoneFinishing { zone: String },
    /// A gate cannot be read: the soaking wave waits for it.
    GateUnknown { wave: usize, message: String },
    /// Outside the maintenance window: nothing starts until it opens (None: never again).
    Window { opens_at: Option<i64> },
    /// A deadline spreads the rollout: the next disruption is due at `next_at`.
    Paced { next_at: i64 },
    /// The rate budget is spent until `until` (UTC seconds).
    Rate {
        limit: usize,
        window_seconds: u64,
        until: i64,
    },
}

impl PolicyHold {
    /// Whether the rollout stops here for a reason of its own (an operator must act), not for
    /// time to pass.
    pub fn holds_the_rollout(&self) -> bool {
        matches!(self, Self::Invalid { .. } | Self::Halted { .. })
    }

    /// The `RolloutComplete` reason the hold gives.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Invalid { .. } => "InvalidPolicy",
            Self::Halted { .. } => "Halted",
            Self::WaveFinishing { .. } => "WaveInProgress",
            Self::Soaking { .. } => "Soaking",
            Self::ZoneFinishing { .. } => "ZoneInProgress",
            Self::Window { .. } => "OutsideMaintenanceWindow",
            Self::GateUnknown { .. } => "GateUnknown",
            Self::Paced { .. } => "Paced",
            Self::Rate { .. } => "RateLimited",
        }
    }
}

impl fmt::Display for PolicyHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid { message } => write!(f, "rollout policy: {message}"),
            Self::Halted {
                wave,
                gate,
                message,
            } => write!(
                f,
                "rollout halted in wave {}: health gate {gate} failed: {message}; `driftwood rollout resume` continues it",
                wave + 1
            ),
            Self::WaveFinishing { wave, target } => write!(
                f,
                "wave {} ({target} node(s) in all) is being replaced; the next wave waits for it",
                wave + 1
            ),
            Self::Soaking { wave, until } => {
                write!(f, "wave {} soaks until {}", wave + 1, format_utc(*until))
            }
            Self::GateUnknown { wave, message } => write!(
                f,
                "wave {} soaks but a health gate cannot be read: {message}",
                wave + 1
            ),
            Self::Window { opens_at: Some(at) } => write!(
                f,
                "outside the maintenance window; it opens at {}",
                format_utc(*at)
            ),
            Self::Window { opens_at: None } => {
                f.write_str("outside the maintenance window, which never opens again")
            }
            Self::Paced { next_at } => write!(
                f,
                "the deadline spreads the rollout: the next disruption is due at {}",
                format_utc(*next_at)
            ),
            Self::ZoneFinishing { zone } => write!(
                f,
                "zone by zone: the last nodes of zone {zone} are being replaced; the next zone waits for them"
            ),
            Self::Rate {
                limit,
                window_seconds,
                until,
            } => write!(
                f,
                "rate budget: {limit} disruption(s) per {} started; the next may start at {}",
                driftwood_api::duration::format_go_duration(*window_seconds),
                format_utc(*until)
            ),
        }
    }
}

/// The `RolloutRetargeted` event's message.
pub fn retargeted_message(retargeted: &Retargeted) -> String {
    let mut message = String::from(
        "The rollout's target changed (the pool's template, its class, or the class's AMIs, \
         subnets or security groups): a new rollout begins at wave 1",
    );
    if retargeted.in_flight > 0 {
        message.push_str(&format!(
            ", counting the {} disruption(s) in flight",
            retargeted.in_flight
        ));
    }
    if let Some(halt) = &retargeted.dropped_halt {
        message.push_str(&format!(
            "; the halt in wave {} (health gate {}) was for the old target and no longer holds",
            halt.wave + 1,
            halt.gate
        ));
    }
    message
}

/// The policy's verdict for one pool this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyPass {
    /// The progress to write (None: the pool has no policy, or no rollout and nothing to keep).
    pub progress: Option<RolloutPolicyStatus>,
    /// The most disruptions this pass may start in the pool (None: the policy sets no cap).
    pub cap: Option<usize>,
    /// Why the cap is 0, when it is.
    pub hold: Option<PolicyHold>,
    /// A halt decided this pass (its event and metric are published once).
    pub halted_now: Option<RolloutHalt>,
    /// A wave that began this pass (0-based), for its event.
    pub wave_started: Option<usize>,
    /// Zone by zone: the one zone whose drifted nodes may start now.
    pub zone: Option<String>,
    /// A zone whose turn began this pass, for its event.
    pub zone_started: Option<String>,
    /// The deadline found at risk this pass (warned once a rollout): why.
    pub deadline_at_risk: Option<String>,
    /// The target changed this pass: a new rollout began, for its event.
    pub retargeted: Option<Retargeted>,
}

/// One pass of `policy` over a pool: `last` is the progress written before, `facts` what the
/// pool holds now, `now` UTC seconds.
pub fn policy_pass(
    policy: &RolloutPolicy,
    last: Option<&RolloutPolicyStatus>,
    facts: &PoolFacts,
    now: i64,
) -> PolicyPass {
    let mut pass = PolicyPass {
        progress: None,
        cap: None,
        hold: None,
        halted_now: None,
        wave_started: None,
        zone: None,
        zone_started: None,
        deadline_at_risk: None,
        retargeted: None,
    };
    // No policy (none ever, or its annotations removed mid-rollout): nothing is kept, a halt
    // included; the budgets alone pace the rollout.
    if policy.is_empty() {
        return pass;
    }
    let mut progress = last.cloned().unwrap_or_default();
    // Starts older than the rate window no longer count.
    let window = policy
        .rate
        .map_or(0, |r| i64::try_from(r.window_seconds).unwrap_or(i64::MAX));
    progress
        .recent_starts
        .retain(|t| seconds(t).is_some_and(|t| t > now.saturating_sub(window)));

    let in_rollout = facts.drifted > 0 || facts.disrupting > 0;
    if !in_rollout {
        // The rollout is over (or none began): only the rate window's memory stays.
        progress = RolloutPolicyStatus {
            recent_starts: progress.recent_starts,
            ..RolloutPolicyStatus::default()
        };
        pass.progress = (!progress.recent_starts.is_empty()).then_some(progress);
        return pass;
    }
    // A new target (the class points at another AMI, back at the old one included): a new
    // rollout, from its first wave; a halt of the old target no longer holds. The disruptions
    // in flight are counted as its first starts, so no wave grows past its share while the
    // pool's and class's hashes are stamped one after the other; the rate window's starts stay.
    let mut in_flight = 0;
    if progress.started_at.is_some()
        && let (Some(was), Some(target)) = (&progress.target, &facts.target)
        && was != target
    {
        pass.retargeted = Some(Retargeted {
            dropped_halt: progress.halted.take(),
            in_flight: facts.disrupting,
        });
        in_flight = facts.disrupting;
        progress = RolloutPolicyStatus {
            recent_starts: progress.recent_starts,
            ..RolloutPolicyStatus::default()
        };
    }
    if facts.target.is_some() {
        progress.target.clone_from(&facts.target);
    }
    if progress.started_at.is_none() {
        progress.started_at = Some(format_utc(now));
        progress.wave = 0;
        progress.started = i64::try_from(in_flight).unwrap_or(i64::MAX);
        progress.nodes = i64::try_from(facts.total).unwrap_or(i64::MAX);
        progress.planned = i64::try_from(facts.drifted + facts.disrupting).unwrap_or(i64::MAX);
        progress.deadline_at_risk = false;
        pass.wave_started = (!policy.waves.is_empty()).then_some(0);
    }

    let mut cap: Option<usize> = None;
    let mut hold = None;
    let wave = usize::try_from(progress.wave).unwrap_or(0);
    let started = usize::try_from(progress.started).unwrap_or(0);
    // The waves' base: the pool when the rollout began (never fewer than those started).
    let base = usize::try_from(progress.nodes).unwrap_or(0).max(started);
    if let Some(halt) = &progress.halted {
        cap = Some(0);
        hold = Some(PolicyHold::Halted {
            wave,
            gate: halt.gate.clone(),
            message: halt.message.clone(),
        });
    } else if let Some(target) = policy.wave_target(wave, base) {
        if started < target {
            cap = Some(target - started);
        } else if facts.disrupting > 0 {
            cap = Some(0);
            hold = Some(PolicyHold::WaveFinishing { wave, target });
        } else {
            // The wave is replaced: it soaks, held to the health gates, then the next begins.
            let soak_start = progress
                .soak_started_at
                .as_deref()
                .and_then(seconds)
                .unwrap_or(now);
            progress.soak_started_at = Some(format_utc(soak_start));
            let until =
                soak_start.saturating_add(i64::try_from(policy.soak_seconds).unwrap_or(i64::MAX));
            if let Some(failure) = facts.failing.first() {
                let halt = RolloutHalt {
                    at: format_utc(now),
                    wave: progress.wave,
                    gate: failure.gate.to_string(),
                    message: failure.message.clone(),
                };
                cap = Some(0);
                hold = Some(PolicyHold::Halted {
                    wave,
                    gate: halt.gate.clone(),
                    message: halt.message.clone(),
                });
                progress.halted = Some(halt.clone());
                pass.halted_now = Some(halt);
            } else if let Some(message) = &facts.gate_unknown {
                cap = Some(0);
                hold = Some(PolicyHold::GateUnknown {
                    wave,
                    message: message.clone(),
                });
            } else if now < until {
                cap = Some(0);
                hold = Some(PolicyHold::Soaking { wave, until });
            } else {
                progress.wave += 1;
                progress.soak_started_at = None;
                pass.wave_started = Some(wave + 1);
                let next = policy.wave_target(wave + 1, base);
                cap = next.map(|t| t.saturating_sub(started));
            }
        }
    }
    if let Some(order) = &policy.zone_order
        && progress.halted.is_none()
    {
        let busy = |z: &ZoneFacts| z.drifted > 0 || z.disrupting > 0;
        let current = progress
            .zone
            .clone()
            .filter(|zone| facts.zones.iter().any(|z| &z.zone == zone && busy(z)));
        let zone = current.or_else(|| {
            let sizes: Vec<(&str, usize)> = facts
                .zones
                .iter()
                .filter(|z| z.drifted > 0)
                .map(|z| (z.zone.as_str(), z.nodes))
                .collect();
            let next = order.arrange(&sizes).first().map(|z| z.to_string());
            pass.zone_started.clone_from(&next);
            next
        });
        if let Some(zone) = &zone
            && facts
                .zones
                .iter()
                .any(|z| &z.zone == zone && z.drifted == 0)
            && hold.is_none()
        {
            cap = Some(0);
            hold = Some(PolicyHold::ZoneFinishing { zone: zone.clone() });
        }
        progress.zone.clone_from(&zone);
        pass.zone = zone;
    }
    let began = progress
        .started_at
        .as_deref()
        .and_then(seconds)
        .unwrap_or(now);
    if let Some(deadline) = policy.deadline_seconds
        && progress.halted.is_none()
    {
        let deadline = i64::try_from(deadline).unwrap_or(i64::MAX);
        let planned = progress.planned.max(1);
        // Evenly spread: the k-th disruption (from 0) is due at began + k × deadline / planned.
        let due = |k: i64| began.saturating_add(deadline.saturating_mul(k) / planned);
        let elapsed = now.saturating_sub(began);
        let allowed = (elapsed.saturating_mul(planned) / deadline)
            .saturating_add(1)
            .min(planned);
        let paced = usize::try_from(allowed.saturating_sub(progress.started)).unwrap_or(0);
        if paced < cap.unwrap_or(usize::MAX) {
            cap = Some(paced);
            if paced == 0 && hold.is_none() && facts.drifted > 0 {
                hold = Some(PolicyHold::Paced {
                    next_at: due(progress.started).max(now + 1),
                });
            }
        }
        if !progress.deadline_at_risk
            && let Some(why) = deadline_risk(policy, &progress, facts, began, deadline, now)
        {
            progress.deadline_at_risk = true;
            pass.deadline_at_risk = Some(why);
        }
    }
    if let Some(window) = &policy.maintenance
        && let driftwood_api::cron::WindowAt::Closed { opens_at } = window.at(now)
        && !matches!(hold, Some(PolicyHold::Halted { .. }))
    {
        cap = Some(0);
        hold = Some(PolicyHold::Window { opens_at });
    }
    if let Some(rate) = policy.rate {
        let limit = rate.nodes.of(base).max(1);
        let used = progress.recent_starts.len();
        let left = limit.saturating_sub(used);
        if left < cap.unwrap_or(usize::MAX) {
            cap = Some(left);
            if left == 0 && hold.is_none() {
                let oldest = progress
                    .recent_starts
                    .iter()
                    .filter_map(|t| seconds(t))
                    .min()
                    .unwrap_or(now);
                hold = Some(PolicyHold::Rate {
                    limit,
                    window_seconds: rate.window_seconds,
                    until: oldest.saturating_add(window),
                });
            }
        }
    }
    pass.cap = cap;
    pass.hold = if cap == Some(0) { hold } else { None };
    pass.progress = Some(progress);
    pass
}

/// Why the deadline cannot be met, if it cannot: passed with nodes left, or the rate budget or
/// the waves' soaks alone need longer than it allows.
fn deadline_risk(
    policy: &RolloutPolicy,
    progress: &RolloutPolicyStatus,
    facts: &PoolFacts,
    began: i64,
    deadline: i64,
    now: i64,
) -> Option<String> {
    let ends = began.saturating_add(deadline);
    let left = facts.drifted + facts.disrupting;
    if now >= ends && left > 0 {
        return Some(format!(
            "the deadline {} has passed with {left} node(s) not yet replaced",
            format_utc(ends)
        ));
    }
    let planned = usize::try_from(progress.planned).unwrap_or(0);
    if let Some(rate) = policy.rate {
        let limit = rate
            .nodes
            .of(usize::try_from(progress.nodes).unwrap_or(0))
            .max(1);
        let windows = i64::try_from(planned.div_ceil(limit).saturating_sub(1)).unwrap_or(i64::MAX);
        let needs = windows.saturating_mul(i64::try_from(rate.window_seconds).unwrap_or(i64::MAX));
        if needs > deadline {
            return Some(format!(
                "the rate budget ({} per {}) needs at least {} to start {planned} disruption(s), more than the deadline's {}",
                rate.nodes,
                driftwood_api::duration::format_go_duration(rate.window_seconds),
                driftwood_api::duration::format_go_duration(u64::try_from(needs).unwrap_or(0)),
                driftwood_api::duration::format_go_duration(u64::try_from(deadline).unwrap_or(0)),
            ));
        }
    }
    let soaks = (0..policy.waves.len())
        .filter(|i| {
            policy
                .wave_target(*i, usize::try_from(progress.nodes).unwrap_or(0))
                .is_some()
        })
        .count();
    let soaking = i64::try_from(soaks)
        .unwrap_or(i64::MAX)
        .saturating_mul(i64::try_from(policy.soak_seconds).unwrap_or(i64::MAX));
    if soaking > deadline {
        return Some(format!(
            "the waves' soaks alone take {}, more than the deadline's {}",
            driftwood_api::duration::format_go_duration(u64::try_from(soaking).unwrap_or(0)),
            driftwood_api::duration::format_go_duration(u64::try_from(deadline).unwrap_or(0)),
        ));
    }
    None
}

/// The progress after `count` disruptions started at `now`: written before they are acted on.
pub fn record_starts(progress: &mut RolloutPolicyStatus, count: usize, now: i64) {
    progress.started = progress
        .started
        .saturating_add(i64::try_from(count).unwrap_or(i64::MAX));
    progress
        .recent_starts
        .extend(std::iter::repeat_n(format_utc(now), count));
}

/// One pod on a node this rollout made, as the health gates read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHealth {
    /// namespace/name.
    pub key: String,
    pub node: String,
    /// Since when the pod has not been Ready (UTC seconds; None when Ready).
    pub unready_since: Option<i64>,
    /// The most restarts of any of its containers.
    pub restarts: u32,
}

/// The health gates failing now: pods on the rollout's new nodes restarting too often or not
/// Ready for too long, and PodDisruptionBudgets of the pool's pods allowing nothing for too long
/// (`pdbs_blocked_since`: each such PDB and since when, UTC seconds). Sorted, so the first names
/// the same pod pass after pass.
pub fn gate_failures(
    gates: &HealthGates,
    pods: &[PodHealth],
    pdbs_blocked_since: &[(String, i64)],
    now: i64,
) -> Vec<GateFailure> {
    let mut failing = Vec::new();
    for pod in pods {
        if pod.restarts > gates.max_restarts {
            failing.push(GateFailure {
                gate: "Restarts",
                message: format!(
                    "pod {} on new node {} restarted {} times (the policy allows {})",
                    pod.key, pod.node, pod.restarts, gates.max_restarts
                ),
            });
        } else if let Some(since) = pod.unready_since {
            let limit = i64::try_from(gates.unready_limit_seconds).unwrap_or(i64::MAX);
            if now.saturating_sub(since) > limit {
                failing.push(GateFailure {
                    gate: "Unready",
                    message: format!(
                        "pod {} on new node {} has not been Ready for {}s (the policy allows {})",
                        pod.key,
                        pod.node,
                        now.saturating_sub(since),
                        driftwood_api::duration::format_go_duration(gates.unready_limit_seconds)
                    ),
                });
            }
        }
    }
    if let Some(limit) = gates.pdb_blocked_limit_seconds {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        for (pdb, since) in pdbs_blocked_since {
            if now.saturating_sub(*since) > limit {
                failing.push(GateFailure {
                    gate: "PdbBlocked",
                    message: format!(
                        "PodDisruptionBudget {pdb} has allowed no disruption for {}s (the policy allows {}s)",
                        now.saturating_sub(*since),
                        limit
                    ),
                });
            }
        }
    }
    failing.sort_by(|a, b| a.message.cmp(&b.message));
    failing
}

/// An RFC 3339 time as UTC seconds.
pub fn seconds(text: &str) -> Option<i64> {
    text.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_api::rollout_policy::{NodeCount, RateBudget};

    const T0: i64 = 1_800_000_000;

    fn canary(soak: u64) -> RolloutPolicy {
        RolloutPolicy {
            waves: vec![NodeCount::Nodes(1), NodeCount::Percent(50)],
            soak_seconds: soak,
            ..RolloutPolicy::default()
        }
    }

    fn facts(total: usize, drifted: usize, disrupting: usize) -> PoolFacts {
        PoolFacts {
            total,
            drifted,
            disrupting,
            failing: Vec::new(),
            zones: Vec::new(),
            gate_unknown: None,
            target: Some("t1".into()),
        }
    }

    /// Runs passes like the disruption loop: each pass starts what the cap allows (as many as
    /// `want`), records it, and returns the progress.
    fn start(pass: &PolicyPass, want: usize, now: i64) -> (usize, RolloutPolicyStatus) {
        let mut progress = pass.progress.clone().unwrap();
        let n = pass.cap.unwrap_or(usize::MAX).min(want);
        record_starts(&mut progress, n, now);
        (n, progress)
    }

    #[test]
    fn no_policy_and_no_past_is_nothing() {
        let pass = policy_pass(&RolloutPolicy::default(), None, &facts(10, 10, 0), T0);
        assert_eq!(pass.cap, None);
        assert_eq!(pass.progress, None);
    }

    fn halted_canary(target: Option<&str>) -> RolloutPolicyStatus {
        RolloutPolicyStatus {
            started_at: Some(format_utc(T0)),
            target: target.map(str::to_string),
            started: 1,
            nodes: 6,
            planned: 6,
            soak_started_at: Some(format_utc(T0 + 300)),
            halted: Some(RolloutHalt {
                at: format_utc(T0 + 400),
                wave: 0,
                gate: "Restarts".into(),
                message: "pod web/a restarted 5 times".into(),
            }),
            ..RolloutPolicyStatus::default()
        }
    }

    #[test]
    fn removing_the_policy_mid_rollout_drops_its_progress_and_any_halt() {
        let pass = policy_pass(
            &RolloutPolicy::default(),
            Some(&halted_canary(None)),
            &facts(6, 5, 0),
            T0 + 120,
        );
        assert_eq!((pass.cap, pass.hold, pass.progress), (None, None, None));
    }

    /// The class pointed back at the old AMI after a halt: the canary's node is now the drifted
    /// one, and a new rollout (its own canary) replaces it without `driftwood rollout resume`.
    #[test]
    fn a_new_target_begins_a_new_rollout_and_the_old_targets_halt_no_longer_holds() {
        let last = halted_canary(Some("t0"));
        let pass = policy_pass(&canary(600), Some(&last), &facts(6, 1, 0), T0 + 900);
        let retargeted = pass.retargeted.clone().expect("retargeted");
        assert_eq!(retargeted.dropped_halt, last.halted);
        assert_eq!(retargeted.in_flight, 0);
        assert_eq!(pass.cap, Some(1));
        assert_eq!(pass.hold, None);
        assert_eq!(pass.wave_started, Some(0));
        let progress = pass.progress.clone().unwrap();
        assert_eq!(progress.halted, None);
        assert_eq!(progress.soak_started_at, None);
        assert_eq!(progress.target.as_deref(), Some("t1"));
        assert_eq!(progress.started_at, Some(format_utc(T0 + 900)));
        assert_eq!((progress.wave, progress.started), (0, 0));
        assert_eq!(
            retargeted_message(&retargeted),
            "The rollout's target changed (the pool's template, its class, or the class's AMIs, \
             subnets or security groups): a new rollout begins at wave 1; the halt in wave 1 \
             (health gate Restarts) was for the old target and no longer holds"
        );
        // The next pass: the same target, nothing begins again.
        let (_, progress) = start(&pass, 1, T0 + 900);
        let next = policy_pass(&canary(600), Some(&progress), &facts(6, 0, 1), T0 + 901);
        assert_eq!(next.retargeted, None);
        assert_eq!(next.cap, Some(0));
    }

    /// The pool's and the class's hashes are stamped one after the other, so a rollout may see
    /// its target change twice at its start: the canary already in flight is the new rollout's
    /// canary, not one more.
    #[test]
    fn disruptions_in_flight_count_as_the_new_rollouts_first_starts() {
        let mut last = halted_canary(Some("t0"));
        last.halted = None;
        last.soak_started_at = None;
        let pass = policy_pass(&canary(600), Some(&last), &facts(10, 9, 1), T0 + 60);
        assert_eq!(pass.retargeted.as_ref().map(|r| r.in_flight), Some(1));
        assert_eq!(pass.progress.as_ref().map(|p| p.started), Some(1));
        assert_eq!(pass.cap, Some(0));
        assert!(
            matches!(
                pass.hold,
                Some(PolicyHold::WaveFinishing { wave: 0, target: 1 })
            ),
            "{:?}",
            pass.hold
        );
        assert!(
            retargeted_message(pass.retargeted.as_ref().unwrap())
                .ends_with("at wave 1, counting the 1 disruption(s) in flight")
        );
    }

    /// Progress written before targets were recorded takes the target it sees, and its halt
    /// still holds; an unstamped pool (no target yet) changes nothing.
    #[test]
    fn progress_without_a_target_adopts_it_and_an_unknown_target_changes_nothing() {
        let last = halted_canary(None);
        let pass = policy_pass(&canary(600), Some(&last), &facts(6, 5, 0), T0 + 900);
        assert_eq!(pass.retargeted, None);
        assert!(matches!(pass.hold, Some(PolicyHold::Halted { .. })));
        assert_eq!(
            pass.progress.as_ref().and_then(|p| p.target.as_deref()),
            Some("t1")
        );
        let mut unknown = facts(6, 5, 0);
        unknown.target = None;
        let pass = policy_pass(
            &canary(600),
            Some(&halted_canary(Some("t0"))),
            &unknown,
            T0 + 900,
        );
        assert_eq!(pass.retargeted, None);
        assert!(matches!(pass.hold, Some(PolicyHold::Halted { .. })));
        assert_eq!(
            pass.progress.as_ref().and_then(|p| p.target.as_deref()),
            Some("t0")
        );
    }

    #[test]
    fn the_target_follows_the_hashes_and_the_resolved_amis_in_any_order() {
        let pool: NodePool = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: web\n  annotations:\n    karpenter.sh/nodepool-hash: \"111\"\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n",
        )
        .unwrap();
        let class = |hash: &str, amis: &[&str]| -> EC2NodeClass {
            let amis: Vec<String> = amis.iter().map(|a| format!("{{id: {a}}}")).collect();
            serde_yaml::from_str(&format!(
                "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata:\n  name: default\n  annotations:\n    karpenter.k8s.aws/ec2nodeclass-hash: \"{hash}\"\nspec:\n  role: r\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  subnetSelectorTerms: [{{id: subnet-1}}]\n  securityGroupSelectorTerms: [{{id: sg-1}}]\nstatus:\n  amis: [{}]\n  subnets: [{{id: subnet-1, zone: z1}}]\n  securityGroups: [{{id: sg-1}}]\n",
                amis.join(", ")
            ))
            .unwrap()
        };
        let target = |c: &EC2NodeClass| rollout_target(&pool, Some(c)).unwrap();
        let a = target(&class("7", &["ami-1", "ami-2"]));
        assert_eq!(a, target(&class("7", &["ami-2", "ami-1"])));
        assert_ne!(a, target(&class("7", &["ami-3", "ami-2"])));
        assert_ne!(a, target(&class("8", &["ami-1", "ami-2"])));
        let mut restamped = pool.clone();
        restamped
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(ANNOTATION_NODEPOOL_HASH.into(), "112".into());
        assert_ne!(
            a,
            rollout_target(&restamped, Some(&class("7", &["ami-1", "ami-2"]))).unwrap()
        );
        let mut unstamped = pool.clone();
        unstamped.metadata.annotations = None;
        assert_eq!(
            rollout_target(&unstamped, Some(&class("7", &["ami-1"]))),
            None
        );
    }

    #[test]
    fn a_canary_wave_soaks_then_the_next_wave_grows_to_its_share() {
        let policy = canary(600);
        // Pass 1: 10 drifted nodes; the canary allows one.
        let pass = policy_pass(&policy, None, &facts(10, 10, 0), T0);
        assert_eq!(pass.cap, Some(1));
        assert_eq!(pass.wave_started, Some(0));
        let (n, progress) = start(&pass, 10, T0);
        assert_eq!(n, 1);
        // While the canary is replaced nothing else starts.
        let pass = policy_pass(&policy, Some(&progress), &facts(10, 9, 1), T0 + 30);
        assert_eq!(pass.cap, Some(0));
        assert!(matches!(
            pass.hold,
            Some(PolicyHold::WaveFinishing { wave: 0, target: 1 })
        ));
        // Replaced: the soak begins and holds for ten minutes.
        let pass = policy_pass(&policy, Some(&progress), &facts(10, 9, 0), T0 + 60);
        assert_eq!(
            pass.hold,
            Some(PolicyHold::Soaking {
                wave: 0,
                until: T0 + 660
            })
        );
        let progress = pass.progress.unwrap();
        let pass = policy_pass(&policy, Some(&progress), &facts(10, 9, 0), T0 + 659);
        assert_eq!(pass.cap, Some(0));
        // Soaked: wave 2 may take the pool to 50% (4 more).
        let pass = policy_pass(&policy, Some(&progress), &facts(10, 9, 0), T0 + 660);
        assert_eq!(pass.wave_started, Some(1));
        assert_eq!(pass.cap, Some(4));
        assert_eq!(pass.hold, None);
        let (_, progress) = start(&pass, 9, T0 + 660);
        assert_eq!(progress.started, 5);
        assert_eq!(progress.wave, 1);
        // Its replacements in flight (14 nodes for a moment) do not grow the wave.
        let pass = policy_pass(&policy, Some(&progress), &facts(14, 5, 4), T0 + 661);
        assert_eq!(pass.cap, Some(0));
        assert!(matches!(
            pass.hold,
            Some(PolicyHold::WaveFinishing { wave: 1, target: 5 })
        ));
        // Wave 2 done and soaked: the last wave takes the rest, uncapped.
        let pass = policy_pass(&policy, Some(&progress), &facts(10, 5, 0), T0 + 700);
        let progress = pass.progress.unwrap();
        let pass = policy_pass(&policy, Some(&progress), &facts(10, 5, 0), T0 + 1300);
        assert_eq!(pass.cap, None);
        assert_eq!(pass.wave_started, Some(2));
        // The rollout complete: the progress is dropped.
        let progress = pass.progress.unwrap();
        let pass = policy_pass(&policy, Some(&progress), &facts(10, 0, 0), T0 + 2000);
        assert_eq!(pass.progress, None);
    }

    #[test]
    fn a_failed_gate_during_the_soak_halts_until_the_halt_is_cleared() {
        let policy = canary(600);
        let pass = policy_pass(&policy, None, &facts(4, 4, 0), T0);
        let (_, progress) = start(&pass, 4, T0);
        // A gate that cannot be read holds the soak without halting it.
        let mut unknown = facts(4, 3, 0);
        unknown.gate_unknown = Some("prometheus at 10.0.0.9:9090: connection refused".into());
        let held = policy_pass(&policy, Some(&progress), &unknown, T0 + 5000);
        assert_eq!(held.cap, Some(0));
        assert!(
            matches!(&held.hold, Some(PolicyHold::GateUnknown { wave: 0, message }) if message.contains("refused"))
        );
        assert!(!held.hold.unwrap().holds_the_rollout());
        assert_eq!(held.halted_now, None);
        let mut sick = facts(4, 3, 0);
        sick.failing = vec![GateFailure {
            gate: "Restarts",
            message: "pod web/a restarted 5 times".into(),
        }];
        let pass = policy_pass(&policy, Some(&progress), &sick, T0 + 120);
        assert_eq!(pass.cap, Some(0));
        let halt = pass.halted_now.clone().unwrap();
        assert_eq!((halt.gate.as_str(), halt.wave), ("Restarts", 0));
        assert!(pass.hold.as_ref().unwrap().holds_the_rollout());
        // Halted stays halted, healthy or not, long after the soak.
        let progress = pass.progress.unwrap();
        let pass = policy_pass(&policy, Some(&progress), &facts(4, 3, 0), T0 + 99_999);
        assert_eq!(pass.cap, Some(0));
        assert_eq!(pass.halted_now, None, "the halt is announced once");
        assert!(matches!(pass.hold, Some(PolicyHold::Halted { .. })));
        // Resumed (the halt cleared): the soak restarts from its beginning.
        let mut resumed = progress.clone();
        resumed.halted = None;
        resumed.soak_started_at = None;
        let pass = policy_pass(&policy, Some(&resumed), &facts(4, 3, 0), T0 + 100_000);
        assert!(
            matches!(pass.hold, Some(PolicyHold::Soaking { until, .. }) if until == T0 + 100_600)
        );
    }

    #[test]
    fn a_rate_budget_counts_starts_in_a_sliding_window() {
        let policy = RolloutPolicy {
            rate: Some(RateBudget {
                nodes: NodeCount::Nodes(10),
                window_seconds: 600,
            }),
            ..RolloutPolicy::default()
        };
        let pass = policy_pass(&policy, None, &facts(100, 100, 0), T0);
        assert_eq!(pass.cap, Some(10));
        let (_, progress) = start(&pass, 100, T0);
        let pass = policy_pass(&policy, Some(&progress), &facts(100, 90, 10), T0 + 599);
        assert_eq!(pass.cap, Some(0));
        assert_eq!(
            pass.hold,
            Some(PolicyHold::Rate {
                limit: 10,
                window_seconds: 600,
                until: T0 + 600
            })
        );
        assert!(!pass.hold.unwrap().holds_the_rollout());
        let pass = policy_pass(&policy, Some(&progress), &facts(100, 90, 0), T0 + 600);
        assert_eq!(pass.cap, Some(10));
        assert!(pass.progress.unwrap().recent_starts.is_empty());
    }

    #[test]
    fn a_rate_and_a_wave_the_smaller_wins() {
        let mut policy = canary(0);
        policy.waves = vec![NodeCount::Percent(50)];
        policy.rate = Some(RateBudget {
            nodes: NodeCount::Nodes(3),
            window_seconds: 3600,
        });
        let pass = policy_pass(&policy, None, &facts(20, 20, 0), T0);
        assert_eq!(pass.cap, Some(3), "the wave allows 10, the rate 3");
        let (_, progress) = start(&pass, 20, T0);
        let pass = policy_pass(&policy, Some(&progress), &facts(20, 17, 3), T0 + 10);
        assert!(matches!(pass.hold, Some(PolicyHold::Rate { .. })));
    }

    fn zoned(zones: &[(&str, usize, usize, usize)]) -> PoolFacts {
        let zones: Vec<ZoneFacts> = zones
            .iter()
            .map(|(zone, nodes, drifted, disrupting)| ZoneFacts {
                zone: zone.to_string(),
                nodes: *nodes,
                drifted: *drifted,
                disrupting: *disrupting,
            })
            .collect();
        PoolFacts {
            total: zones.iter().map(|z| z.nodes).sum(),
            drifted: zones.iter().map(|z| z.drifted).sum(),
            disrupting: zones.iter().map(|z| z.disrupting).sum(),
            failing: Vec::new(),
            zones,
            gate_unknown: None,
            target: Some("t1".into()),
        }
    }

    #[test]
    fn zone_by_zone_finishes_a_zone_before_the_next_in_order() {
        let policy = RolloutPolicy {
            zone_order: Some(driftwood_api::rollout_policy::ZoneOrder::Auto),
            ..RolloutPolicy::default()
        };
        // b is the smallest zone: it goes first, with no cap on how many of its nodes.
        let pass = policy_pass(&policy, None, &zoned(&[("a", 4, 4, 0), ("b", 2, 2, 0)]), T0);
        assert_eq!(pass.zone.as_deref(), Some("b"));
        assert_eq!(pass.zone_started.as_deref(), Some("b"));
        assert_eq!(pass.cap, None);
        let progress = pass.progress.unwrap();
        // b's nodes disrupting, none left to start: a waits for them.
        let pass = policy_pass(
            &policy,
            Some(&progress),
            &zoned(&[("a", 4, 4, 0), ("b", 4, 0, 2)]),
            T0 + 10,
        );
        assert_eq!(pass.zone.as_deref(), Some("b"));
        assert_eq!(pass.zone_started, None);
        assert_eq!(pass.cap, Some(0));
        assert_eq!(
            pass.hold,
            Some(PolicyHold::ZoneFinishing { zone: "b".into() })
        );
        // b done: a's turn, though b is now the larger zone.
        let pass = policy_pass(
            &policy,
            Some(&progress),
            &zoned(&[("a", 4, 4, 0), ("b", 2, 0, 0)]),
            T0 + 60,
        );
        assert_eq!(pass.zone.as_deref(), Some("a"));
        assert_eq!(pass.zone_started.as_deref(), Some("a"));
        // Finished: the zone is forgotten with the rest.
        let progress = pass.progress.unwrap();
        let pass = policy_pass(
            &policy,
            Some(&progress),
            &zoned(&[("a", 4, 0, 0), ("b", 2, 0, 0)]),
            T0 + 600,
        );
        assert_eq!(pass.progress, None);
    }

    #[test]
    fn a_deadline_spreads_the_disruptions_evenly_and_warns_once_when_a_rate_cannot_meet_it() {
        let policy = RolloutPolicy {
            deadline_seconds: Some(4000),
            ..RolloutPolicy::default()
        };
        // 4 nodes over 4000 s: one due every 1000 s, the first at once.
        let pass = policy_pass(&policy, None, &facts(4, 4, 0), T0);
        assert_eq!(pass.cap, Some(1));
        assert_eq!(pass.deadline_at_risk, None);
        let (_, progress) = start(&pass, 4, T0);
        let pass = policy_pass(&policy, Some(&progress), &facts(4, 3, 0), T0 + 999);
        assert_eq!(pass.cap, Some(0));
        assert_eq!(pass.hold, Some(PolicyHold::Paced { next_at: T0 + 1000 }));
        let pass = policy_pass(&policy, Some(&progress), &facts(4, 3, 0), T0 + 2500);
        assert_eq!(pass.cap, Some(2), "two more due by 2500 s");
        // A rate of 1 per 30 min needs 90 min for 4 nodes: over a 4000 s deadline.
        let mut slow = policy.clone();
        slow.rate = Some(RateBudget {
            nodes: NodeCount::Nodes(1),
            window_seconds: 1800,
        });
        let pass = policy_pass(&slow, None, &facts(4, 4, 0), T0);
        let why = pass.deadline_at_risk.clone().unwrap();
        assert!(why.contains("needs at least 1h30m0s"), "{why}");
        let progress = pass.progress.unwrap();
        let pass = policy_pass(&slow, Some(&progress), &facts(4, 4, 0), T0 + 5);
        assert_eq!(pass.deadline_at_risk, None, "warned once");
        // Past the deadline with nodes left: at risk in a fresh rollout's record too.
        let mut fresh = progress.clone();
        fresh.deadline_at_risk = false;
        let pass = policy_pass(&policy, Some(&fresh), &facts(4, 1, 0), T0 + 4000);
        assert!(
            pass.deadline_at_risk
                .unwrap()
                .contains("has passed with 1 node(s)")
        );
    }

    #[test]
    fn outside_the_maintenance_window_nothing_starts() {
        let policy = RolloutPolicy {
            maintenance: Some(driftwood_api::rollout_policy::MaintenanceWindow {
                schedule: driftwood_api::cron::CronSchedule::parse("0 2 * * *").unwrap(),
                duration_seconds: 3600,
            }),
            ..RolloutPolicy::default()
        };
        let midnight = T0 - T0 % 86_400;
        let pass = policy_pass(&policy, None, &facts(4, 4, 0), midnight + 3600);
        assert_eq!(pass.cap, Some(0));
        assert_eq!(
            pass.hold,
            Some(PolicyHold::Window {
                opens_at: Some(midnight + 7200)
            })
        );
        assert!(!pass.hold.unwrap().holds_the_rollout());
        let pass = policy_pass(&policy, None, &facts(4, 4, 0), midnight + 7200);
        assert_eq!(pass.cap, None);
    }

    #[test]
    fn gates_name_the_pod_and_the_pdb_that_failed_them() {
        let gates = RolloutPolicy::default().gates;
        let mut gates_with_pdb = gates.clone();
        gates_with_pdb.pdb_blocked_limit_seconds = Some(600);
        let pods = vec![
            PodHealth {
                key: "shop/web-1".into(),
                node: "n-new".into(),
                unready_since: None,
                restarts: 4,
            },
            PodHealth {
                key: "shop/web-2".into(),
                node: "n-new".into(),
                unready_since: Some(T0 - 301),
                restarts: 0,
            },
            PodHealth {
                key: "shop/web-3".into(),
                node: "n-new".into(),
                unready_since: Some(T0 - 299),
                restarts: 3,
            },
        ];
        let failing = gate_failures(&gates_with_pdb, &pods, &[("shop/web".into(), T0 - 601)], T0);
        let gates: Vec<_> = failing.iter().map(|f| f.gate).collect();
        assert_eq!(gates, vec!["PdbBlocked", "Restarts", "Unready"]);
        assert!(
            failing[1]
                .message
                .contains("shop/web-1 on new node n-new restarted 4 times")
        );
        assert!(failing[2].message.contains("shop/web-2"));
        assert!(
            gate_failures(
                &gates_with_pdb,
                &pods[2..],
                &[("shop/web".into(), T0 - 600)],
                T0
            )
            .is_empty()
        );
    }
}
