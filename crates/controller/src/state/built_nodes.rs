//! Each Node's simulation view kept between passes: a pass takes the one built before unless
//! the Node, its NodeClaim or a pod on it is another object since (a watch event replaced it),
//! so building a pass's world costs a comparison of pointers per node and pod, not a copy of
//! every node's labels, taints and pods (a 2,000-node profile spent a quarter of the process
//! rebuilding them on each disruption pass while the fleet came up).

use driftwood_api::NodeClaim;
use driftwood_disruption::cached_pod::CachedPod;
use driftwood_scheduling::ExistingNode;
use k8s_openapi::api::core::v1::Node;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

/// What one view was built from, and the view. The objects are held, so a pointer compared
/// with them is never a freed one reused.
struct Built {
    node: Arc<Node>,
    claim: Option<Arc<NodeClaim>>,
    pods: Vec<Arc<CachedPod>>,
    view: Arc<ExistingNode>,
}

impl Built {
    fn built_from(
        &self,
        node: &Arc<Node>,
        claim: Option<&Arc<NodeClaim>>,
        pods: &[&Arc<CachedPod>],
    ) -> bool {
        Arc::ptr_eq(&self.node, node)
            && match (&self.claim, claim) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
            && self.pods.len() == pods.len()
            && self.pods.iter().zip(pods).all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

/// The views built, by Node name; shared by the snapshots of one cluster state (a clone shares
/// it), and by the controllers that read them.
#[derive(Clone, Default)]
pub struct BuiltNodes(Arc<Mutex<HashMap<String, Built>>>);

impl std::fmt::Debug for BuiltNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let views = self.0.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("BuiltNodes").field("views", &views).finish()
    }
}

impl BuiltNodes {
    /// The view of Node `name` built from `node`, `claim` and `pods` (in the order given): the
    /// one built before from the same objects, or `build`'s (kept for next time). None when
    /// `build` fails (nothing is kept).
    pub fn view(
        &self,
        name: &str,
        node: &Arc<Node>,
        claim: Option<&Arc<NodeClaim>>,
        pods: &[&Arc<CachedPod>],
        build: impl FnOnce() -> Option<ExistingNode>,
    ) -> Option<Arc<ExistingNode>> {
        {
            let built = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(b) = built.get(name).filter(|b| b.built_from(node, claim, pods)) {
                return Some(Arc::clone(&b.view));
            }
        }
        let view = Arc::new(build()?);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                name.to_string(),
                Built {
                    node: Arc::clone(node),
                    claim: claim.cloned(),
                    pods: pods.iter().map(|p| Arc::clone(p)).collect(),
                    view: Arc::clone(&view),
                },
            );
        Some(view)
    }

    /// Forgets the views of Nodes not in `names` (gone from the cluster).
    pub fn keep_only(&self, names: &HashSet<&str>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|name, _| names.contains(name.as_str()));
    }
}
