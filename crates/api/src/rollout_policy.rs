//! A NodePool's rollout policy, read from its `driftwood.sh/rollout-*` annotations: canary
//! waves with a soak and health gates between them, and a rate budget (nodes started per
//! window). Annotations travel with the NodePool through GitOps and leave Karpenter's CRD alone.

use crate::cron::{CronSchedule, WindowAt};
use crate::duration::parse_go_duration;
use crate::nodepool::NodePool;
use std::fmt;

/// Cumulative wave sizes, comma-separated: `"1,10%,50%"` replaces 1 node, then up to 10% of the
/// pool, then up to 50%, then the rest. Each wave waits for the one before to finish and soak.
pub const ANNOTATION_ROLLOUT_WAVES: &str = "driftwood.sh/rollout-waves";
/// How long each finished wave (but the last) is watched before the next starts: a Go duration.
pub const ANNOTATION_ROLLOUT_SOAK: &str = "driftwood.sh/rollout-soak";
/// A rate budget: `"10 per 10m"` or `"5% per 1h"`: at most that many disruptions started in any
/// window of that length, on top of the NodePool's budgets (the smaller wins).
pub const ANNOTATION_ROLLOUT_RATE: &str = "driftwood.sh/rollout-rate";
/// The restart gate: a pod on a node this rollout made that restarted more than this many times
/// fails the soak (default 3).
pub const ANNOTATION_ROLLOUT_MAX_RESTARTS: &str = "driftwood.sh/rollout-max-restarts";
/// The readiness gate: a pod on a node this rollout made that has not been Ready for longer than
/// this fails the soak (a Go duration, default 5m).
pub const ANNOTATION_ROLLOUT_UNREADY_LIMIT: &str = "driftwood.sh/rollout-unready-limit";
/// The PDB gate: a PodDisruptionBudget of the pool's pods allowing no disruption for longer than
/// this fails the soak (a Go duration; off when unset).
pub const ANNOTATION_ROLLOUT_PDB_BLOCKED_LIMIT: &str = "driftwood.sh/rollout-pdb-blocked-limit";

/// Zone by zone: `"auto"` (the zone with the fewest of the pool's nodes first) or the zones in
/// order, comma-separated (zones not listed follow by name). One zone's nodes are all replaced
/// before any node of the next is disrupted.
pub const ANNOTATION_ROLLOUT_ZONE_ORDER: &str = "driftwood.sh/rollout-zone-order";

/// A deadline: `"72h"` finishes the rollout within that time of its start, spreading its
/// disruptions evenly over it (the budgets and the rest of the policy still apply; a deadline
/// they cannot meet is warned about, not forced).
pub const ANNOTATION_ROLLOUT_DEADLINE: &str = "driftwood.sh/rollout-deadline";
/// A maintenance window for drift and expiry alike: a cron schedule (UTC, as a budget's) ...
pub const ANNOTATION_MAINTENANCE_SCHEDULE: &str = "driftwood.sh/maintenance-schedule";
/// ... and how long each window stays open (a Go duration). Outside it no drifted node is
/// disrupted and no expired node is deleted; both wait for the window.
pub const ANNOTATION_MAINTENANCE_DURATION: &str = "driftwood.sh/maintenance-duration";

/// The query gate: a PromQL instant query (driftwood runs with `--prometheus-url`) whose every
/// sample must stay at or under `driftwood.sh/rollout-gate-max` while a wave soaks.
pub const ANNOTATION_ROLLOUT_GATE_QUERY: &str = "driftwood.sh/rollout-gate-query";
/// The query gate's bound (a number, default 0).
pub const ANNOTATION_ROLLOUT_GATE_MAX: &str = "driftwood.sh/rollout-gate-max";

