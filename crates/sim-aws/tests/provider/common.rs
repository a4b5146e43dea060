//! Shared fixtures: a simulated account on a manual clock, a provider over it, class and claim
//! builders mirroring the walkthrough manifests.

use std::collections::BTreeMap;
use std::sync::Arc;

use driftwood_api::ec2nodeclass::{
    AmiSelectorTerm, EC2NodeClassSpec, SecurityGroupSelectorTerm, SubnetSelectorTerm,
};
use driftwood_api::nodeclaim::{NodeClaimSpec, ResourceRequirements};
use driftwood_api::requirement::OP_IN;
use driftwood_api::wellknown::LABEL_NODEPOOL;
use driftwood_api::{EC2NodeClass, NodeClaim, NodeSelectorRequirementWithMinValues as Req};
use driftwood_aws::{AwsProvider, AwsSettings, InMemoryNodeClasses};
use driftwood_cloud::ManualClock;
use driftwood_sim_aws::{DISCOVERY_TAG, Realism, SimAws, SimConfig, sim_ports};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub const CLUSTER: &str = "demo";
pub const ROLE: &str = "KarpenterNodeRole-demo";

pub struct Env {
    pub clock: Arc<ManualClock>,
    pub sim: Arc<SimAws>,
    pub classes: Arc<InMemoryNodeClasses>,
    pub provider: AwsProvider,
}

impl Env {
    pub fn advance(&self, secs: i64) {
        self.clock.advance(SignedDuration::from_secs(secs));
    }

    /// Waits out EC2's eventual consistency: every instance launched so far is visible to
    /// DescribeInstances afterwards (the longest visibility delay is 5 s).
    pub fn settle(&self) {
        self.advance(5);
    }

    /// Resolves `class`, stores it with its status and returns it.
    pub async fn resolve(&self, mut class: EC2NodeClass) -> EC2NodeClass {
        let resolution = self.provider.resolve_node_class(&class).await.unwrap();
        class.status = Some(resolution.status);
        self.classes.upsert(class.clone());
        class
    }
}

/// The simulation's default start: just after the newest release in the data.
pub fn start() -> Timestamp {
    driftwood_sim_aws::default_start_time()
}

pub fn env_for(kubernetes_version: &str, seed: u64) -> Env {
    env_at(kubernetes_version, seed, start())
}

/// An account whose clock starts at `at`: releases after `at` are published when the clock
/// gets there.
pub fn env_at(kubernetes_version: &str, seed: u64, at: Timestamp) -> Env {
    env_with(kubernetes_version, seed, at, Realism::aws())
}

/// An account like [`env_at`]'s with `realism` instead of the default (like AWS).
pub fn env_with(kubernetes_version: &str, seed: u64, at: Timestamp, realism: Realism) -> Env {
    let clock = Arc::new(ManualClock::new(at));
    let config = SimConfig::new(CLUSTER, seed).with_realism(realism);
    let sim = Arc::new(SimAws::new(config, clock.clone()));
    let classes = Arc::new(InMemoryNodeClasses::new());
    let provider = AwsProvider::new(
        sim_ports(&sim),
        AwsSettings::new(CLUSTER, "us-west-2", kubernetes_version),
        clock.clone(),
        classes.clone(),
    );
    Env {
        clock,
        sim,
        classes,
        provider,
    }
}

pub fn env() -> Env {
    env_for("1.29", 42)
}

pub fn discovery() -> BTreeMap<String, String> {
    BTreeMap::from([(DISCOVERY_TAG.to_string(), CLUSTER.to_string())])
}

pub fn id_term(id: &str) -> AmiSelectorTerm {
    AmiSelectorTerm {
        id: Some(id.to_string()),
        ..Default::default()
    }
}

pub fn name_term(name: &str, owner: Option<&str>) -> AmiSelectorTerm {
    AmiSelectorTerm {
        name: Some(name.to_string()),
        owner: owner.map(str::to_string),
        ..Default::default()
    }
}

pub fn alias_term(alias: &str) -> AmiSelectorTerm {
    AmiSelectorTerm {
        alias: Some(alias.to_string()),
        ..Default::default()
    }
}

/// A class like the walkthrough's: discovery-tagged subnets and groups, the node role.
pub fn class(
    name: &str,
    ami_terms: Vec<AmiSelectorTerm>,
    ami_family: Option<&str>,
) -> EC2NodeClass {
    let spec = EC2NodeClassSpec {
        ami_selector_terms: ami_terms,
        ami_family: ami_family.map(str::to_string),
        role: Some(ROLE.to_string()),
        subnet_selector_terms: vec![SubnetSelectorTerm {
            tags: discovery(),
            id: None,
        }],
        security_group_selector_terms: vec![SecurityGroupSelectorTerm {
            tags: discovery(),
            id: None,
            name: None,
        }],
        ..Default::default()
    };
    let mut c = EC2NodeClass::new(name, spec);
    c.metadata.generation = Some(1);
    c
}

/// The walkthrough NodePool's requirements.
pub fn walkthrough_requirements() -> Vec<Req> {
    vec![
        Req::new(
            "karpenter.k8s.aws/instance-category",
            OP_IN,
            &["c", "m", "r", "i", "d"],
        ),
        Req::new(
            "karpenter.k8s.aws/instance-cpu",
            OP_IN,
            &["4", "8", "16", "32", "48", "64"],
        ),
        Req::new("karpenter.sh/capacity-type", OP_IN, &["spot", "on-demand"]),
        Req::new("kubernetes.io/os", OP_IN, &["linux"]),
        Req::new("kubernetes.io/arch", OP_IN, &["amd64"]),
    ]
}

pub fn claim(name: &str, class: &str, requirements: Vec<Req>, cpu: &str) -> NodeClaim {
    let mut spec = NodeClaimSpec {
        requirements,
        ..Default::default()
    };
    spec.node_class_ref.name = class.to_string();
    spec.node_class_ref.kind = "EC2NodeClass".to_string();
    spec.node_class_ref.group = "karpenter.k8s.aws".to_string();
    spec.resources = Some(ResourceRequirements {
        requests: BTreeMap::from([("cpu".to_string(), Quantity(cpu.to_string()))]),
    });
    let mut c = NodeClaim::new(name, spec);
    c.metadata.labels = Some(BTreeMap::from([
        (LABEL_NODEPOOL.to_string(), "latest-current-ami".to_string()),
        ("intent".to_string(), "latest-current-ami".to_string()),
    ]));
    c
}

/// Ids of the class's resolved AMIs.
pub fn ami_ids(class: &EC2NodeClass) -> Vec<String> {
    class
        .status
        .as_ref()
        .unwrap()
        .amis
        .iter()
        .map(|a| a.id.clone())
        .collect()
}

pub fn condition<'a>(class: &'a EC2NodeClass, type_: &str) -> &'a driftwood_api::Condition {
    class
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap()
}
