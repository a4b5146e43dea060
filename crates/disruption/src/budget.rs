//! Disruption budgets: how many nodes of a NodePool may be disrupted now for a reason, and which
//! budget decides it (so a blocked rollout can say why and until when).

use driftwood_api::cron::{CronSchedule, WindowAt};
use driftwood_api::duration::parse_go_duration;
use driftwood_api::nodepool::{Budget, NodePool};
use std::fmt;

/// How one budget stands at a moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetState {
    /// Index in spec.disruption.budgets.
    pub index: usize,
    /// The budget's `nodes` as written.
    pub nodes: String,
    /// Whether it applies to the reason asked about.
    pub applies: bool,
    /// Whether its window is open now (always true without a schedule).
    pub active: bool,
    /// Its limit in nodes now (None when inactive or not applicable).
    pub limit: Option<usize>,
    /// When an inactive window next opens, or an active one closes (UTC seconds).
    pub window_change_at: Option<i64>,
    /// Why the budget could not be read (it then allows 0).
    pub error: Option<String>,
}

/// The budgets of one NodePool for one reason, at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedDisruptions {
    pub nodepool: String,
    pub reason: String,
    /// Nodes counted (initialized nodes of the pool).
    pub total_nodes: usize,
    /// Nodes already disrupting (NotReady or being deleted).
    pub disrupting: usize,
    /// The smallest limit of the active, applicable budgets (None: no budget limits now).
    pub limit: Option<usize>,
    /// How many more nodes may start disrupting now.
    pub allowed: usize,
    pub budgets: Vec<BudgetState>,
}

impl AllowedDisruptions {
    /// The budget that sets the limit, if any.
    pub fn binding_budget(&self) -> Option<&BudgetState> {
        self.budgets
            .iter()
            .filter(|b| b.limit.is_some())
            .min_by_key(|b| b.limit)
    }
}

impl fmt::Display for AllowedDisruptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.binding_budget() {
            None => write!(
                f,
                "nodepool {:?}: no budget limits {} disruptions now; {} of {} node(s) disrupting",
                self.nodepool, self.reason, self.disrupting, self.total_nodes
            ),
            Some(b) => {
                write!(
                    f,
                    "nodepool {:?}: budget[{}] (nodes: {:?}) allows {} {} disruption(s) of {} node(s), {} already disrupting, so {} more now",
                    self.nodepool,
                    b.index,
                    b.nodes,
                    b.limit.unwrap_or(0),
                    self.reason,
                    self.total_nodes,
                    self.disrupting,
                    self.allowed
                )?;
                if let Some(error) = &b.error {
                    write!(f, " (budget is invalid: {error})")?;
                }
                if let Some(at) = b.window_change_at {
                    write!(f, "; its window closes at {}", format_utc(at))?;
                }
                Ok(())
            }
        }
    }
}

/// How a budget counts one node of its pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetMember {
    pub initialized: bool,
    pub ready: bool,
    /// Being deleted, or a disruption command is in flight for it.
    pub marked: bool,
    /// It is the replacement of a node whose disruption command is in flight.
    pub stands_in: bool,
}

/// The node counts a budget is computed from: `(total, disrupting)`. The total counts the pool's
/// initialized nodes except replacements standing in for nodes still being disrupted, so a
/// percentage does not grow mid-rollout (10% of 30 nodes stays 3 while their replacements
/// join). Disrupting counts initialized nodes that are marked or NotReady.
pub fn budget_counts(members: impl IntoIterator<Item = BudgetMember>) -> (usize, usize) {
    members
        .into_iter()
        .filter(|m| m.initialized)
        .fold((0, 0), |(total, disrupting), m| {
            (
                total + usize::from(!m.stands_in),
                disrupting + usize::from(m.marked || !m.ready),
            )
        })
}