/// Every policy annotation, for listing and documentation.
pub const POLICY_ANNOTATIONS: [&str; 12] = [
    ANNOTATION_ROLLOUT_GATE_QUERY,
    ANNOTATION_ROLLOUT_GATE_MAX,
    ANNOTATION_ROLLOUT_DEADLINE,
    ANNOTATION_MAINTENANCE_SCHEDULE,
    ANNOTATION_MAINTENANCE_DURATION,
    ANNOTATION_ROLLOUT_WAVES,
    ANNOTATION_ROLLOUT_ZONE_ORDER,
    ANNOTATION_ROLLOUT_SOAK,
    ANNOTATION_ROLLOUT_RATE,
    ANNOTATION_ROLLOUT_MAX_RESTARTS,
    ANNOTATION_ROLLOUT_UNREADY_LIMIT,
    ANNOTATION_ROLLOUT_PDB_BLOCKED_LIMIT,
];

const DEFAULT_MAX_RESTARTS: u32 = 3;
const DEFAULT_UNREADY_LIMIT_SECONDS: u64 = 300;

/// A node count or a share of the pool's nodes (rounded up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeCount {
    Nodes(usize),
    Percent(u8),
}

impl NodeCount {
    /// The count over a pool of `total` nodes (a share rounds up).
    pub fn of(self, total: usize) -> usize {
        match self {
            NodeCount::Nodes(n) => n,
            NodeCount::Percent(p) => (total * usize::from(p)).div_ceil(100),
        }
    }

    fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(percent) = text.strip_suffix('%') {
            match percent.trim().parse::<u8>() {
                Ok(p) if (1..=100).contains(&p) => Ok(NodeCount::Percent(p)),
                _ => Err(format!("{text:?} must be a percentage from 1% to 100%")),
            }
        } else {
            match text.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(NodeCount::Nodes(n)),
                _ => Err(format!(
                    "{text:?} must be a node count of at least 1 or a percentage"
                )),
            }
        }
    }
}

impl fmt::Display for NodeCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeCount::Nodes(n) => write!(f, "{n}"),
            NodeCount::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// At most `nodes` disruptions started in any `window_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateBudget {
    pub nodes: NodeCount,
    pub window_seconds: u64,
}

/// The health gates a soaking wave is held to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthGates {
    pub max_restarts: u32,
    pub unready_limit_seconds: u64,
    pub pdb_blocked_limit_seconds: Option<u64>,
    pub query: Option<QueryGate>,
}

/// A PromQL query whose samples must stay at or under `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryGate {
    pub query: String,
    /// As written; a finite number (checked when read).
    pub max: String,
}

impl QueryGate {
    /// The bound as a number.
    pub fn max_value(&self) -> f64 {
        self.max.trim().parse().unwrap_or(0.0)
    }
}

/// The order zones are rolled in, one at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneOrder {
    /// The zone with the fewest of the pool's nodes first (the smallest share of capacity out
    /// at a time), then by name.
    Auto,
    /// These zones first, in this order; others after them by name.
    Listed(Vec<String>),
}

impl ZoneOrder {
    /// `zones` (name, the pool's nodes there) in rolling order.
    pub fn arrange<'a>(&self, zones: &[(&'a str, usize)]) -> Vec<&'a str> {
        let mut ordered: Vec<(&str, usize)> = zones.to_vec();
        match self {
            ZoneOrder::Auto => ordered.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(b.0))),
            ZoneOrder::Listed(list) => ordered.sort_by_key(|(zone, _)| {
                (
                    list.iter().position(|z| z == zone).unwrap_or(usize::MAX),
                    *zone,
                )
            }),
        }
        ordered.into_iter().map(|(zone, _)| zone).collect()
    }
}

/// A NodePool's rollout policy. The default (no annotation) adds nothing to the budgets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutPolicy {
    /// Cumulative wave sizes; the rollout's last wave (the rest) is implicit. Empty: no waves.
    pub waves: Vec<NodeCount>,
    /// Zone by zone, in this order (None: every zone at once).
    pub zone_order: Option<ZoneOrder>,
    pub soak_seconds: u64,
    pub rate: Option<RateBudget>,
    pub gates: HealthGates,
    /// Finish within this many seconds of the rollout's start, evenly spread.
    pub deadline_seconds: Option<u64>,
    /// Drift and expiry only inside this window.
    pub maintenance: Option<MaintenanceWindow>,
}

/// A recurring window: opens at each firing of `schedule`, open `duration_seconds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaintenanceWindow {
    pub schedule: CronSchedule,
    pub duration_seconds: i64,
}

