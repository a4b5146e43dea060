//! driftwood-scheduling: a pure scheduling simulation.
//!
//! * [`requirements`]: the requirement algebra over label keys (In, NotIn, Exists,
//!   DoesNotExist, Gt, Lt, Gte, Lte, minValues), intersection and compatibility checks
//!   (strict, for requirement drift; scheduling, where well-known labels may be undefined).
//! * [`resources`] and [`quantity`]: exact resource arithmetic in milli-units.
//! * [`instance_type`]: instance types, overhead, allocatable and offerings.
//! * [`pod`]: [`SimPod`], the scheduling facts of a Kubernetes Pod computed once.
//! * [`taints`]: taints and tolerations.
//! * [`shared`]: [`Shared`], a value shared between clones and copied on write.
//! * [`model`]: the simulation's plain-data input and output.
//! * [`schedule`]: the simulation itself — existing capacity first, then new NodeClaims.
//!
//! The provisioner calls [`schedule`] with pending pods; the disruption planner calls it with
//! a node marked [`ExistingNode::going_away`] and reads whether all its pods found a place and
//! which NodeClaims are needed. No I/O, no async, deterministic.
//!
//! ```
//! use driftwood_scheduling::testkit::{GIB, fake_instance_types, nodepool, pod};
//! use driftwood_scheduling::{SimulationInput, schedule};
//!
//! let input = SimulationInput {
//!     pods: vec![pod("default/web-1", 500, GIB), pod("default/web-2", 500, GIB)],
//!     nodepools: vec![nodepool("default", fake_instance_types(10))],
//!     ..SimulationInput::default()
//! };
//! let result = schedule(&input).expect("valid input");
//! assert!(result.unschedulable.is_empty());
//! assert_eq!(result.new_nodeclaims.len(), 1);
//! assert_eq!(result.new_nodeclaims[0].instance_types[0], "fake-it-1");
//! ```

#![warn(missing_docs)]

mod engine;
pub mod instance_type;
pub mod model;
pub mod pod;
pub mod quantity;
pub mod requirements;
pub mod resources;
pub mod shared;
pub mod taints;
pub mod testkit;

pub use engine::{
    FLEXIBLE_ZONE, NO_ZONE, PoolCache, Removals, SolveProgress, packing_efficiency, schedule,
    schedule_cached, schedule_observed,
};
pub use instance_type::{InstanceType, Offering, Overhead};
pub use model::{
    DEFAULT_MAX_INSTANCE_TYPES, ExistingNode, ExistingPlacement, NewNodeClaim, NodeConversionError,
    NodePoolSpec, NodeSummary, ObservedSimulation, Observer, SimulationError, SimulationInput,
    SimulationObserver, SimulationOptions, SimulationResult, UnschedulablePod,
};
pub use pod::{
    HostPort, PodAffinityTerm, PodConstraints, PodConversionError, ResourceField, SimPod,
    TopologySpread, pod_resources,
};
pub use quantity::{QuantityError, parse_quantity_milli};
pub use requirements::{Incompatibility, Operator, Requirement, RequirementError, Requirements};
pub use resources::{NODES, ResourceError, Resources};
pub use shared::Shared;
pub use taints::{Taint, TaintEffect, TaintError, Toleration};
