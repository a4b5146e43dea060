//! The AWS CloudProvider: wires resolution, the catalog, launch and drift to the ports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use driftwood_api::condition::Conditions;
use driftwood_api::hash::{EC2NODECLASS_HASH_VERSION, ec2nodeclass_hashes};
use driftwood_api::wellknown::{
    ANNOTATION_EC2NODECLASS_FIELD_HASHES, ANNOTATION_EC2NODECLASS_HASH,
    ANNOTATION_EC2NODECLASS_HASH_VERSION, CONDITION_READY, LABEL_EC2NODECLASS, LABEL_NODEPOOL,
    TAINT_EFFECT_NO_EXECUTE, TAINT_UNREGISTERED_KEY,
};
use driftwood_api::{EC2NodeClass, NodeClaim, NodeClaimStatus, NodePool};
use driftwood_scheduling::InstanceType;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::AwsSettings;
use super::catalog_cache::BuiltCatalogs;
use super::catalog_fetch::fetch_catalog_data;
use super::claim_view::{
    claim_requests, claim_requirements, instance_tags, node_labels, resource_quantities,
};
use super::class_view::{
    block_devices, class_family, ephemeral_storage_bytes, kubelet_overrides, metadata_options,
    status_amis,
};
use super::cleanup::{CleanupReport, cleanup_node_class};
use super::drift::{
    ClassAmi, ClassDrift, DriftInputs, ProviderDrift, provider_drift, provider_drifts,
};
use super::instance_types::{CatalogData, CatalogOptions, instance_type_labels, type_labels};
use super::launch_pacer::Admission;
use super::launch_plan::{PlanError, plan_launch};
use super::launcher::{
    KnownTemplates, LaunchConfig, LaunchError, instance_id_from_provider_id, launch, provider_id,
};
use super::network::{ZonalSubnet, subnet_per_zone};
use super::node_classes::NodeClassSource;
use super::overhead::allocatable;
use super::price_book::PriceBook;
use super::status::{NodeClassResolution, resolve_node_class};
use super::unavailable::{OfferingKey, UnavailableOfferings};
use super::userdata::{BootstrapInputs, NodeTaint, render_user_data};
use crate::ports::{
    AwsError, DescribeInstancesInput, DescribeSubnetsInput, Ec2Api, Filter, IamApi, Instance,
    LaunchTemplateData, PricingApi, SqsApi, SsmApi, instance_state,
};
use driftwood_cloud::Clock;
use driftwood_cloud::{CloudDrift, CloudError, CloudProvider};

/// The ports the provider talks through.
#[derive(Clone)]
pub struct AwsPorts {
    pub ec2: Arc<dyn Ec2Api>,
    pub ssm: Arc<dyn SsmApi>,
    pub iam: Arc<dyn IamApi>,
    pub pricing: Arc<dyn PricingApi>,
    /// The interruption queue's SQS (used only with `AwsSettings::interruption_queue`).
    pub sqs: Arc<dyn SqsApi>,
}

/// The AWS CloudProvider.
pub struct AwsProvider {
    ports: AwsPorts,
    settings: AwsSettings,
    clock: Arc<dyn Clock>,
    classes: Arc<dyn NodeClassSource>,
    unavailable: Mutex<UnavailableOfferings>,
    /// The raw catalog data, when it was fetched, and the price book's version it is priced at.
    catalog_cache: Mutex<Option<(Timestamp, u64, Arc<CatalogData>)>>,
    /// Held while the catalog is described: concurrent callers wait for that one fetch instead
    /// of each describing the whole catalog again.
    catalog_fetch: tokio::sync::Mutex<()>,
    /// On-demand prices: the built-in table at once, the Pricing API's list when it arrives.
    prices: Arc<PriceBook>,
    /// Launch templates known to exist (not described before every launch).
    known_templates: KnownTemplates,
    /// Each class's subnets as last described (zone, free addresses), by their ids, and when:
    /// reused for a minute (Karpenter's subnet cache) instead of a DescribeSubnets per launch
    /// and per scheduling simulation.
    subnets: Mutex<BTreeMap<Vec<String>, DescribedSubnets>>,
    /// Each class's catalog built from that data.
    built_catalogs: BuiltCatalogs,
    /// This cluster's instances as one DescribeInstances saw them, and when: drift checks read
    /// them instead of describing each NodeClaim's instance (one call per pass, not per node).
    drift_instances: Mutex<Option<(Timestamp, InstancesById)>>,
    /// Each EC2NodeClass's hashes, by name, with the resourceVersion they were computed at.
    class_drift: Mutex<BTreeMap<String, (String, Arc<ClassDrift>)>>,
    /// Failed launches (each CreateFleet error) and terminations, for the metrics.
    failures: Arc<crate::failure_counts::FailureCounts>,
    /// TerminateInstances calls made together go out as one (Karpenter's batcher).
    terminate: Arc<crate::batcher::Batcher<String, Vec<crate::ports::InstanceStateChange>>>,
    /// DescribeInstances by id made together go out as one (Karpenter's batcher).
    describe: Arc<crate::batcher::Batcher<String, Instance>>,
    fleets:
        Arc<crate::batcher::Batcher<crate::ports::CreateFleetInput, crate::batcher::FleetShare>>,
    batcher_metrics: crate::batcher::BatcherMetrics,
    /// Slots for launches once EC2 throttles them (its instance bucket's refill rate).
    launch_pacer: crate::launch_pacer::LaunchPacer,
}