impl MaintenanceWindow {
    /// The window at `now` (UTC seconds).
    pub fn at(&self, now: i64) -> WindowAt {
        self.schedule.window_at(self.duration_seconds, now)
    }
}

impl Default for RolloutPolicy {
    fn default() -> Self {
        Self {
            waves: Vec::new(),
            zone_order: None,
            soak_seconds: 0,
            rate: None,
            deadline_seconds: None,
            maintenance: None,
            gates: HealthGates {
                max_restarts: DEFAULT_MAX_RESTARTS,
                unready_limit_seconds: DEFAULT_UNREADY_LIMIT_SECONDS,
                pdb_blocked_limit_seconds: None,
                query: None,
            },
        }
    }
}

/// Why a NodePool's rollout policy could not be read: the NodePool, the annotation, its value and
/// the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("NodePool {nodepool:?}: annotation {annotation} {value:?}: {rule}")]
pub struct PolicyError {
    pub nodepool: String,
    pub annotation: &'static str,
    pub value: String,
    pub rule: String,
}

impl RolloutPolicy {
    /// Whether the policy adds anything to the NodePool's budgets.
    pub fn is_empty(&self) -> bool {
        self.waves.is_empty()
            && self.rate.is_none()
            && self.zone_order.is_none()
            && self.deadline_seconds.is_none()
            && self.maintenance.is_none()
    }

    /// The policy of `pool`, from its annotations.
    pub fn of(pool: &NodePool) -> Result<Self, PolicyError> {
        let nodepool = pool.metadata.name.clone().unwrap_or_default();
        let get = |key: &'static str| {
            pool.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(|v| (key, v.as_str()))
        };
        let fail = |(annotation, value): (&'static str, &str), rule: String| PolicyError {
            nodepool: nodepool.clone(),
            annotation,
            value: value.to_string(),
            rule,
        };
        let duration = |entry: (&'static str, &str)| {
            parse_go_duration(entry.1).map_err(|e| {
                fail(
                    entry,
                    format!("{} (a Go duration such as \"10m\" or \"1h30m\")", e.reason),
                )
            })
        };
        let mut policy = RolloutPolicy::default();
        if let Some(entry) = get(ANNOTATION_ROLLOUT_WAVES) {
            policy.waves = parse_waves(entry.1).map_err(|rule| fail(entry, rule))?;
        }
        if let Some(entry) = get(ANNOTATION_ROLLOUT_ZONE_ORDER) {
            policy.zone_order = Some(parse_zone_order(entry.1).map_err(|rule| fail(entry, rule))?);
        }
        if let Some(entry) = get(ANNOTATION_ROLLOUT_SOAK) {
            policy.soak_seconds = duration(entry)?;
        }
        if let Some(entry) = get(ANNOTATION_ROLLOUT_RATE) {
            policy.rate = Some(parse_rate(entry.1).map_err(|rule| fail(entry, rule))?);
        }
        if let Some(entry) = get(ANNOTATION_ROLLOUT_MAX_RESTARTS) {
            policy.gates.max_restarts = entry
                .1
                .trim()
                .parse()
                .map_err(|_| fail(entry, "must be a whole number of restarts".into()))?;
        }
        if let Some(entry) = get(ANNOTATION_ROLLOUT_UNREADY_LIMIT) {
            policy.gates.unready_limit_seconds = duration(entry)?;
        }
        if let Some(entry) = get(ANNOTATION_ROLLOUT_PDB_BLOCKED_LIMIT) {
            policy.gates.pdb_blocked_limit_seconds = Some(duration(entry)?);
        }
        if let Some(entry) = get(ANNOTATION_ROLLOUT_GATE_QUERY) {
            if entry.1.trim().is_empty() {
                return Err(fail(entry, "must be a PromQL query".into()));
            }
            let max = match get(ANNOTATION_ROLLOUT_GATE_MAX) {
                Some(bound) => {
                    if !bound.1.trim().parse::<f64>().is_ok_and(f64::is_finite) {
                        return Err(fail(bound, "must be a number".into()));
                    }
                    bound.1.trim().to_string()
                }
                None => "0".to_string(),
            };
            policy.gates.query = Some(QueryGate {
                query: entry.1.to_string(),
                max,
            });
        } else if let Some(bound) = get(ANNOTATION_ROLLOUT_GATE_MAX) {
            return Err(fail(
                bound,
                format!("needs {ANNOTATION_ROLLOUT_GATE_QUERY}"),
            ));
        }
        if let Some(entry) = get(ANNOTATION_ROLLOUT_DEADLINE) {
            let seconds = duration(entry)?;
            if seconds == 0 {
                return Err(fail(entry, "the deadline must be longer than 0s".into()));
            }
            policy.deadline_seconds = Some(seconds);
        }
        match (
            get(ANNOTATION_MAINTENANCE_SCHEDULE),
            get(ANNOTATION_MAINTENANCE_DURATION),
        ) {
            (None, None) => {}
            (Some(schedule), Some(length)) => {
                let parsed = CronSchedule::parse(schedule.1).map_err(|e| {
                    fail(
                        schedule,
                        format!("{} (a cron schedule such as \"0 2 * * *\", UTC)", e.reason),
                    )
                })?;
                let seconds = duration(length)?;
                if seconds == 0 {
                    return Err(fail(length, "the window must be longer than 0s".into()));
                }
                policy.maintenance = Some(MaintenanceWindow {
                    schedule: parsed,
                    duration_seconds: i64::try_from(seconds).unwrap_or(i64::MAX),
                });
            }
            (Some(one), None) => {
                return Err(fail(
                    one,
                    format!("must be set with {ANNOTATION_MAINTENANCE_DURATION}"),
                ));
            }
            (None, Some(one)) => {
                return Err(fail(
                    one,
                    format!("must be set with {ANNOTATION_MAINTENANCE_SCHEDULE}"),
                ));
            }
        }
        Ok(policy)
    }

    /// The cumulative node count wave `index` ends at over a pool of `total` nodes (at least one
    /// more than the wave before; `None` for the last, implicit wave: the rest).
    pub fn wave_target(&self, index: usize, total: usize) -> Option<usize> {
        let mut target = 0;
        for (i, wave) in self.waves.iter().enumerate() {
            let size = wave.of(total);
            if size >= total {
                return None; // this wave is already the rest
            }
            target = size.max(target + 1);
            if i == index {
                return Some(target);
            }
        }
        None
    }
}

