//! When the provisioner first saw each waiting pod, first decided on it and first found it
//! room: Karpenter's cluster-state pod times (`AckPods`, `MarkPodSchedulingDecisions`), kept in
//! memory (not from the pod's timestamps) behind its `karpenter_pods_provisioning_*` metrics
//! and `karpenter_pods_scheduling_decision_duration_seconds`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use jiff::Timestamp;

/// What the provisioner knows of one pod (by `namespace/name`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PodTimes {
    /// When the provisioner first saw the pod waiting for capacity.
    pub acked: Option<Timestamp>,
    /// When a provisioning simulation first decided on it (placed it, or could not).
    pub decided: Option<Timestamp>,
    /// When a simulation first found it room (cleared when a later one could not).
    pub schedulable: Option<Timestamp>,
}

/// One pod's times, with the UID of the pod they are of ("" until the hook acks it): a pod
/// deleted and created again under its name starts afresh.
#[derive(Debug, Clone, Default)]
struct Entry {
    uid: String,
    times: PodTimes,
}

/// The pods' times, shared by the pod hook (acks, forgets), the provisioner (decisions) and
/// the scrape (gauges). Entries live from a pod's first wait until it starts or finishes, or
/// until a pass or a scrape finds it gone.
#[derive(Clone, Default, Debug)]
pub struct PodSchedulingTimes(Arc<Mutex<HashMap<String, Entry>>>);

impl PodSchedulingTimes {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Each write is one entry's update: a panic elsewhere leaves the map usable.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that pod `key` (UID `uid`) waits for capacity at `now`; only the first time
    /// counts, unless the times kept are another pod's of the same name.
    pub fn ack(&self, key: &str, uid: &str, now: Timestamp) {
        let mut times = self.lock();
        let entry = times.entry(key.to_string()).or_default();
        if !entry.uid.is_empty() && entry.uid != uid {
            *entry = Entry::default();
        }
        entry.uid = uid.to_string();
        entry.times.acked.get_or_insert(now);
    }

    /// Records one simulation's decisions at `now` on pods given as (key, UID): `failed` pods
    /// found no room (their schedulable time is cleared), `placed` pods found some (unbound
    /// pods only: a bound pod moved with its deleting node is not waiting). Returns, for each
    /// pod decided on for the first time that was acked, the seconds from its ack to now
    /// (Karpenter's decision duration).
    pub fn decide<'a>(
        &self,
        failed: impl IntoIterator<Item = (&'a str, &'a str)>,
        placed: impl IntoIterator<Item = (&'a str, &'a str)>,
        now: Timestamp,
    ) -> Vec<f64> {
        let mut times = self.lock();
        let mut first = Vec::new();
        let mut note = |(key, uid): (&str, &str), schedulable: bool| {
            let entry = times.entry(key.to_string()).or_default();
            if !entry.uid.is_empty() && !uid.is_empty() && entry.uid != uid {
                *entry = Entry::default();
            }
            if entry.uid.is_empty() {
                entry.uid = uid.to_string();
            }
            let entry = &mut entry.times;
            if schedulable {
                entry.schedulable.get_or_insert(now);
            } else {
                entry.schedulable = None;
            }
            if entry.decided.is_none() {
                entry.decided = Some(now);
                if let Some(acked) = entry.acked {
                    first.push(now.duration_since(acked).as_secs_f64().max(0.0));
                }
            }
        };
        for key in failed {
            note(key, false);
        }
        for key in placed {
            note(key, true);
        }
        first
    }

    /// The times of pod `key`, if any are kept.
    pub fn get(&self, key: &str) -> Option<PodTimes> {
        self.lock().get(key).map(|e| e.times)
    }

    /// The times of pod `key` if they are of the pod with UID `uid` (or of no pod acked yet).
    pub fn get_for(&self, key: &str, uid: &str) -> Option<PodTimes> {
        self.lock()
            .get(key)
            .filter(|e| e.uid.is_empty() || e.uid == uid)
            .map(|e| e.times)
    }

    /// Forgets pod `key` (it started, finished or is gone).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Keeps only the entries `keep` keeps (given the pod's key and times).
    pub fn retain(&self, keep: impl Fn(&str, &PodTimes) -> bool) {
        self.lock().retain(|key, entry| keep(key, &entry.times));
    }

    /// Each kept pod's times, with the UID they are of, for the scrape.
    pub fn all(&self) -> Vec<(String, String, PodTimes)> {
        self.lock()
            .iter()
            .map(|(k, e)| (k.clone(), e.uid.clone(), e.times))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// Karpenter cluster state: a pod is acked once; its first decision is timed from the ack;
    /// a later decision is not timed again; a pod that found room and then none loses its
    /// schedulable time, and gets the first again when it finds room later.
    #[test]
    fn the_first_ack_and_the_first_decision_count() {
        let times = PodSchedulingTimes::default();
        times.ack("default/a", "a", at(100));
        times.ack("default/a", "a", at(105));
        times.ack("default/b", "b", at(101));
        assert_eq!(
            times.decide([("default/b", "b")], [("default/a", "a")], at(111)),
            [10.0, 11.0]
        );
        assert_eq!(
            times.get("default/a"),
            Some(PodTimes {
                acked: Some(at(100)),
                decided: Some(at(111)),
                schedulable: Some(at(111)),
            })
        );
        assert_eq!(times.get("default/b").unwrap().schedulable, None);
        // Decided again: nothing new to time; a (now without room) loses its schedulable
        // time, b gets its first.
        assert!(
            times
                .decide([("default/a", "a")], [("default/b", "b")], at(120))
                .is_empty()
        );
        assert_eq!(times.get("default/a").unwrap().schedulable, None);
        assert_eq!(times.get("default/b").unwrap().schedulable, Some(at(120)));
        times.decide([], [("default/a", "a"), ("default/b", "b")], at(130));
        assert_eq!(times.get("default/a").unwrap().schedulable, Some(at(130)));
        assert_eq!(times.get("default/b").unwrap().schedulable, Some(at(120)));
        // Another pod under a's name (deleted and created again) starts afresh.
        assert_eq!(times.get_for("default/a", "a2"), None);
        times.ack("default/a", "a2", at(140));
        assert_eq!(
            times.get_for("default/a", "a2"),
            Some(PodTimes {
                acked: Some(at(140)),
                ..PodTimes::default()
            })
        );
    }

    /// A pod decided on without an ack (this process started after the pod began waiting and
    /// the hook had not seen it yet) is recorded but not timed.
    #[test]
    fn a_decision_without_an_ack_is_not_timed() {
        let times = PodSchedulingTimes::default();
        assert!(times.decide([], [("default/a", "")], at(5)).is_empty());
        assert_eq!(times.get("default/a").unwrap().decided, Some(at(5)));
        times.ack("default/a", "a", at(6));
        assert_eq!(times.get("default/a").unwrap().acked, Some(at(6)));
        times.forget("default/a");
        assert_eq!(times.get("default/a"), None);
        times.ack("default/x", "x", at(1));
        times.ack("default/y", "y", at(1));
        times.retain(|k, _| k == "default/y");
        assert_eq!(times.all().len(), 1);
    }
}
