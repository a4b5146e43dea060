//! The simulated AWS account: its configuration, state (images, SSM parameters, network,
//! launch templates, instances, IAM) and the knobs tests and scenarios turn.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use driftwood_aws::ami_family::{AmiFamily, Variant, alias_parameters};
use driftwood_aws::ports::{
    AwsError, Image, Instance, InstanceProfile, LaunchTemplate, Parameter, SecurityGroup, Subnet,
    Tag, codes, instance_state,
};
use driftwood_cloud::{Clock, OfferingKey};
use jiff::{SignedDuration, Timestamp};

use crate::calls::{CallCount, Meter};
use crate::faults::{Faults, NodeFault};
use crate::ids::resource_id;
use crate::images::{
    AMAZON_EKS_ACCOUNT, Release, SimImage, catalog_releases, ec2_time, release_images,
};
use crate::instance_catalog::{InstanceCatalog, instance_catalog};
use crate::network::{default_security_groups, default_subnets, vpc_id, zone_id};
use crate::realism::Realism;

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
    /// Eventual consistency, rate limits and latency (like AWS unless turned off).
    pub realism: Realism,
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
            realism: Realism::aws(),
        }
    }

    /// The same account without eventual consistency, rate limits or latency: every call
    /// answers at once, and a launched instance is described at once.
    pub fn without_realism(self) -> Self {
        self.with_realism(Realism::off())
    }

    /// The same account with `realism`.
    pub fn with_realism(mut self, realism: Realism) -> Self {
        self.realism = realism;
        self
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
    /// Never leaves `pending` (a fault).
    pub stuck: bool,
    /// When DescribeInstances first sees it (eventual consistency; its launch time when
    /// realism is off).
    pub visible_at: Timestamp,
    /// When EC2 reclaims it (two minutes after a spot interruption warning), unless it is
    /// terminated before.
    pub reclaim_at: Option<Timestamp>,
}