fn parse_waves(text: &str) -> Result<Vec<NodeCount>, String> {
    let mut waves = Vec::new();
    for part in text.split(',') {
        if part.trim().is_empty() {
            return Err(
                "must be a comma-separated list of cumulative wave sizes, such as \"1,10%,50%\""
                    .into(),
            );
        }
        let wave = NodeCount::parse(part)?;
        if let Some(last) = waves.last() {
            let grows = match (last, wave) {
                (NodeCount::Nodes(a), NodeCount::Nodes(b)) => *a < b,
                (NodeCount::Percent(a), NodeCount::Percent(b)) => *a < b,
                _ => true,
            };
            if !grows {
                return Err(format!(
                    "wave sizes are cumulative and must grow: {wave} after {last}"
                ));
            }
        }
        waves.push(wave);
    }
    Ok(waves)
}

fn parse_zone_order(text: &str) -> Result<ZoneOrder, String> {
    if text.trim() == "auto" {
        return Ok(ZoneOrder::Auto);
    }
    let zones: Vec<String> = text.split(',').map(|z| z.trim().to_string()).collect();
    if zones.iter().any(String::is_empty) {
        return Err("must be \"auto\" or zones in order, comma-separated, such as \"us-west-2a,us-west-2b\"".into());
    }
    for (i, zone) in zones.iter().enumerate() {
        if zones[..i].contains(zone) {
            return Err(format!("zone {zone:?} is listed twice"));
        }
    }
    Ok(ZoneOrder::Listed(zones))
}

