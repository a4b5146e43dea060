//! Node Leases in `kube-node-lease`: the heartbeat each kubelet keeps (a 40 s lease renewed
//! every 10 s, the kubelet's defaults), owned by its Node so that it goes with the Node.
//!
//! Which leases to write is decided here over plain data; `super::run` writes them. All
//! renewals share one tick (every kubelet renews at the same instants) so a fleet of N nodes
//! wakes the kubelets once per interval rather than N times; a node that has no lease yet gets
//! one on the next pass, as a kubelet creates its lease right after registering.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Value, json};

/// The namespace the kubelets' leases live in.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The lease duration the kubelet writes (`nodeLeaseDurationSeconds`).
pub const LEASE_DURATION_SECONDS: i64 = 40;

/// The kubelet renews its lease at a quarter of the lease duration.
pub const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(10);

/// A node whose kubelet is posting status: its name and uid (the lease's owner).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LiveNode {
    /// Node name (also the lease's name and holder).
    pub name: String,
    /// Node uid, for the lease's ownerReference.
    pub uid: String,
}

/// One lease write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseWrite {
    /// Create the node's lease (it has none the kubelets know of).
    Create(LiveNode),
    /// Move the lease's renewTime to now.
    Renew(LiveNode),
}

/// The kubelets' memory of their leases between passes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseBook {
    /// Leases known to exist, by node name, with the uid of the node they were made for.
    held: BTreeMap<String, String>,
    /// When all held leases were last renewed.
    renewed_at: Option<Timestamp>,
}

impl LeaseBook {
    /// What to write now for the live nodes — (name, uid) pairs, borrowed: between ticks a
    /// pass allocates only for the writes it returns — and when the next renewal is due.
    ///
    /// Leases of nodes that are gone or no longer live are forgotten at the tick (the garbage
    /// collector deletes a gone node's lease through its ownerReference; a silent kubelet's
    /// lease expires). A node re-registered under the same name with a new uid gets a new lease.
    pub fn plan<'a>(
        &mut self,
        live: &[(&'a str, &'a str)],
        now: Timestamp,
        interval: Duration,
    ) -> (Vec<LeaseWrite>, Timestamp) {
        let due = self.is_due(now, interval);
        if due {
            self.renewed_at = Some(now);
            let names: BTreeSet<&str> = live.iter().map(|(name, _)| *name).collect();
            self.held.retain(|name, _| names.contains(name.as_str()));
        }
        let mut writes = Vec::new();
        for (name, uid) in live {
            let node = || LiveNode {
                name: (*name).to_string(),
                uid: (*uid).to_string(),
            };
            match self.held.get(*name) {
                Some(held) if held == uid => {
                    if due {
                        writes.push(LeaseWrite::Renew(node()));
                    }
                }
                _ => writes.push(LeaseWrite::Create(node())),
            }
        }
        let next = self.renewed_at.unwrap_or(now) + interval;
        (writes, next)
    }

    /// Whether every held lease is to be renewed at `now` (the tick; also when the clock went
    /// back). [`LeaseBook::plan`] must then be given every live node.
    pub fn is_due(&self, now: Timestamp, interval: Duration) -> bool {
        self.renewed_at
            .is_none_or(|at| at > now || now.duration_since(at).unsigned_abs() >= interval)
    }

    /// Record that a node's lease exists (created, or found on create).
    pub fn holding(&mut self, node: &LiveNode) {
        self.held.insert(node.name.clone(), node.uid.clone());
    }

    /// Forget a node's lease (it was not found on renewal): the next pass creates it.
    pub fn lost(&mut self, name: &str) {
        self.held.remove(name);
    }
}

/// A time as a `MicroTime` (microsecond precision, UTC), as the kubelet writes renewTime.
pub fn micro_time(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// The Lease the kubelet creates for its node.
pub fn lease_for(node: &LiveNode, now: Timestamp) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node.name,
            "namespace": NODE_LEASE_NAMESPACE,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid,
            }],
        },
        "spec": {
            "holderIdentity": node.name,
            "leaseDurationSeconds": LEASE_DURATION_SECONDS,
            "renewTime": micro_time(now),
        },
    })
}

