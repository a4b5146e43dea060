//! The simulated AWS account: its configuration, state (images, SSM parameters, network,
//! launch templates, instances, IAM) and the knobs tests and scenarios turn.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use driftwood_api::requirement::OP_EXISTS;
use driftwood_api::wellknown::LABEL_ARCH;
use driftwood_aws::ami_family::{AmiFamily, alias_parameters};
use driftwood_aws::ports::{
    AwsError, Image, Instance, InstanceProfile, LaunchTemplate, Parameter, SecurityGroup, Subnet,
    Tag, codes, instance_state,
};
use driftwood_cloud::{Clock, OfferingKey};
use jiff::{SignedDuration, Timestamp};

use crate::faults::Faults;
use crate::ids::resource_id;
use crate::images::{
    AMAZON_EKS_ACCOUNT, Release, SimImage, default_releases, ec2_time, release_images,
};
use crate::instance_catalog::{CatalogEntry, instance_catalog};
use crate::network::{default_security_groups, default_subnets, vpc_id, zone_id};

/// How a simulation is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Seed of every generated id and price.
    pub seed: u64,
    pub cluster_name: String,
    pub region: String,
    /// The account "self" refers to.
    pub account_id: String,
    /// Availability zones (one subnet each).
    pub zones: Vec<String>,
    /// How long an instance stays `pending` before it is `running`.
    pub launch_delay: SignedDuration,
    /// How long an instance stays `shutting-down` before it is `terminated`.
    pub termination_delay: SignedDuration,
    /// IAM roles that exist (the node role of the walkthrough among them).
    pub roles: Vec<String>,
}

impl SimConfig {
    /// A three-zone us-west-2 account for `cluster` with the walkthrough's node role
    /// `KarpenterNodeRole-<cluster>`.
    pub fn new(cluster: &str, seed: u64) -> Self {
        Self {
            seed,
            cluster_name: cluster.to_string(),
            region: "us-west-2".to_string(),
            account_id: "111122223333".to_string(),
            zones: ["us-west-2a", "us-west-2b", "us-west-2c"]
                .iter()
                .map(|z| z.to_string())
                .collect(),
            launch_delay: SignedDuration::from_secs(30),
            termination_delay: SignedDuration::from_secs(30),
            roles: vec![format!("KarpenterNodeRole-{cluster}")],
        }
    }
}

/// A stored SSM parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredParameter {
    pub value: String,
    pub version: i64,
}

/// A launched instance as stored (its state is derived from the clock when read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimInstance {
    pub instance: Instance,
    pub terminated_at: Option<Timestamp>,
    pub kubernetes_version: Option<String>,
}

/// Everything in the account.
#[derive(Debug, Clone, Default)]
pub struct SimState {
    pub images: BTreeMap<String, SimImage>,
    pub parameters: BTreeMap<String, StoredParameter>,
    pub subnets: BTreeMap<String, Subnet>,
    pub security_groups: BTreeMap<String, SecurityGroup>,
    pub instance_types: Vec<CatalogEntry>,
    pub launch_templates: BTreeMap<String, LaunchTemplate>,
    pub instances: BTreeMap<String, SimInstance>,
    pub instance_profiles: BTreeMap<String, InstanceProfile>,
    pub roles: BTreeSet<String>,
    pub faults: Faults,
    /// Monotonic counter for ids of launched resources.
    pub counter: u64,
    /// Every CreateFleet call made (for assertions).
    pub fleet_calls: u64,
    /// Releases to publish once the clock reaches their creation time.
    pub scheduled_releases: Vec<Release>,
    /// Private IPs held by instances not terminated, and each subnet's next address to try.
    pub ips_in_use: BTreeSet<String>,
    pub ip_cursor: BTreeMap<String, u64>,
}

/// The simulated EC2, SSM, IAM and pricing APIs of one account.
pub struct SimAws {
    pub(crate) config: SimConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) state: Mutex<SimState>,
    /// The kubelets' view of each running instance, built once (a running instance's type,
    /// image, zone, labels and tags do not change).
    pub(crate) machines: Mutex<std::collections::HashMap<String, Arc<crate::machines::Machine>>>,
}

