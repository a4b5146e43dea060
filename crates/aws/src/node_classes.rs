//! Where the provider reads EC2NodeClasses from (the controller's cache implements this).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use driftwood_api::EC2NodeClass;

/// Read access to EC2NodeClasses by name.
pub trait NodeClassSource: Send + Sync {
    /// The class named `name`, with its status: a shared reference, not a copy.
    fn node_class(&self, name: &str) -> Option<Arc<EC2NodeClass>>;
}

/// An in-memory set of classes (tests, simulations).
#[derive(Debug, Default)]
pub struct InMemoryNodeClasses {
    classes: Mutex<BTreeMap<String, Arc<EC2NodeClass>>>,
}

impl InMemoryNodeClasses {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces `class` (keyed by its name).
    pub fn upsert(&self, class: EC2NodeClass) {
        let name = class.metadata.name.clone().unwrap_or_default();
        self.classes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name, Arc::new(class));
    }

    /// Removes the class named `name`.
    pub fn remove(&self, name: &str) {
        self.classes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(name);
    }
}

impl NodeClassSource for InMemoryNodeClasses {
    fn node_class(&self, name: &str) -> Option<Arc<EC2NodeClass>> {
        self.classes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned()
    }
}