/// The merge patch that renews a lease.
pub fn renewal(now: Timestamp) -> Value {
    json!({"spec": {"renewTime": micro_time(now)}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn node(name: &str, uid: &str) -> LiveNode {
        LiveNode {
            name: name.to_string(),
            uid: uid.to_string(),
        }
    }

    fn pairs(nodes: &[LiveNode]) -> Vec<(&str, &str)> {
        nodes
            .iter()
            .map(|n| (n.name.as_str(), n.uid.as_str()))
            .collect()
    }

    fn held(book: &mut LeaseBook, writes: &[LeaseWrite]) {
        for write in writes {
            let (LeaseWrite::Create(n) | LeaseWrite::Renew(n)) = write;
            book.holding(n);
        }
    }

    #[test]
    fn a_new_node_gets_a_lease_at_once_and_renewals_share_one_tick() {
        let interval = DEFAULT_RENEW_INTERVAL;
        let mut book = LeaseBook::default();
        let (writes, next) = book.plan(&pairs(&[node("a", "1")]), at(0), interval);
        assert_eq!(writes, vec![LeaseWrite::Create(node("a", "1"))]);
        assert_eq!(next, at(10));
        held(&mut book, &writes);

        // A node registering between ticks is not made to wait for the tick.
        let live = [node("a", "1"), node("b", "2")];
        let (writes, next) = book.plan(&pairs(&live), at(3), interval);
        assert_eq!(writes, vec![LeaseWrite::Create(node("b", "2"))]);
        assert_eq!(next, at(10));
        held(&mut book, &writes);

        // Nothing between ticks; both at the tick.
        assert!(book.plan(&pairs(&live), at(9), interval).0.is_empty());
        let (writes, next) = book.plan(&pairs(&live), at(10), interval);
        assert_eq!(
            writes,
            vec![
                LeaseWrite::Renew(node("a", "1")),
                LeaseWrite::Renew(node("b", "2"))
            ]
        );
        assert_eq!(next, at(20));
    }

    #[test]
    fn a_silent_or_gone_node_is_not_renewed_and_a_lost_lease_is_recreated() {
        let interval = DEFAULT_RENEW_INTERVAL;
        let mut book = LeaseBook::default();
        let (writes, _) = book.plan(&pairs(&[node("a", "1"), node("b", "2")]), at(0), interval);
        held(&mut book, &writes);
        // b's kubelet stops posting status: only a is renewed.
        let (writes, _) = book.plan(&pairs(&[node("a", "1")]), at(10), interval);
        assert_eq!(writes, vec![LeaseWrite::Renew(node("a", "1"))]);
        // b comes back (or re-registers with a new uid): a fresh lease.
        let (writes, _) = book.plan(&pairs(&[node("a", "1"), node("b", "3")]), at(12), interval);
        assert_eq!(writes, vec![LeaseWrite::Create(node("b", "3"))]);
        held(&mut book, &writes);
        // a's lease was deleted behind the kubelets' back.
        book.lost("a");
        let (writes, _) = book.plan(&pairs(&[node("a", "1"), node("b", "3")]), at(15), interval);
        assert_eq!(writes, vec![LeaseWrite::Create(node("a", "1"))]);
    }

    #[test]
    fn the_lease_is_the_kubelets_shape() {
        let lease = lease_for(&node("ip-10-0-0-1.ec2.internal", "u-1"), at(0));
        assert_eq!(lease["metadata"]["namespace"], "kube-node-lease");
        assert_eq!(lease["metadata"]["ownerReferences"][0]["kind"], "Node");
        assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(lease["spec"]["holderIdentity"], "ip-10-0-0-1.ec2.internal");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(lease["spec"]["renewTime"], "2027-01-15T08:00:00.000000Z");
    }
}