impl SimAws {
    /// A populated account: the default AMI releases, the instance catalog, the network and roles.
    pub fn new(config: SimConfig, clock: Arc<dyn Clock>) -> Self {
        let mut state = SimState {
            instance_types: instance_catalog(),
            roles: config.roles.iter().cloned().collect(),
            ..SimState::default()
        };
        for s in default_subnets(
            config.seed,
            &config.cluster_name,
            &config.region,
            &config.zones,
        ) {
            state.subnets.insert(s.subnet_id.clone(), s);
        }
        for g in default_security_groups(config.seed, &config.cluster_name) {
            state.security_groups.insert(g.group_id.clone(), g);
        }
        let sim = Self {
            config,
            clock,
            state: Mutex::new(state),
            machines: Mutex::default(),
        };
        for r in default_releases() {
            sim.publish_release(&r);
        }
        sim
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// The current simulated time.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, SimState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails the call if a fault is queued for `operation`.
    pub(crate) fn check_fault(&self, operation: &str) -> Result<(), AwsError> {
        match self.lock().faults.take(operation) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    // ------------------------------------------------------------ images and SSM

    /// Publishes a release: its images for every Kubernetes version, its pinned SSM parameters,
    /// and the `recommended`/`latest` parameters now pointing at it.
    pub fn publish_release(&self, release: &Release) {
        let (images, pinned, latest) = release_images(self.config.seed, release);
        let mut st = self.lock();
        for img in images {
            st.images.insert(img.image.image_id.clone(), img);
        }
        for (path, id) in pinned.into_iter().chain(latest) {
            set_parameter(&mut st, &path, &id);
        }
    }

    /// Publishes release `eks_tag` (Bottlerocket `bottlerocket_version`) created at `at`: now
    /// when `at` is not in the future, else as soon as the clock reaches `at` (the next API call
    /// after that sees it).
    pub fn publish_release_at(&self, eks_tag: &str, bottlerocket_version: &str, at: Timestamp) {
        let release = Release::new(eks_tag, bottlerocket_version, at);
        if at <= self.now() {
            self.publish_release(&release);
        } else {
            self.lock().scheduled_releases.push(release);
        }
    }

    /// Publishes every scheduled release whose time has come, oldest first.
    pub fn publish_due_releases(&self) {
        let now = self.now();
        let mut due: Vec<Release> = {
            let mut st = self.lock();
            let (due, later): (Vec<Release>, Vec<Release>) = st
                .scheduled_releases
                .drain(..)
                .partition(|r| r.created <= now);
            st.scheduled_releases = later;
            due
        };
        due.sort_by_key(|r| r.created);
        for r in &due {
            self.publish_release(r);
        }
    }

    /// Adds an image owned by this account ("self"); returns its id.
    pub fn add_custom_image(
        &self,
        name: &str,
        architecture: &str,
        created: Timestamp,
        tags: Vec<Tag>,
        kubernetes_version: Option<&str>,
    ) -> String {
        let id = resource_id("ami", self.config.seed, &format!("self/{name}"));
        let image = Image {
            image_id: id.clone(),
            name: name.to_string(),
            description: String::new(),
            owner_id: self.config.account_id.clone(),
            image_owner_alias: None,
            architecture: architecture.to_string(),
            creation_date: ec2_time(created),
            deprecation_time: None,
            state: "available".to_string(),
            platform_details: "Linux/UNIX".to_string(),
            tags,
        };
        self.lock().images.insert(
            id.clone(),
            SimImage {
                image,
                kubernetes_version: kubernetes_version.map(str::to_string),
            },
        );
        id
    }

    /// Sets (or creates) an SSM parameter.
    pub fn put_parameter(&self, name: &str, value: &str) {
        set_parameter(&mut self.lock(), name, value);
    }

    /// Reads an SSM parameter by name (`driftwood sim ssm get-parameter --name NAME`).
    pub fn ssm_get_parameter(&self, name: &str) -> Result<Parameter, AwsError> {
        self.publish_due_releases();
        let st = self.lock();
        st.parameters
            .get(name)
            .map(|p| Parameter {
                name: name.to_string(),
                type_: "String".to_string(),
                value: p.value.clone(),
                version: p.version,
            })
            .ok_or_else(|| {
                AwsError::new(
                    codes::PARAMETER_NOT_FOUND,
                    format!("Parameter {name} not found."),
                )
            })
    }

    /// The standard (non-accelerated) image an alias family (`al2`, `al2023`, `bottlerocket`)
    /// resolves to for `kubernetes_version` and `arch` (`amd64`/`arm64`) at `version`
    /// (`latest` or a release such as `v20240807`), read from the SSM public parameters — e.g.
    /// the walkthrough's `<<AMD64PREVAMI>>`.
    pub fn eks_ami(
        &self,
        family: &str,
        version: &str,
        kubernetes_version: &str,
        arch: &str,
    ) -> Option<String> {
        let family = AmiFamily::from_alias(family)?;
        alias_parameters(family, version, kubernetes_version)
            .into_iter()
            .find(|p| {
                p.requirements
                    .iter()
                    .any(|r| r.key == LABEL_ARCH && r.values.iter().any(|v| v == arch))
                    && p.requirements.iter().all(|r| r.operator != OP_EXISTS)
            })
            .and_then(|p| self.ssm_get_parameter(&p.path).ok())
            .map(|p| p.value)
    }

    /// The image with `id`, if any.
    pub fn image(&self, id: &str) -> Option<SimImage> {
        self.lock().images.get(id).cloned()
    }

    /// The id of the image named `name`, if any.
    pub fn image_id_by_name(&self, name: &str) -> Option<String> {
        self.lock()
            .images
            .values()
            .find(|i| i.image.name == name)
            .map(|i| i.image.image_id.clone())
    }

    /// Marks an image deprecated from `at`.
    pub fn deprecate_image(&self, id: &str, at: Timestamp) {
        if let Some(img) = self.lock().images.get_mut(id) {
            img.image.deprecation_time = Some(ec2_time(at));
        }
    }

    // ------------------------------------------------------------ network

    /// Adds a subnet in `zone` with `available_ips` free addresses and `tags`; returns its id.
    pub fn add_subnet(&self, zone: &str, available_ips: i64, tags: Vec<Tag>) -> String {
        let mut st = self.lock();
        st.counter += 1;
        let id = resource_id("subnet", self.config.seed, &format!("extra/{}", st.counter));
        let index = self
            .config
            .zones
            .iter()
            .position(|z| z == zone)
            .unwrap_or(0);
        let subnet = Subnet {
            subnet_id: id.clone(),
            vpc_id: vpc_id(self.config.seed, &self.config.cluster_name),
            availability_zone: zone.to_string(),
            availability_zone_id: zone_id(&self.config.region, index),
            cidr_block: format!("10.1.{}.0/24", st.counter % 256),
            available_ip_address_count: available_ips,
            map_public_ip_on_launch: false,
            tags,
        };
        st.subnets.insert(id.clone(), subnet);
        id
    }

    /// Adds a security group named `name` with `tags`; returns its id.
    pub fn add_security_group(&self, name: &str, tags: Vec<Tag>) -> String {
        let id = resource_id("sg", self.config.seed, &format!("extra/{name}"));
        let group = SecurityGroup {
            group_id: id.clone(),
            group_name: name.to_string(),
            description: name.to_string(),
            vpc_id: vpc_id(self.config.seed, &self.config.cluster_name),
            tags,
        };
        self.lock().security_groups.insert(id.clone(), group);
        id
    }

    /// Every subnet, by id.
    pub fn subnets(&self) -> Vec<Subnet> {
        self.lock().subnets.values().cloned().collect()
    }

    /// Every security group, by id.
    pub fn security_groups(&self) -> Vec<SecurityGroup> {
        self.lock().security_groups.values().cloned().collect()
    }

    // ------------------------------------------------------------ IAM

    /// Adds an IAM role.
    pub fn add_role(&self, name: &str) {
        self.lock().roles.insert(name.to_string());
    }

    /// The instance profile named `name`, if any.
    pub fn instance_profile(&self, name: &str) -> Option<InstanceProfile> {
        self.lock().instance_profiles.get(name).cloned()
    }

    // ------------------------------------------------------------ faults

    /// Makes CreateFleet refuse `instance_type` in `zone` as `capacity_type`.
    pub fn inject_insufficient_capacity(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: &str,
    ) {
        self.lock()
            .faults
            .insufficient_capacity
            .insert(OfferingKey::new(instance_type, zone, capacity_type));
    }

    /// Restores capacity for every offering.
    pub fn clear_insufficient_capacity(&self) {
        self.lock().faults.insufficient_capacity.clear();
    }

    /// Makes the next call of `operation` (e.g. `CreateFleet`) fail with `error`.
    pub fn inject_error(&self, operation: &str, error: AwsError) {
        self.lock()
            .faults
            .queued_errors
            .entry(operation.to_string())
            .or_default()
            .push_back(error);
    }

    /// Throttles the next `calls` calls of `operation` with RequestLimitExceeded.
    pub fn throttle(&self, operation: &str, calls: u32) {
        self.lock()
            .faults
            .throttled_calls
            .insert(operation.to_string(), calls);
    }

    /// How many CreateFleet calls were made.
    pub fn fleet_calls(&self) -> u64 {
        self.lock().fleet_calls
    }

    // ------------------------------------------------------------ instances

    /// The state `stored` is in at `now`.
    pub(crate) fn observe(&self, stored: &SimInstance, now: Timestamp) -> Instance {
        let mut inst = stored.instance.clone();
        inst.state = self.state_at(stored, now).to_string();
        inst
    }

    /// The instance's state at `now` (without copying the instance).
    pub(crate) fn state_at(&self, stored: &SimInstance, now: Timestamp) -> &'static str {
        match stored.terminated_at {
            Some(t) if now >= t + self.config.termination_delay => instance_state::TERMINATED,
            Some(_) => instance_state::SHUTTING_DOWN,
            None if now >= stored.instance.launch_time + self.config.launch_delay => {
                instance_state::RUNNING
            }
            None => instance_state::PENDING,
        }
    }

    /// Whether a terminated instance has aged out of DescribeInstances (one hour).
    pub(crate) fn vanished(&self, stored: &SimInstance, now: Timestamp) -> bool {
        stored.terminated_at.is_some_and(|t| {
            now >= t + self.config.termination_delay + SignedDuration::from_hours(1)
        })
    }

    /// Every instance as it is now (vanished ones excluded), by id.
    pub fn instances(&self) -> Vec<Instance> {
        let now = self.now();
        let st = self.lock();
        st.instances
            .values()
            .filter(|s| !self.vanished(s, now))
            .map(|s| self.observe(s, now))
            .collect()
    }

    /// The owner ids an image owner selector (`self`, `amazon`, an account id) stands for.
    pub(crate) fn owner_matches(&self, owner: &str, image: &Image) -> bool {
        match owner {
            "self" => image.owner_id == self.config.account_id,
            "amazon" => {
                image.image_owner_alias.as_deref() == Some("amazon")
                    || image.owner_id == AMAZON_EKS_ACCOUNT
            }
            other => image.owner_id == other || image.image_owner_alias.as_deref() == Some(other),
        }
    }
}

fn set_parameter(st: &mut SimState, name: &str, value: &str) {
    let entry = st
        .parameters
        .entry(name.to_string())
        .or_insert(StoredParameter {
            value: String::new(),
            version: 0,
        });
    entry.value = value.to_string();
    entry.version += 1;
}