/// Computes the allowed disruptions of a NodePool for `reason` (Drifted, Empty, Underutilized)
/// at `now` (UTC seconds), given its initialized node count and how many are disrupting.
///
/// Each budget applies when it lists the reason or lists none; one with a schedule is active
/// while the most recent schedule start is within its duration. Percentages round up. An
/// unreadable budget allows 0. The result is the smallest active limit minus the nodes already
/// disrupting, never below 0; with no active budget, every node may be disrupted.
pub fn allowed_disruptions(
    nodepool: &NodePool,
    reason: &str,
    total_nodes: usize,
    disrupting: usize,
    now: i64,
) -> AllowedDisruptions {
    let budgets: Vec<BudgetState> = nodepool
        .spec
        .disruption
        .budgets
        .iter()
        .enumerate()
        .map(|(index, budget)| budget_state(index, budget, reason, total_nodes, now))
        .collect();
    let limit = budgets.iter().filter_map(|b| b.limit).min();
    let allowed = limit.unwrap_or(total_nodes).saturating_sub(disrupting);
    AllowedDisruptions {
        nodepool: nodepool.metadata.name.clone().unwrap_or_default(),
        reason: reason.to_string(),
        total_nodes,
        disrupting,
        limit,
        allowed,
        budgets,
    }
}

fn budget_state(
    index: usize,
    budget: &Budget,
    reason: &str,
    total_nodes: usize,
    now: i64,
) -> BudgetState {
    let applies = budget
        .reasons
        .as_ref()
        .is_none_or(|reasons| reasons.iter().any(|r| r == reason));
    let mut state = BudgetState {
        index,
        nodes: budget.nodes.clone(),
        applies,
        active: true,
        limit: None,
        window_change_at: None,
        error: None,
    };
    if !applies {
        return state;
    }
    match window(budget, now) {
        Ok(Window::Always) => {}
        Ok(Window::At(WindowAt::Open { closes_at })) => state.window_change_at = Some(closes_at),
        Ok(Window::At(WindowAt::Closed { opens_at })) => {
            state.active = false;
            state.window_change_at = opens_at;
            return state;
        }
        Err(error) => {
            state.error = Some(error);
            state.limit = Some(0);
            return state;
        }
    }
    match node_limit(&budget.nodes, total_nodes) {
        Ok(limit) => state.limit = Some(limit),
        Err(error) => {
            state.error = Some(error);
            state.limit = Some(0);
        }
    }
    state
}

/// A budget's window: none (always active), or its schedule's window now.
enum Window {
    Always,
    At(WindowAt),
}

fn window(budget: &Budget, now: i64) -> Result<Window, String> {
    let (schedule, duration) = match (&budget.schedule, &budget.duration) {
        (None, None) => return Ok(Window::Always),
        (Some(s), Some(d)) => (s, d),
        _ => return Err("'schedule' must be set with 'duration'".into()),
    };
    let schedule = CronSchedule::parse(schedule).map_err(|e| e.to_string())?;
    let duration = parse_go_duration(duration).map_err(|e| e.to_string())?;
    let duration = i64::try_from(duration).map_err(|_| "duration too large".to_string())?;
    Ok(Window::At(schedule.window_at(duration, now)))
}

/// A budget's `nodes` as a node count: "5" → 5; "10%" of `total` rounded up.
pub fn node_limit(nodes: &str, total: usize) -> Result<usize, String> {
    if let Some(percent) = nodes.strip_suffix('%') {
        let percent: usize = percent
            .parse()
            .map_err(|_| format!("nodes {nodes:?} is not a percentage"))?;
        if percent > 100 {
            return Err(format!("nodes {nodes:?} is over 100%"));
        }
        Ok((total * percent).div_ceil(100))
    } else {
        nodes
            .parse()
            .map_err(|_| format!("nodes {nodes:?} is not a count or a percentage"))
    }
}