impl SimInstance {
    /// When its termination began as of `now`: a TerminateInstances, or a reclaim that is due.
    pub fn terminating_since(&self, now: Timestamp) -> Option<Timestamp> {
        let reclaimed = self.reclaim_at.filter(|at| *at <= now);
        match (self.terminated_at, reclaimed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Everything in the account.
#[derive(Debug, Clone, Default)]
pub struct SimState {
    pub images: BTreeMap<String, SimImage>,
    /// Image name → id (names are unique in the simulation): DescribeImages by name or name
    /// prefix reads a range of this instead of every image.
    pub image_names: BTreeMap<String, String>,
    pub parameters: BTreeMap<String, StoredParameter>,
    pub subnets: BTreeMap<String, Subnet>,
    pub security_groups: BTreeMap<String, SecurityGroup>,
    pub instance_types: InstanceCatalog,
    pub launch_templates: BTreeMap<String, LaunchTemplate>,
    pub instances: BTreeMap<String, SimInstance>,
    pub instance_profiles: BTreeMap<String, InstanceProfile>,
    pub roles: BTreeSet<String>,
    pub faults: Faults,
    /// Monotonic counter for ids of launched resources.
    pub counter: u64,
    /// Every CreateFleet call made (for assertions).
    pub fleet_calls: u64,
    /// Releases to publish once the clock reaches their creation time, oldest first.
    pub scheduled_releases: Vec<Release>,
    /// Private IPs held by instances not terminated, and each subnet's next address to try.
    pub ips_in_use: BTreeSet<String>,
    pub ip_cursor: BTreeMap<String, u64>,
    /// SQS queues by name.
    pub queues: BTreeMap<String, crate::sqs::SimQueue>,
    /// The queues EventBridge rules send EC2 and AWS Health events to.
    pub event_queues: BTreeSet<String>,
}

/// The simulated EC2, SSM, IAM and pricing APIs of one account.
pub struct SimAws {
    pub(crate) config: SimConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) state: Mutex<SimState>,
    /// The kubelets' view of each running instance, built once (a running instance's type,
    /// image, zone, labels and tags do not change).
    pub(crate) machines: Mutex<std::collections::HashMap<String, Arc<crate::machines::Machine>>>,
    /// Call counters and rate limit buckets.
    pub(crate) meter: Mutex<Meter>,
    /// Wakes ReceiveMessage long polls when a message is sent.
    pub(crate) queue_arrivals: tokio::sync::Notify,
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
            meter: Mutex::default(),
            queue_arrivals: tokio::sync::Notify::new(),
        };
        let now = sim.now();
        let (due, later): (Vec<Release>, Vec<Release>) = catalog_releases()
            .into_iter()
            .partition(|r| r.created <= now);
        let start = starting_catalog(sim.config.seed, &due);
        {
            let mut st = sim.lock();
            st.images = start.images.clone();
            st.image_names = start.image_names.clone();
            st.parameters = start.parameters.clone();
            st.scheduled_releases = later;
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

    pub(crate) fn meter(&self) -> MutexGuard<'_, Meter> {
        self.meter.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The calls each API action received so far (by action name, e.g. `DescribeInstances`),
    /// with how many were refused as throttled. Only calls through the ports count.
    pub fn api_calls(&self) -> BTreeMap<String, CallCount> {
        self.meter().calls.clone()
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
        apply_release(&mut self.lock(), self.config.seed, release);
    }

    /// Publishes `release` now when it is not in the future, else as soon as the clock reaches
    /// its creation time (the next API call after that sees it).
    pub fn schedule_release(&self, release: Release) {
        if release.created <= self.now() {
            self.publish_release(&release);
        } else {
            let mut st = self.lock();
            let at = st
                .scheduled_releases
                .partition_point(|r| r.created <= release.created);
            st.scheduled_releases.insert(at, release);
        }
    }

    /// Publishes a new AL2/AL2023 release `eks_tag` and Bottlerocket release
    /// `bottlerocket_version` (either may be empty) created at `at`, now or when the clock gets
    /// there; each rebuilds every Kubernetes version its family last built.
    pub fn publish_release_at(&self, eks_tag: &str, bottlerocket_version: &str, at: Timestamp) {
        if !eks_tag.is_empty() {
            self.schedule_release(Release::new_eks(eks_tag, at));
        }
        if !bottlerocket_version.is_empty() {
            self.schedule_release(Release::new_bottlerocket(bottlerocket_version, at));
        }
    }

    /// Publishes every scheduled release whose time has come, oldest first. Cheap when none is
    /// due (one comparison).
    pub fn publish_due_releases(&self) {
        let now = self.now();
        let due: Vec<Release> = {
            let mut st = self.lock();
            let n = st.scheduled_releases.partition_point(|r| r.created <= now);
            st.scheduled_releases.drain(..n).collect()
        };
        for r in &due {
            self.publish_release(r);
        }
    }

    /// The images DescribeImages has to look at for `filters`: the named ids when an
    /// `image-id` filter lists exact ids, the names with a `name` filter's literal prefix when
    /// every pattern of it has one, else every image. The caller still applies every filter.
    pub(crate) fn image_candidates<'a>(
        st: &'a SimState,
        filters: &[driftwood_aws::ports::Filter],
    ) -> Vec<&'a SimImage> {
        let literal_prefix =
            |v: &String| -> String { v.chars().take_while(|c| *c != '*' && *c != '?').collect() };
        if let Some(f) = filters.iter().find(|f| {
            f.name == "image-id" && f.values.iter().all(|v| literal_prefix(v).len() == v.len())
        }) {
            let ids: BTreeSet<&String> = f.values.iter().collect();
            return ids.into_iter().filter_map(|id| st.images.get(id)).collect();
        }
        if let Some(f) = filters
            .iter()
            .find(|f| f.name == "name" && f.values.iter().all(|v| !literal_prefix(v).is_empty()))
        {
            let mut ids = BTreeSet::new();
            for v in &f.values {
                let prefix = literal_prefix(v);
                ids.extend(
                    st.image_names
                        .range(prefix.clone()..)
                        .take_while(|(name, _)| name.starts_with(&prefix))
                        .map(|(_, id)| id),
                );
            }
            return ids.into_iter().filter_map(|id| st.images.get(id)).collect();
        }
        st.images.values().collect()
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
        let mut st = self.lock();
        st.image_names.insert(name.to_string(), id.clone());
        st.images.insert(
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

    /// The standard (non-accelerated) image an alias family (`al2`, `al2023`, `bottlerocket`,
    /// `windows2022`, ...) resolves to for `kubernetes_version` and `arch` (`amd64`/`arm64`) at
    /// `version` (`latest` or a release such as `v20250715`), read from the SSM public parameters — e.g.
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
            .find(|p| p.arch == arch && p.variants.contains(&Variant::Standard))
            .and_then(|p| self.ssm_get_parameter(&p.path).ok())
            .map(|p| p.value)
    }

    /// The image with `id`, if any.
    pub fn image(&self, id: &str) -> Option<SimImage> {
        self.lock().images.get(id).cloned()
    }

    /// The id of the image named `name`, if any.
    pub fn image_id_by_name(&self, name: &str) -> Option<String> {
        self.lock().image_names.get(name).cloned()
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

    /// Restores capacity for one offering.
    pub fn restore_capacity(&self, instance_type: &str, zone: &str, capacity_type: &str) {
        self.lock()
            .faults
            .insufficient_capacity
            .remove(&OfferingKey::new(instance_type, zone, capacity_type));
    }

    /// Lifts every armed fault except the kubelets' (a machine whose kubelet never became Ready
    /// stays broken; lift those with [`SimAws::set_node_fault`]).
    pub fn clear_faults(&self) {
        let mut st = self.lock();
        let node_faults = std::mem::take(&mut st.faults.node_faults);
        let image_faults = std::mem::take(&mut st.faults.image_faults);
        let impairments = std::mem::take(&mut st.faults.impairments);
        st.faults = Faults {
            node_faults,
            image_faults,
            impairments,
            ..Faults::default()
        };
    }

    /// Makes (or with `None` stops making) DescribeInstanceStatus report `instance_id`
    /// impaired or scheduled for an event. Like the kubelets' faults, it outlasts
    /// [`SimAws::clear_faults`]: a failed host stays failed.
    pub fn set_impairment(&self, instance_id: &str, impairment: Option<crate::faults::Impairment>) {
        let mut st = self.lock();
        match impairment {
            Some(i) => st.faults.impairments.insert(instance_id.to_string(), i),
            None => st.faults.impairments.remove(instance_id),
        };
    }

    /// Makes the next `count` CreateFleet calls fail for their cheaper half of offerings.
    pub fn fail_next_fleets_partially(&self, count: u32) {
        self.lock().faults.partial_fleet_failures += count;
    }

    /// Makes the next `count` launched instances stay `pending` forever.
    pub fn stick_next_launches(&self, count: u32) {
        self.lock().faults.stuck_launches += count;
    }

    /// Makes (or with `None` stops making) the kubelet of `instance_id` misbehave.
    pub fn set_node_fault(&self, instance_id: &str, fault: Option<NodeFault>) {
        let mut st = self.lock();
        match fault {
            Some(f) => st.faults.node_faults.insert(instance_id.to_string(), f),
            None => st.faults.node_faults.remove(instance_id),
        };
    }

    /// Makes (or with `None` stops making) every machine launched from `image_id` misbehave.
    pub fn set_image_fault(&self, image_id: &str, fault: Option<NodeFault>) {
        let mut st = self.lock();
        match fault {
            Some(f) => st.faults.image_faults.insert(image_id.to_string(), f),
            None => st.faults.image_faults.remove(image_id),
        };
    }

    /// The misbehaving kubelets, by provider ID (`aws:///zone/id`): each machine's own fault,
    /// else its image's.
    pub fn node_faults(&self) -> BTreeMap<String, NodeFault> {
        let st = self.lock();
        let mut faults: BTreeMap<String, NodeFault> = BTreeMap::new();
        if !st.faults.image_faults.is_empty() {
            for (id, s) in &st.instances {
                if let Some(f) = st.faults.image_faults.get(&s.instance.image_id) {
                    let provider =
                        driftwood_aws::launcher::provider_id(&s.instance.availability_zone, id);
                    faults.insert(provider, *f);
                }
            }
        }
        for (id, f) in &st.faults.node_faults {
            if let Some(s) = st.instances.get(id) {
                let provider =
                    driftwood_aws::launcher::provider_id(&s.instance.availability_zone, id);
                faults.insert(provider, *f);
            }
        }
        faults
    }

    /// Terminates an instance from outside the controller (an operator in the console, a
    /// failed host), with the state-change event EventBridge sends the interruption queue.
    /// Returns whether it was running or pending.
    pub fn terminate_from_outside(&self, instance_id: &str) -> bool {
        let now = self.now();
        let mut st = self.lock();
        let Some(stored) = st.instances.get(instance_id).cloned() else {
            return false;
        };
        if stored.terminating_since(now).is_some() {
            return false;
        }
        if let Some(s) = st.instances.get_mut(instance_id) {
            s.terminated_at = Some(now);
        }
        st.ips_in_use.remove(&stored.instance.private_ip_address);
        if let Some(subnet) = st.subnets.get_mut(&stored.instance.subnet_id) {
            subnet.available_ip_address_count += 1;
        }
        drop(st);
        // EC2 reports the state change to EventBridge (and so to the interruption queue).
        self.publish_event(&self.event_origin().state_change(
            instance_id,
            instance_state::SHUTTING_DOWN,
            now,
        ));
        true
    }

    /// Deletes a launch template behind the provider's back (its cache then names one that
    /// no longer exists).
    pub fn forget_launch_template(&self, name: &str) -> bool {
        self.lock().launch_templates.remove(name).is_some()
    }

    /// The names of the account's launch templates.
    pub fn launch_template_names(&self) -> Vec<String> {
        self.lock().launch_templates.keys().cloned().collect()
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
        match stored.terminating_since(now) {
            Some(t) if now >= t + self.config.termination_delay => instance_state::TERMINATED,
            Some(_) => instance_state::SHUTTING_DOWN,
            None if stored.stuck => instance_state::PENDING,
            None if now >= stored.instance.launch_time + self.config.launch_delay => {
                instance_state::RUNNING
            }
            None => instance_state::PENDING,
        }
    }

    /// Whether a terminated instance has aged out of DescribeInstances (one hour).
    pub(crate) fn vanished(&self, stored: &SimInstance, now: Timestamp) -> bool {
        stored.terminating_since(now).is_some_and(|t| {
            now >= t + self.config.termination_delay + SignedDuration::from_hours(1)
        })
    }

    /// Whether DescribeInstances lists `stored` at `now`: visible already (eventual
    /// consistency) and not aged out.
    pub(crate) fn described(&self, stored: &SimInstance, now: Timestamp) -> bool {
        now >= stored.visible_at && !self.vanished(stored, now)
    }

    /// Every instance as it is now (vanished ones excluded), by id: the account's own view,
    /// not DescribeInstances' eventually consistent one (a just-launched instance is here).
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

/// Adds `release`'s images and points its parameters at them.
fn apply_release(st: &mut SimState, seed: u64, release: &Release) {
    let out = release_images(seed, release);
    for img in out.images {
        st.image_names
            .insert(img.image.name.clone(), img.image.image_id.clone());
        st.images.insert(img.image.image_id.clone(), img);
    }
    for (path, id) in out.pinned.into_iter().chain(out.latest) {
        set_parameter(st, &path, &id);
    }
}

/// The images and parameters of the releases published when an account starts.
struct StartingCatalog {
    images: BTreeMap<String, SimImage>,
    image_names: BTreeMap<String, String>,
    parameters: BTreeMap<String, StoredParameter>,
}

/// The account's starting catalog after publishing `due` (oldest first), built once per seed
/// and number of releases and shared (up to eight at a time): building it takes ~100 ms in a
/// debug build, cloning it a fraction of that.
fn starting_catalog(seed: u64, due: &[Release]) -> Arc<StartingCatalog> {
    type Cache = Mutex<std::collections::HashMap<(u64, usize), Arc<StartingCatalog>>>;
    static CACHE: std::sync::OnceLock<Cache> = std::sync::OnceLock::new();
    let cache = CACHE.get_or_init(Cache::default);
    let key = (seed, due.len());
    if let Some(hit) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return hit.clone();
    }
    let mut st = SimState::default();
    for r in due {
        apply_release(&mut st, seed, r);
    }
    let built = Arc::new(StartingCatalog {
        images: st.images,
        image_names: st.image_names,
        parameters: st.parameters,
    });
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= 8 {
        // A few megabytes each: keep the memory of runs over many seeds bounded.
        cache.clear();
    }
    cache.insert(key, built.clone());
    built
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