/// The subnet ids in a class's status: the key of its described subnets.
fn class_subnet_ids(class: &EC2NodeClass) -> Vec<String> {
    class
        .status
        .as_ref()
        .map(|s| s.subnets.iter().map(|s| s.id.clone()).collect())
        .unwrap_or_default()
}

/// A class's subnets as described, and when.
type DescribedSubnets = (Timestamp, Arc<Vec<ZonalSubnet>>);

/// Instances by id, shared.
type InstancesById = Arc<BTreeMap<String, Arc<Instance>>>;

/// How many instances one DescribeInstances by `instance-id` filter names (Karpenter's
/// DescribeInstances batcher's maximum batch).
pub const DESCRIBE_BY_ID_AT_ONCE: usize = 500;

/// How long the instances read for drift checks are reused.
pub const DRIFT_INSTANCES_TTL: SignedDuration = SignedDuration::from_secs(15);

/// How long a class's described subnets serve the catalog (Karpenter's subnet cache: 1 min).
pub const SUBNETS_TTL: SignedDuration = SignedDuration::from_secs(60);

/// A drift check for an instance missing from a listing at least this old lists again.
pub const RELIST_AFTER: SignedDuration = SignedDuration::from_secs(5);

/// How long described instance types, offerings and prices are reused.
pub const CATALOG_TTL: SignedDuration = SignedDuration::from_secs(300);

impl AwsProvider {
    /// A provider over `ports` for the cluster in `settings`, reading classes from `classes`.
    pub fn new(
        ports: AwsPorts,
        settings: AwsSettings,
        clock: Arc<dyn Clock>,
        classes: Arc<dyn NodeClassSource>,
    ) -> Self {
        let prices = Arc::new(PriceBook::new(
            ports.pricing.clone(),
            &settings.region,
            clock.clone(),
            settings.isolated_vpc,
        ));
        let batcher_metrics = crate::batcher::BatcherMetrics::default();
        let terminate =
            crate::batcher::terminate_instances(ports.ec2.clone(), batcher_metrics.clone());
        let fleets = crate::batcher::create_fleet(ports.ec2.clone(), batcher_metrics.clone());
        let describe =
            crate::batcher::describe_instances(ports.ec2.clone(), batcher_metrics.clone());
        Self {
            terminate,
            describe,
            fleets,
            batcher_metrics,
            ports,
            settings,
            clock,
            classes,
            unavailable: Mutex::new(UnavailableOfferings::new()),
            catalog_cache: Mutex::new(None),
            catalog_fetch: tokio::sync::Mutex::new(()),
            prices,
            known_templates: KnownTemplates::default(),
            subnets: Mutex::new(BTreeMap::new()),
            built_catalogs: BuiltCatalogs::default(),
            drift_instances: Mutex::new(None),
            class_drift: Mutex::new(BTreeMap::new()),
            failures: Arc::default(),
            launch_pacer: crate::launch_pacer::LaunchPacer::default(),
        }
    }

    /// How many launches wait for their slot (EC2 throttled launches; see
    /// [`crate::launch_pacer`]).
    pub fn launches_waiting(&self) -> usize {
        self.launch_pacer.waiting()
    }

    /// The batchers' window and size histograms (shared: they go on observing).
    pub fn batcher_metrics(&self) -> crate::batcher::BatcherMetrics {
        self.batcher_metrics.clone()
    }

    /// Each class's user data size as last rendered into a template created (shared).
    pub fn user_data_sizes(&self) -> crate::launcher::UserDataSizes {
        self.known_templates.user_data.clone()
    }

    /// The failed launches and terminations counted so far (shared: they go on counting).
    pub fn failure_counts(&self) -> Arc<crate::failure_counts::FailureCounts> {
        self.failures.clone()
    }

    /// Starts what the provider keeps current in the background (the on-demand price list).
    /// Call from within the async runtime.
    pub fn start_background(&self) {
        self.prices.fetch_if_due();
    }

    /// The filters that select this cluster's live instances.
    fn cluster_instance_filters(&self) -> Vec<Filter> {
        vec![
            Filter::new("tag-key", [LABEL_NODEPOOL]),
            Filter::new(
                format!("tag:kubernetes.io/cluster/{}", self.settings.cluster_name),
                ["owned"],
            ),
            Filter::new(
                "instance-state-name",
                [instance_state::PENDING, instance_state::RUNNING],
            ),
        ]
    }

    /// This cluster's live (pending or running) instances, with the filters of `more` besides:
    /// one filtered, paginated DescribeInstances.
    async fn cluster_instances(&self, more: Vec<Filter>) -> Result<Vec<Instance>, AwsError> {
        let mut filters = self.cluster_instance_filters();
        filters.extend(more);
        self.ports
            .ec2
            .describe_instances(DescribeInstancesInput {
                instance_ids: Vec::new(),
                filters,
            })
            .await
    }