/// A duration in seconds as `1h2m3s` (units that are zero left out; `0s` for none).
pub fn compact_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if sec > 0 || out.is_empty() {
        out.push_str(&format!("{sec}s"));
    }
    out
}

/// Formats UTC seconds as RFC 3339 (e.g. 2026-11-21T09:00:00Z).
pub fn format_utc(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = driftwood_api::cron::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_api::cron::days_from_civil;
    use driftwood_api::nodepool::NodePoolSpec;
    use proptest::prelude::*;

    fn pool(budgets: Vec<Budget>) -> NodePool {
        let mut np = NodePool::new("default", NodePoolSpec::default());
        np.spec.disruption.budgets = budgets;
        np
    }

    fn budget(nodes: &str) -> Budget {
        Budget {
            nodes: nodes.into(),
            ..Default::default()
        }
    }

    fn at(y: i64, mo: u32, d: u32, h: i64, mi: i64) -> i64 {
        days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60
    }

    #[test]
    fn default_is_ten_percent_rounded_up() {
        let np = NodePool::new("default", NodePoolSpec::default());
        assert_eq!(allowed_disruptions(&np, "Drifted", 30, 0, 0).allowed, 3);
        assert_eq!(allowed_disruptions(&np, "Drifted", 31, 0, 0).allowed, 4);
        assert_eq!(allowed_disruptions(&np, "Drifted", 1, 0, 0).allowed, 1);
        assert_eq!(allowed_disruptions(&np, "Drifted", 0, 0, 0).allowed, 0);
    }

    #[test]
    fn disrupting_nodes_use_up_the_budget() {
        let np = pool(vec![budget("3")]);
        assert_eq!(allowed_disruptions(&np, "Drifted", 30, 1, 0).allowed, 2);
        assert_eq!(allowed_disruptions(&np, "Drifted", 30, 5, 0).allowed, 0);
    }

    #[test]
    fn smallest_active_budget_wins() {
        let np = pool(vec![budget("20%"), budget("5"), budget("50%")]);
        let allowed = allowed_disruptions(&np, "Drifted", 100, 0, 0);
        assert_eq!(allowed.allowed, 5);
        assert_eq!(allowed.binding_budget().map(|b| b.index), Some(1));
    }

    #[test]
    fn reasons_limit_only_their_reasons() {
        let np = pool(vec![
            Budget {
                nodes: "0".into(),
                reasons: Some(vec!["Drifted".into()]),
                ..Default::default()
            },
            budget("10"),
        ]);
        assert_eq!(allowed_disruptions(&np, "Drifted", 50, 0, 0).allowed, 0);
        assert_eq!(allowed_disruptions(&np, "Empty", 50, 0, 0).allowed, 10);
        assert_eq!(
            allowed_disruptions(&np, "Underutilized", 50, 0, 0).allowed,
            10
        );
    }

    #[test]
    fn scheduled_zero_budget_blocks_inside_its_window_only() {
        // No drift during business hours (09:00-17:00 UTC, weekdays).
        let np = pool(vec![
            Budget {
                nodes: "0".into(),
                schedule: Some("0 9 * * mon-fri".into()),
                duration: Some("8h".into()),
                reasons: None,
            },
            budget("20%"),
        ]);
        // Friday 2026-11-20 10:00 → blocked until 17:00.
        let inside = allowed_disruptions(&np, "Drifted", 50, 0, at(2026, 11, 20, 10, 0));
        assert_eq!(inside.allowed, 0);
        assert_eq!(
            inside.budgets[0].window_change_at,
            Some(at(2026, 11, 20, 17, 0))
        );
        assert!(
            inside
                .to_string()
                .contains("closes at 2026-11-20T17:00:00Z"),
            "{inside}"
        );
        // The window end is exclusive.
        assert_eq!(
            allowed_disruptions(&np, "Drifted", 50, 0, at(2026, 11, 20, 17, 0)).allowed,
            10
        );
        // Saturday: the weekday window is closed; it reopens Monday 09:00.
        let weekend = allowed_disruptions(&np, "Drifted", 50, 0, at(2026, 11, 21, 10, 0));
        assert_eq!(weekend.allowed, 10);
        assert!(!weekend.budgets[0].active);
        assert_eq!(
            weekend.budgets[0].window_change_at,
            Some(at(2026, 11, 23, 9, 0))
        );
    }

    #[test]
    fn an_unreadable_budget_allows_nothing() {
        for broken in [
            budget("150%"),
            budget("lots"),
            Budget {
                nodes: "5".into(),
                schedule: Some("0 9 * *".into()),
                duration: Some("1h".into()),
                reasons: None,
            },
            Budget {
                nodes: "5".into(),
                schedule: Some("@daily".into()),
                duration: None,
                reasons: None,
            },
            Budget {
                nodes: "5".into(),
                schedule: Some("@daily".into()),
                duration: Some("soon".into()),
                reasons: None,
            },
        ] {
            let np = pool(vec![broken.clone(), budget("50%")]);
            let allowed = allowed_disruptions(&np, "Drifted", 10, 0, 0);
            assert_eq!(allowed.allowed, 0, "{broken:?}");
            assert!(allowed.budgets[0].error.is_some());
            assert!(allowed.to_string().contains("invalid"), "{allowed}");
        }
    }

    #[test]
    fn no_budgets_means_no_limit() {
        let np = pool(vec![]);
        assert_eq!(allowed_disruptions(&np, "Drifted", 7, 2, 0).allowed, 5);
    }

    #[test]
    fn replacements_do_not_inflate_a_percentage_mid_rollout() {
        let member = |marked, stands_in| BudgetMember {
            initialized: true,
            ready: true,
            marked,
            stands_in,
        };
        // 30 originals, 3 of them being replaced, their 3 replacements already initialized.
        let members = (0..30)
            .map(|i| member(i < 3, false))
            .chain((0..3).map(|_| member(false, true)));
        let (total, disrupting) = budget_counts(members);
        assert_eq!((total, disrupting), (30, 3));
        let np = NodePool::new("default", NodePoolSpec::default());
        assert_eq!(
            allowed_disruptions(&np, "Drifted", total, disrupting, 0).allowed,
            0,
            "10% of 30 = 3, all in use"
        );
        // A single node being replaced still counts until it goes: its budget stays 1.
        assert_eq!(
            budget_counts([member(true, false), member(false, true)]),
            (1, 1)
        );
        let not_ready = BudgetMember {
            initialized: true,
            ready: false,
            marked: false,
            stands_in: false,
        };
        let launching = BudgetMember {
            initialized: false,
            ready: false,
            marked: false,
            stands_in: false,
        };
        assert_eq!(budget_counts([not_ready, launching]), (1, 1));
    }

    #[test]
    fn formats_utc() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(at(2026, 11, 21, 9, 5)), "2026-11-21T09:05:00Z");
    }

    proptest! {
        #[test]
        fn percent_rounds_up_and_never_exceeds_total(percent in 0usize..=100, total in 0usize..5000) {
            let limit = node_limit(&format!("{percent}%"), total).unwrap();
            prop_assert!(limit <= total);
            prop_assert!(limit * 100 >= total * percent);
            prop_assert!(limit == 0 || (limit - 1) * 100 < total * percent);
        }

        #[test]
        fn allowed_never_exceeds_any_active_applicable_limit(
            counts in proptest::collection::vec(0usize..50, 1..5),
            total in 0usize..200,
            disrupting in 0usize..20,
        ) {
            let np = pool(counts.iter().map(|c| budget(&c.to_string())).collect());
            let allowed = allowed_disruptions(&np, "Drifted", total, disrupting, 0);
            let min = *counts.iter().min().unwrap();
            prop_assert_eq!(allowed.allowed, min.saturating_sub(disrupting));
        }
    }
}