fn parse_rate(text: &str) -> Result<RateBudget, String> {
    let rule =
        || format!("{text:?} must be NODES per DURATION, such as \"10 per 10m\" or \"5% per 1h\"");
    let (nodes, window) = text.split_once(" per ").ok_or_else(rule)?;
    let nodes = NodeCount::parse(nodes)?;
    let window_seconds =
        parse_go_duration(window.trim()).map_err(|e| format!("{}: {}", rule(), e.reason))?;
    if window_seconds == 0 {
        return Err(format!("{}: the window must be longer than 0s", rule()));
    }
    Ok(RateBudget {
        nodes,
        window_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(annotations: &[(&str, &str)]) -> NodePool {
        let mut pool = NodePool::new("web", Default::default());
        pool.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        pool
    }

    #[test]
    fn no_annotation_is_no_policy() {
        let policy = RolloutPolicy::of(&pool(&[])).unwrap();
        assert!(policy.is_empty());
        assert_eq!(policy, RolloutPolicy::default());
    }

    #[test]
    fn waves_soak_rate_and_gates_are_read() {
        let policy = RolloutPolicy::of(&pool(&[
            (ANNOTATION_ROLLOUT_WAVES, "1, 10%,50%"),
            (ANNOTATION_ROLLOUT_SOAK, "10m"),
            (ANNOTATION_ROLLOUT_RATE, "10 per 10m"),
            (ANNOTATION_ROLLOUT_MAX_RESTARTS, "0"),
            (ANNOTATION_ROLLOUT_UNREADY_LIMIT, "2m"),
            (ANNOTATION_ROLLOUT_PDB_BLOCKED_LIMIT, "30m"),
        ]))
        .unwrap();
        assert_eq!(
            policy.waves,
            vec![
                NodeCount::Nodes(1),
                NodeCount::Percent(10),
                NodeCount::Percent(50)
            ]
        );
        assert_eq!(policy.soak_seconds, 600);
        assert_eq!(
            policy.rate,
            Some(RateBudget {
                nodes: NodeCount::Nodes(10),
                window_seconds: 600
            })
        );
        assert_eq!(
            policy.gates,
            HealthGates {
                max_restarts: 0,
                unready_limit_seconds: 120,
                pdb_blocked_limit_seconds: Some(1800),
                query: None,
            }
        );
    }

    #[test]
    fn zones_roll_smallest_first_or_in_the_order_listed() {
        let zones = [("us-west-2a", 5), ("us-west-2b", 2), ("us-west-2c", 2)];
        let auto = RolloutPolicy::of(&pool(&[(ANNOTATION_ROLLOUT_ZONE_ORDER, "auto")])).unwrap();
        assert_eq!(
            auto.zone_order.unwrap().arrange(&zones),
            ["us-west-2b", "us-west-2c", "us-west-2a"]
        );
        let listed = RolloutPolicy::of(&pool(&[(
            ANNOTATION_ROLLOUT_ZONE_ORDER,
            "us-west-2c, us-west-2a",
        )]))
        .unwrap();
        assert!(!listed.is_empty());
        assert_eq!(
            listed.zone_order.unwrap().arrange(&zones),
            ["us-west-2c", "us-west-2a", "us-west-2b"]
        );
    }

    #[test]
    fn a_query_gate_needs_a_query_and_a_numeric_bound() {
        let policy = RolloutPolicy::of(&pool(&[
            (ANNOTATION_ROLLOUT_GATE_QUERY, "sum(rate(errors_total[5m]))"),
            (ANNOTATION_ROLLOUT_GATE_MAX, "0.05"),
        ]))
        .unwrap();
        let gate = policy.gates.query.unwrap();
        assert_eq!(gate.max_value(), 0.05);
        let error = RolloutPolicy::of(&pool(&[
            (ANNOTATION_ROLLOUT_GATE_QUERY, "up"),
            (ANNOTATION_ROLLOUT_GATE_MAX, "lots"),
        ]))
        .unwrap_err();
        assert_eq!(error.annotation, ANNOTATION_ROLLOUT_GATE_MAX);
        assert_eq!(
            RolloutPolicy::of(&pool(&[(ANNOTATION_ROLLOUT_GATE_QUERY, "up")]))
                .unwrap()
                .gates
                .query
                .unwrap()
                .max_value(),
            0.0
        );
    }

    #[test]
    fn a_maintenance_window_and_a_deadline_are_read() {
        let policy = RolloutPolicy::of(&pool(&[
            (ANNOTATION_MAINTENANCE_SCHEDULE, "0 2 * * *"),
            (ANNOTATION_MAINTENANCE_DURATION, "4h"),
            (ANNOTATION_ROLLOUT_DEADLINE, "72h"),
        ]))
        .unwrap();
        assert_eq!(policy.deadline_seconds, Some(72 * 3600));
        let window = policy.maintenance.unwrap();
        let day = 1_784_505_600; // 2026-07-20T00:00:00Z, a midnight
        assert_eq!(
            window.at(day + 3 * 3600),
            WindowAt::Open {
                closes_at: day + 6 * 3600
            }
        );
        assert_eq!(
            window.at(day + 6 * 3600),
            WindowAt::Closed {
                opens_at: Some(day + 86_400 + 2 * 3600)
            }
        );
        let error = RolloutPolicy::of(&pool(&[
            (ANNOTATION_MAINTENANCE_SCHEDULE, "0 25 * * *"),
            (ANNOTATION_MAINTENANCE_DURATION, "4h"),
        ]))
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("driftwood.sh/maintenance-schedule \"0 25 * * *\""),
            "{error}"
        );
    }

    #[test]
    fn wave_targets_are_cumulative_grow_by_at_least_one_and_end_with_the_rest() {
        let policy = RolloutPolicy::of(&pool(&[(ANNOTATION_ROLLOUT_WAVES, "1,10%,50%")])).unwrap();
        // 40 nodes: 1, then 4, then 20, then the rest.
        let targets: Vec<_> = (0..4).map(|i| policy.wave_target(i, 40)).collect();
        assert_eq!(targets, vec![Some(1), Some(4), Some(20), None]);
        // 5 nodes: 10% rounds up to 1, so the second wave still adds one node.
        let targets: Vec<_> = (0..4).map(|i| policy.wave_target(i, 5)).collect();
        assert_eq!(targets, vec![Some(1), Some(2), Some(3), None]);
        // A wave as large as the pool is the last.
        assert_eq!(policy.wave_target(0, 1), None);
    }

    #[test]
    fn bad_annotations_name_the_pool_the_annotation_and_the_rule() {
        let cases = [
            (ANNOTATION_ROLLOUT_WAVES, "0", "at least 1"),
            (ANNOTATION_ROLLOUT_WAVES, "10%,5%", "must grow"),
            (ANNOTATION_ROLLOUT_WAVES, "1,,2", "comma-separated"),
            (ANNOTATION_ROLLOUT_WAVES, "150%", "1% to 100%"),
            (ANNOTATION_ROLLOUT_RATE, "10/10m", "NODES per DURATION"),
            (ANNOTATION_ROLLOUT_RATE, "10 per 0s", "longer than 0s"),
            (ANNOTATION_ROLLOUT_SOAK, "ten minutes", "Go duration"),
            (ANNOTATION_ROLLOUT_MAX_RESTARTS, "-1", "whole number"),
            (
                ANNOTATION_ROLLOUT_ZONE_ORDER,
                "us-west-2a,,us-west-2b",
                "zones in order",
            ),
            (ANNOTATION_ROLLOUT_ZONE_ORDER, "a,b,a", "listed twice"),
            (ANNOTATION_ROLLOUT_DEADLINE, "0s", "longer than 0s"),
            (
                ANNOTATION_ROLLOUT_GATE_MAX,
                "0.5",
                "needs driftwood.sh/rollout-gate-query",
            ),
            (
                ANNOTATION_MAINTENANCE_SCHEDULE,
                "0 2 * * *",
                "must be set with driftwood.sh/maintenance-duration",
            ),
            (
                ANNOTATION_MAINTENANCE_DURATION,
                "4h",
                "must be set with driftwood.sh/maintenance-schedule",
            ),
        ];
        for (annotation, value, rule) in cases {
            let error = RolloutPolicy::of(&pool(&[(annotation, value)])).unwrap_err();
            let text = error.to_string();
            assert!(text.starts_with("NodePool \"web\": annotation "), "{text}");
            assert!(text.contains(annotation), "{text}");
            assert!(text.contains(rule), "{value}: {text}");
        }
    }
}