    /// The instance `id` for a drift check: from one DescribeInstances of the whole cluster,
    /// reused for [`DRIFT_INSTANCES_TTL`]; an instance not in it (launched since) is described
    /// on its own.
    async fn instance_for_drift(&self, id: &str) -> Result<Arc<Instance>, CloudError> {
        let now = self.clock.now();
        let cached = self
            .drift_instances
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|(at, _)| now.duration_since(*at) < DRIFT_INSTANCES_TTL)
            .map(|(at, instances)| (*at, instances.clone()));
        if let Some((_, instances)) = &cached
            && let Some(instance) = instances.get(id)
        {
            return Ok(instance.clone());
        }
        // Not in a listing younger than RELIST_AFTER: list again, once for every instance
        // launched since (a fleet coming up is one listing, not a Describe per instance).
        let relist = cached
            .as_ref()
            .is_none_or(|(at, _)| now.duration_since(*at) >= RELIST_AFTER);
        if relist {
            let listed = self.cluster_instances(Vec::new()).await?;
            let instances: InstancesById = Arc::new(
                listed
                    .into_iter()
                    .map(|i| (i.instance_id.clone(), Arc::new(i)))
                    .collect(),
            );
            *self
                .drift_instances
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some((now, instances.clone()));
            if let Some(instance) = instances.get(id) {
                return Ok(instance.clone());
            }
        }
        self.describe_instance(id).await.map(Arc::new)
    }

    /// `class`'s side of provider drift (its hashes, and the AMIs, subnets and security
    /// groups its status lists, the AMIs' requirements read), worked out once per
    /// resourceVersion.
    fn class_drift(&self, class: &EC2NodeClass) -> Arc<ClassDrift> {
        let name = class.metadata.name.as_deref().unwrap_or_default();
        let version = class.metadata.resource_version.as_deref();
        let mut cache = self
            .class_drift
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(version) = version
            && let Some((seen, known)) = cache.get(name)
            && seen == version
        {
            return known.clone();
        }
        let no_status = Default::default();
        let status = class.status.as_ref().unwrap_or(&no_status);
        let amis: Vec<ClassAmi> = status
            .amis
            .iter()
            .map(|a| ClassAmi {
                id: a.id.clone(),
                requirements: a.requirements.clone(),
            })
            .collect();
        let known = Arc::new(ClassDrift::new(
            ec2nodeclass_hashes(class, &self.settings.cluster_ca_bundle),
            &amis,
            status.subnets.iter().map(|s| s.id.clone()).collect(),
            status
                .security_groups
                .iter()
                .map(|g| g.id.clone())
                .collect(),
        ));
        if let Some(version) = version {
            cache.insert(name.to_string(), (version.to_string(), known.clone()));
        }
        known
    }

    /// The provider's settings.
    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    /// Resolves `class`'s selectors now and computes the status to write.
    pub async fn resolve_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<NodeClassResolution, AwsError> {
        let p = &self.ports;
        resolve_node_class(
            &*p.ec2,
            &*p.ssm,
            &*p.iam,
            &self.settings,
            class,
            self.clock.now(),
        )
        .await
    }

    /// Deletes the cloud resources of a deleted class (launch templates; the managed instance
    /// profile once no instance uses it).
    pub async fn cleanup_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<CleanupReport, AwsError> {
        let report =
            cleanup_node_class(&*self.ports.ec2, &*self.ports.iam, &self.settings, class).await?;
        if let Some(name) = class.metadata.name.as_deref() {
            self.known_templates.user_data.forget(name);
        }
        Ok(report)
    }

    /// `judge` applied to what provider drift of `claim` is judged on: its stamped hashes,
    /// its instance, and its class's current hashes and status (borrowed, nothing copied).
    async fn judge_drift<R>(
        &self,
        claim: &NodeClaim,
        judge: impl FnOnce(&DriftInputs<'_>) -> R,
    ) -> Result<R, CloudError> {
        let class_name = &claim.spec.node_class_ref.name;
        let class =
            self.classes
                .node_class(class_name)
                .ok_or_else(|| CloudError::NodeClassNotReady {
                    name: class_name.clone(),
                    message: "not found".to_string(),
                })?;
        let id = claim_provider_instance(claim)?;
        let inst = self.instance_for_drift(&id).await?;
        let class = self.class_drift(&class);
        let stamped = |key: &str| {
            claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .map(String::as_str)
        };
        let no_labels = BTreeMap::new();
        Ok(judge(&DriftInputs {
            class: &class,
            current_version: EC2NODECLASS_HASH_VERSION,
            stamped_hash: stamped(ANNOTATION_EC2NODECLASS_HASH),
            stamped_version: stamped(ANNOTATION_EC2NODECLASS_HASH_VERSION),
            stamped_fields: stamped(ANNOTATION_EC2NODECLASS_FIELD_HASHES),
            node_image: &inst.image_id,
            node_subnet: &inst.subnet_id,
            node_security_groups: inst
                .security_groups
                .iter()
                .map(|g| g.group_id.as_str())
                .collect(),
            node_labels: claim.metadata.labels.as_ref().unwrap_or(&no_labels),
        }))
    }

    /// Every provider drift of `claim`, in order (the first is what `is_drifted` reports).
    pub async fn all_drifts(&self, claim: &NodeClaim) -> Result<Vec<ProviderDrift>, CloudError> {
        self.judge_drift(claim, provider_drifts).await
    }

    /// The interruption queue `AwsSettings::interruption_queue` names, over the SQS port; none
    /// when no queue is set (interruption handling is off, as in Karpenter).
    pub fn interruption_queue(&self) -> Option<crate::interruption::InterruptionQueue> {
        self.settings
            .interruption_queue
            .as_deref()
            .filter(|name| !name.is_empty())
            .map(|name| crate::interruption::InterruptionQueue::new(self.ports.sqs.clone(), name))
    }

    /// What reads the instances EC2's status checks and scheduled events report unhealthy
    /// (polled with or without an interruption queue, as Karpenter does).
    pub fn instance_status_reader(
        &self,
    ) -> crate::interruption::instance_status::InstanceStatusReader {
        crate::interruption::instance_status::InstanceStatusReader::new(
            self.ports.ec2.clone(),
            self.clock.clone(),
        )
    }

    /// Offerings currently marked unavailable after capacity errors.
    pub fn unavailable_offerings(&self) -> Vec<OfferingKey> {
        self.unavailable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unavailable_at(self.clock.now())
    }

    fn ready_class(&self, name: &str) -> Result<Arc<EC2NodeClass>, CloudError> {
        let class = self
            .classes
            .node_class(name)
            .ok_or_else(|| CloudError::NodeClassNotReady {
                name: name.to_string(),
                message: "not found".to_string(),
            })?;
        if !class.is_true(CONDITION_READY) {
            let message = class
                .condition(CONDITION_READY)
                .and_then(|c| c.message.clone())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "status has no Ready=True condition yet".to_string());
            return Err(CloudError::NodeClassNotReady {
                name: name.to_string(),
                message,
            });
        }
        Ok(class)
    }

    /// The class's subnets (zones, free addresses): described at most once a minute per set of
    /// subnets; launches take their addresses off the cached counts meanwhile.
    async fn cached_class_subnets(
        &self,
        class: &EC2NodeClass,
    ) -> Result<Arc<Vec<ZonalSubnet>>, CloudError> {
        let ids = class_subnet_ids(class);
        let now = self.clock.now();
        if let Some((at, subnets)) = self
            .subnets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&ids)
            && now >= *at
            && now < *at + SUBNETS_TTL
        {
            return Ok(subnets.clone());
        }
        let subnets = Arc::new(self.class_subnets(class).await?);
        self.subnets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(ids, (now, subnets.clone()));
        Ok(subnets)
    }

    /// One address of `subnet` taken by a launch: the cached count goes down until the next
    /// DescribeSubnets (Karpenter's in-flight IP tracking).
    fn use_address(&self, class: &EC2NodeClass, subnet: &str) {
        let ids = class_subnet_ids(class);
        let mut cache = self.subnets.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, subnets)) = cache.get_mut(&ids) {
            let mut updated = (**subnets).clone();
            for s in updated.iter_mut().filter(|s| s.id == subnet) {
                s.available_ips = s.available_ips.saturating_sub(1);
            }
            *subnets = Arc::new(updated);
        }
    }

    async fn class_subnets(&self, class: &EC2NodeClass) -> Result<Vec<ZonalSubnet>, CloudError> {
        let ids: Vec<String> = class
            .status
            .as_ref()
            .map(|s| s.subnets.iter().map(|s| s.id.clone()).collect())
            .unwrap_or_default();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let described = self
            .ports
            .ec2
            .describe_subnets(DescribeSubnetsInput {
                subnet_ids: Vec::new(),
                filters: vec![Filter::new("subnet-id", ids)],
            })
            .await?;
        Ok(described
            .into_iter()
            .map(|s| ZonalSubnet {
                id: s.subnet_id,
                zone: s.availability_zone,
                zone_id: s.availability_zone_id,
                available_ips: s.available_ip_address_count,
            })
            .collect())
    }

    async fn catalog_for(
        &self,
        class: &EC2NodeClass,
        subnets: &[ZonalSubnet],
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        let data = self.catalog_data().await?;
        let family = class_family(class);
        let devices = block_devices(&class.spec, family).map_err(CloudError::Invalid)?;
        let opts = CatalogOptions {
            zones: subnets
                .iter()
                .map(|s| (s.zone.clone(), s.zone_id.clone()))
                .collect(),
            kubelet: kubelet_overrides(&class.spec),
            ephemeral_storage_bytes: ephemeral_storage_bytes(&devices, &class.spec, family),
            vm_memory_overhead_percent: self.settings.vm_memory_overhead_percent,
            reserved_enis: self.settings.reserved_enis,
            os: family.os().to_string(),
        };
        let now = self.clock.now();
        let unavailable = self
            .unavailable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.built_catalogs
            .get_or_build(
                class.metadata.name.as_deref().unwrap_or_default(),
                &data,
                opts,
                &unavailable,
                now,
            )
            .map_err(|e| CloudError::Invalid(e.to_string()))
    }

    /// The raw catalog data, described again once [`CATALOG_TTL`] has passed, priced at the
    /// price book's current version. One fetch at a time: concurrent callers wait for it.
    async fn catalog_data(&self) -> Result<Arc<CatalogData>, AwsError> {
        if let Some(data) = self.fresh_catalog() {
            return Ok(data);
        }
        let _fetching = self.catalog_fetch.lock().await;
        if let Some(data) = self.fresh_catalog() {
            return Ok(data);
        }
        let now = self.clock.now();
        let prices = self.prices.clone();
        let version = prices.version();
        let fetched = fetch_catalog_data(&*self.ports.ec2, |descriptions| {
            prices.prices(descriptions).0
        })
        .await?;
        let mut cache = self
            .catalog_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Described again but unchanged (no new type, offering or price): the same data, so
        // each class's built catalog and its scheduling form are kept, not built again.
        let data = match cache.as_ref() {
            Some((_, _, kept)) if **kept == fetched => kept.clone(),
            _ => Arc::new(fetched),
        };
        *cache = Some((now, version, data.clone()));
        Ok(data)
    }

    /// The cached catalog data if it is younger than [`CATALOG_TTL`], re-priced (without
    /// describing EC2 again) when the price book moved on since.
    fn fresh_catalog(&self) -> Option<Arc<CatalogData>> {
        let now = self.clock.now();
        let mut cache = self
            .catalog_cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (at, version, data) = cache.as_ref()?;
        if now >= *at + CATALOG_TTL || now < *at {
            return None;
        }
        let current = self.prices.version();
        if *version == current {
            return Some(data.clone());
        }
        let mut repriced = (**data).clone();
        repriced.on_demand_prices = self.prices.prices(&repriced.descriptions).0;
        let repriced = Arc::new(repriced);
        *cache = Some((*at, current, repriced.clone()));
        Some(repriced)
    }

    /// The instance types (with offerings in the class's zones) of a Ready class.
    pub async fn instance_types_for_class(
        &self,
        class_name: &str,
    ) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        let class = self.ready_class(class_name)?;
        let subnets = self.cached_class_subnets(&class).await?;
        self.catalog_for(&class, &subnets).await
    }

    /// The first provider drift of `claim`, typed (the CloudProvider trait reports it as a
    /// reason and message).
    pub async fn provider_drift(
        &self,
        claim: &NodeClaim,
    ) -> Result<Option<ProviderDrift>, CloudError> {
        self.judge_drift(claim, provider_drift)
            .await?
            .map_err(|unknown| CloudError::Unresolved(unknown.to_string()))
    }

    fn mark_offerings_unavailable(&self, offerings: &[OfferingKey], now: Timestamp) {
        let mut cache = self
            .unavailable
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for o in offerings {
            cache.mark(o.clone(), now);
        }
    }

    /// The live instance `instance_id`, described together with the others asked for within
    /// the DescribeInstances batcher's window (registration tags, drift checks of instances
    /// launched since the last listing, `get`: at 5,000 nodes these were a call each, a few a
    /// second).
    async fn describe_instance(&self, instance_id: &str) -> Result<Instance, CloudError> {
        let found = self.describe.add(instance_id.to_string()).await;
        let not_found = || CloudError::NotFound {
            what: "instance".to_string(),
            message: instance_id.to_string(),
        };
        match found {
            Ok(i)
                if i.instance_id == instance_id
                    && i.state != instance_state::TERMINATED
                    && i.state != instance_state::SHUTTING_DOWN =>
            {
                Ok(i)
            }
            Ok(_) => Err(not_found()),
            Err(e) if e.is_not_found() => Err(not_found()),
            Err(e) => Err(e.into()),
        }
    }

    async fn instance_to_claim(&self, inst: &Instance) -> Result<NodeClaim, CloudError> {
        let data = self.catalog_data().await?;
        let types: Vec<_> = data
            .descriptions
            .iter()
            .filter(|d| d.instance_type == inst.instance_type)
            .collect();
        let tag = |k: &str| {
            inst.tags
                .iter()
                .find(|t| t.key == k)
                .map(|t| t.value.clone())
        };
        let type_labels = types
            .iter()
            .find_map(|d| instance_type_labels(d, inst.os()))
            .unwrap_or_default();
        let capacity_type = inst
            .instance_lifecycle
            .clone()
            .unwrap_or_else(|| "on-demand".to_string());
        let mut labels = node_labels(
            &type_labels,
            &inst.availability_zone,
            "",
            &self.settings.region,
            &capacity_type,
        );
        if let Some(pool) = tag(LABEL_NODEPOOL) {
            labels.insert(LABEL_NODEPOOL.to_string(), pool);
        }
        if let Some(class) = tag(LABEL_EC2NODECLASS) {
            labels.insert(LABEL_EC2NODECLASS.to_string(), class);
        }
        let mut claim = NodeClaim::new(
            &tag(crate::claim_view::TAG_NODECLAIM).unwrap_or_default(),
            Default::default(),
        );
        claim.metadata.labels = Some(labels);
        claim.metadata.creation_timestamp = Some(Time(inst.launch_time));
        if let Some(class) = tag(LABEL_EC2NODECLASS) {
            claim.spec.node_class_ref.name = class;
            claim.spec.node_class_ref.kind = "EC2NodeClass".to_string();
            claim.spec.node_class_ref.group = "karpenter.k8s.aws".to_string();
        }
        claim.status = Some(NodeClaimStatus {
            provider_id: Some(provider_id(&inst.availability_zone, &inst.instance_id)),
            image_id: Some(inst.image_id.clone()),
            ..Default::default()
        });
        Ok(claim)
    }
}

fn claim_name(claim: &NodeClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

fn claim_provider_instance(claim: &NodeClaim) -> Result<String, CloudError> {
    let pid = claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap_or_default();
    instance_id_from_provider_id(&pid)
        .map(str::to_string)
        .ok_or_else(|| CloudError::NotFound {
            what: "instance".to_string(),
            message: format!(
                "NodeClaim {:?} has no AWS providerID ({pid:?})",
                claim_name(claim)
            ),
        })
}

#[async_trait]
impl CloudProvider for AwsProvider {
    fn name(&self) -> &str {
        "aws"
    }

    fn repair_policies(&self) -> &'static [driftwood_api::repair::RepairPolicy] {
        crate::repair::REPAIR_POLICIES
    }

    fn mark_unavailable(&self, offering: &OfferingKey, reason: &str) {
        tracing::info!(offering = %offering, reason, "removing offering from offerings");
        self.mark_offerings_unavailable(std::slice::from_ref(offering), self.clock.now());
    }

    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim, CloudError> {
        let now = self.clock.now();
        let name = claim_name(claim);
        if let Admission::WaitUntil(retry_at) = self.launch_pacer.admit(&name, now) {
            return Err(CloudError::Throttled {
                provider: "aws".to_string(),
                message: "EC2 throttled launches; launching at its instance rate, in turn"
                    .to_string(),
                retry_at,
            });
        }
        let class_name = claim.spec.node_class_ref.name.clone();
        let class = self.ready_class(&class_name)?;
        // The class's subnets as last described (a minute at most), with the addresses this
        // provider's launches used since taken off: not a DescribeSubnets per launch, which a
        // fleet coming up would throttle (found with the simulated account's rate limits:
        // 1,000 launches at once spent the Describe bucket on DescribeSubnets alone).
        let subnets = self.cached_class_subnets(&class).await?;
        let catalog = self.catalog_for(&class, &subnets).await?;
        let requests = claim_requests(claim).map_err(CloudError::Invalid)?;
        let requirements = claim_requirements(claim).map_err(CloudError::Invalid)?;
        let amis = status_amis(&class);
        let per_zone = subnet_per_zone(&subnets);
        let plan = plan_launch(&catalog, &requirements, &requests, &amis, &per_zone).map_err(
            |e| match e {
                PlanError::NoCompatibleInstanceType
                | PlanError::NoCompatibleAmi
                | PlanError::NoSubnet => CloudError::InsufficientCapacity {
                    offerings: Vec::new(),
                    message: e.to_string(),
                },
            },
        )?;

        let family = class_family(&class);
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        let nodepool = labels.get(LABEL_NODEPOOL).cloned().unwrap_or_default();
        let mut taints: Vec<NodeTaint> = claim
            .spec
            .taints
            .iter()
            .chain(claim.spec.startup_taints.iter())
            .map(|t| NodeTaint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: t.effect.clone(),
            })
            .collect();
        taints.push(NodeTaint {
            key: TAINT_UNREGISTERED_KEY.to_string(),
            value: String::new(),
            effect: TAINT_EFFECT_NO_EXECUTE.to_string(),
        });
        let kubelet = kubelet_overrides(&class.spec);
        let s = &self.settings;
        let user_data = render_user_data(
            family,
            &BootstrapInputs {
                cluster_name: s.cluster_name.clone(),
                cluster_endpoint: s.cluster_endpoint.clone(),
                cluster_ca_bundle: s.cluster_ca_bundle.clone(),
                cluster_dns_ip: class
                    .spec
                    .kubelet
                    .as_ref()
                    .and_then(|k| k.cluster_dns.first().cloned())
                    .unwrap_or_else(|| s.cluster_dns_ip.clone()),
                cluster_cidr: s.cluster_cidr.clone(),
                labels: labels.clone(),
                taints,
                max_pods: kubelet.max_pods,
                custom: class.spec.user_data.clone(),
            },
        );
        let status = class.status.clone().unwrap_or_default();
        let devices = block_devices(&class.spec, family).map_err(CloudError::Invalid)?;
        let tags = instance_tags(&class.spec.tags, &s.cluster_name, &nodepool, &class_name);
        let config = LaunchConfig {
            cluster_name: s.cluster_name.clone(),
            node_class: class_name.clone(),
            data: LaunchTemplateData {
                image_id: String::new(),
                user_data,
                iam_instance_profile_name: status.instance_profile.clone().unwrap_or_default(),
                security_group_ids: status
                    .security_groups
                    .iter()
                    .map(|g| g.id.clone())
                    .collect(),
                block_device_mappings: devices,
                metadata_options: Some(metadata_options(&class.spec)),
                monitoring_enabled: class.spec.detailed_monitoring.unwrap_or(false),
                associate_public_ip_address: class.spec.associate_public_ip_address,
                tag_specifications: Vec::new(),
            },
            instance_tags: tags,
            context: class.spec.context.clone(),
        };
        let mut fleet_errors = Vec::new();
        let launched = launch(
            &*self.ports.ec2,
            &self.fleets,
            &plan,
            &config,
            &self.known_templates,
            self.clock.now(),
            &mut fleet_errors,
        )
        .await;
        // Every offering CreateFleet refused is a failed launch, by its zone (and the zone's
        // ID, from the class's subnets: the error does not carry it) and Karpenter's reason.
        for error in &fleet_errors {
            let zone = &error.launch_template_and_overrides.availability_zone;
            self.failures
                .launch_failed(crate::failure_counts::LaunchFailure {
                    zone: zone.clone(),
                    zone_id: subnets
                        .iter()
                        .find(|s| &s.zone == zone)
                        .map(|s| s.zone_id.clone())
                        .unwrap_or_default(),
                    capacity_type: plan.capacity_type.clone(),
                    reason: crate::failure_counts::launch_failure_reason(
                        &error.error_code,
                        &error.error_message,
                    ),
                });
        }
        let launched = match launched {
            Ok(l) => l,
            Err(LaunchError::InsufficientCapacity { offerings }) => {
                tracing::warn!(nodeclaim = %claim_name(claim), refused = offerings.len(), "no capacity for any offering");
                self.mark_offerings_unavailable(&offerings, now);
                return Err(CloudError::InsufficientCapacity {
                    offerings,
                    message: "every offered instance type and zone was refused".to_string(),
                });
            }
            Err(LaunchError::Fleet(e)) | Err(LaunchError::Api(e)) if e.is_throttled() => {
                let retry_at = self.launch_pacer.throttled(&name, self.clock.now());
                tracing::debug!(nodeclaim = %name, %retry_at, error = %e, "launch throttled; pacing launches");
                return Err(CloudError::Throttled {
                    provider: "aws".to_string(),
                    message: e.to_string(),
                    retry_at,
                });
            }
            Err(LaunchError::Fleet(e)) | Err(LaunchError::Api(e)) => {
                return Err(e.into());
            }
        };
        self.mark_offerings_unavailable(&launched.refused, now);
        self.use_address(&class, &launched.subnet_id);
        tracing::info!(
            nodeclaim = %claim_name(claim),
            instance = %launched.instance_id,
            instance_type = %launched.instance_type,
            zone = %launched.zone,
            capacity_type = %launched.capacity_type,
            image = %launched.image_id,
            "launched instance"
        );

        let it = catalog.iter().find(|t| t.name == launched.instance_type);
        let zone_id = subnets
            .iter()
            .find(|s| s.zone == launched.zone)
            .map(|s| s.zone_id.clone())
            .unwrap_or_default();
        let mut out = claim.clone();
        let mut out_labels = labels;
        if let Some(it) = it {
            out_labels.extend(node_labels(
                &type_labels(it),
                &launched.zone,
                &zone_id,
                &s.region,
                &launched.capacity_type,
            ));
        }
        out_labels.insert(LABEL_EC2NODECLASS.to_string(), class_name.clone());
        out.metadata.labels = Some(out_labels);
        let hashes = ec2nodeclass_hashes(&class, &s.cluster_ca_bundle);
        let annotations = out.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(
            ANNOTATION_EC2NODECLASS_HASH.to_string(),
            hashes.hash.clone(),
        );
        annotations.insert(
            ANNOTATION_EC2NODECLASS_HASH_VERSION.to_string(),
            EC2NODECLASS_HASH_VERSION.to_string(),
        );
        annotations.insert(
            ANNOTATION_EC2NODECLASS_FIELD_HASHES.to_string(),
            hashes.fields_annotation(),
        );
        let st = out.status.get_or_insert_with(NodeClaimStatus::default);
        st.provider_id = Some(provider_id(&launched.zone, &launched.instance_id));
        st.image_id = Some(launched.image_id.clone());
        if let Some(it) = it {
            // GPUs, Neuron devices, EFA and pod ENIs among them, as Karpenter reports them:
            // the provisioner counts a launched claim's devices before its Node registers them.
            st.capacity = resource_quantities(&it.capacity);
            st.allocatable = resource_quantities(&allocatable(&it.capacity, &it.overhead));
        }
        Ok(out)
    }

    /// TerminateInstances without describing the instance first (as Karpenter): an instance
    /// that was already shutting down or terminated, or that EC2 does not know, is NotFound.
    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudError> {
        let id = claim_provider_instance(claim)?;
        let gone = |previous: &str| {
            previous == instance_state::SHUTTING_DOWN || previous == instance_state::TERMINATED
        };
        match self.terminate.add(id.clone()).await {
            Ok(changes)
                if changes
                    .iter()
                    .any(|c| c.instance_id == id && gone(&c.previous_state)) =>
            {
                Err(CloudError::NotFound {
                    what: "instance".to_string(),
                    message: id,
                })
            }
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Err(CloudError::NotFound {
                what: "instance".to_string(),
                message: id,
            }),
            Err(e) => {
                // Counted by the instance's zone, from its providerID and the claim's zone-ID
                // label (Karpenter reads both from the instance it described first).
                let zone = claim
                    .status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(|p| p.strip_prefix("aws:///"))
                    .and_then(|p| p.split_once('/'))
                    .map(|(zone, _)| zone.to_string())
                    .unwrap_or_default();
                self.failures
                    .termination_failed(crate::failure_counts::TerminationFailure {
                        zone,
                        zone_id: claim
                            .metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(driftwood_api::wellknown::LABEL_TOPOLOGY_ZONE_ID))
                            .cloned()
                            .unwrap_or_default(),
                    });
                Err(e.into())
            }
        }
    }

    /// Karpenter's `nodeclaim.tagging`: the instance as EC2 describes it now (not a cached
    /// listing), then one CreateTags of the registration tags it lacks; none when it has them
    /// all (a tag set by hand is kept).
    async fn tag_instance(&self, claim: &NodeClaim) -> Result<bool, CloudError> {
        let id = claim_provider_instance(claim)?;
        let node_name = claim
            .status
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                CloudError::Invalid(format!(
                    "NodeClaim {:?} has no status.nodeName to tag its instance with",
                    claim_name(claim)
                ))
            })?;
        let instance = self.describe_instance(&id).await?;
        let missing: Vec<crate::ports::Tag> = crate::claim_view::registration_tags(
            &self.settings.cluster_name,
            &claim_name(claim),
            node_name,
        )
        .into_iter()
        .filter(|t| !instance.tags.iter().any(|have| have.key == t.key))
        .collect();
        if missing.is_empty() {
            return Ok(false);
        }
        self.ports
            .ec2
            .create_tags(crate::ports::CreateTagsInput {
                resources: vec![id],
                tags: missing,
            })
            .await
            .map(|()| true)
            .map_err(|e| {
                if e.is_not_found() {
                    CloudError::NotFound {
                        what: "instance".to_string(),
                        message: e.to_string(),
                    }
                } else {
                    e.into()
                }
            })
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudError> {
        let id = instance_id_from_provider_id(provider_id).ok_or_else(|| {
            CloudError::Invalid(format!(
                "providerID {provider_id:?} is not aws:///ZONE/i-..."
            ))
        })?;
        let inst = self.describe_instance(id).await?;
        self.instance_to_claim(&inst).await
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudError> {
        let instances = self.cluster_instances(Vec::new()).await?;
        let mut out = Vec::new();
        for inst in &instances {
            out.push(self.instance_to_claim(inst).await?);
        }
        out.sort_by_key(claim_name);
        Ok(out)
    }

    /// A DescribeInstances filtered to the named instances (an `instance-id` filter, so an
    /// instance gone for good is left out rather than failing the call, as Karpenter's
    /// DescribeInstances batcher asks), [`DESCRIBE_BY_ID_AT_ONCE`] at a time, with no
    /// conversion of each instance to a NodeClaim. Before, termination listed the whole
    /// cluster each second while anything terminated: at 5,000 instances, five pages a second.
    async fn live_among(
        &self,
        provider_ids: &std::collections::BTreeSet<String>,
    ) -> Result<std::collections::BTreeSet<String>, CloudError> {
        let ids: Vec<&str> = provider_ids
            .iter()
            .filter_map(|p| instance_id_from_provider_id(p))
            .collect();
        let mut live = std::collections::BTreeSet::new();
        for chunk in ids.chunks(DESCRIBE_BY_ID_AT_ONCE) {
            let instances = self
                .cluster_instances(vec![Filter::new("instance-id", chunk.iter().copied())])
                .await?;
            live.extend(
                instances
                    .iter()
                    .map(|i| provider_id(&i.availability_zone, &i.instance_id))
                    .filter(|id| provider_ids.contains(id)),
            );
        }
        Ok(live)
    }

    async fn instance_types(
        &self,
        pool: &NodePool,
    ) -> Result<Arc<Vec<driftwood_scheduling::InstanceType>>, CloudError> {
        let class = &pool.spec.template.spec.node_class_ref.name;
        self.instance_types_for_class(class).await
    }

    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<CloudDrift>, CloudError> {
        let drift = self.provider_drift(claim).await?;
        Ok(drift.map(|d| CloudDrift {
            reason: d.reason().to_string(),
            message: d.message(),
        }))
    }
}
