//! Executes a launch plan: one launch template per AMI (named from a hash of its data, reused
//! when present), then CreateFleet (instant) with every planned override, through the
//! CreateFleet batcher (identical launches made together are one fleet); capacity errors in the
//! response mark offerings unavailable.

use std::collections::BTreeMap;

use std::sync::Arc;

use super::batcher::{Batcher, FleetShare};
use super::fnv::fnv1a64;
use super::launch_plan::LaunchPlan;
use super::unavailable::OfferingKey;
use crate::ports::{
    AwsError, CreateFleetError, CreateFleetInput, CreateFleetOutput, CreateLaunchTemplateInput,
    DescribeLaunchTemplatesInput, Ec2Api, FleetLaunchTemplateConfig, FleetOverride,
    LaunchTemplateData, Tag, TagSpecification, codes, is_insufficient_capacity_code,
};

/// Launch-template data shared by every AMI group; the image id is filled in per group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchConfig {
    pub cluster_name: String,
    pub node_class: String,
    /// Template data without `image_id`.
    pub data: LaunchTemplateData,
    /// Tags on the instances and volumes.
    pub instance_tags: Vec<Tag>,
    pub context: Option<String>,
}

/// The deterministic name of the launch template for `data`: `karpenter.k8s.aws/<hash>`.
pub fn launch_template_name(cluster: &str, data: &LaunchTemplateData) -> String {
    let hash = fnv1a64(format!("{cluster}\n{data:?}").as_bytes());
    format!("karpenter.k8s.aws/{hash}")
}

/// The instance the fleet launched.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetLaunch {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub subnet_id: String,
    pub capacity_type: String,
    pub image_id: String,
    pub price: f64,
    /// Offerings the fleet refused for lack of capacity (to mark unavailable).
    pub refused: Vec<OfferingKey>,
}

/// Why the fleet launched nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LaunchError {
    #[error("insufficient capacity for {}", offerings.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    InsufficientCapacity { offerings: Vec<OfferingKey> },
    #[error("CreateFleet failed: {0}")]
    Fleet(AwsError),
    #[error(transparent)]
    Api(#[from] AwsError),
}

/// How long a launch template seen or created is taken to exist without describing it again.
/// One deleted behind this (by hand, or a class cleanup) is recreated when CreateFleet reports
/// it missing ([`relaunch`]), so the cache costs no failed launch.
pub const KNOWN_TEMPLATE_TTL: jiff::SignedDuration = jiff::SignedDuration::from_mins(5);

/// The launch templates known to exist, by name, and when that was last confirmed: a launch
/// then costs one CreateFleet instead of a DescribeLaunchTemplates and a CreateFleet. One
/// launch at a time makes sure of a template not known (Karpenter holds its launch-template
/// provider's lock for it): the launches of a wave that need a new template wait for the first
/// to create it, instead of each describing and creating it at once (a thousand
/// DescribeLaunchTemplates at once are throttled).
#[derive(Debug, Default)]
pub struct KnownTemplates {
    confirmed: std::sync::Mutex<BTreeMap<String, jiff::Timestamp>>,
    ensuring: tokio::sync::Mutex<()>,
    /// The size of each class's user data as last rendered into a template created.
    pub user_data: UserDataSizes,
}

/// EC2's limit on a launch template's user data (decoded), in bytes.
pub const USER_DATA_MAX_BYTES: usize = 16_384;

/// The size in bytes of each EC2NodeClass's user data as rendered into the last launch template
/// made sure of for it, and forgotten when the class is deleted (Karpenter's
/// `karpenter_ec2nodeclasses_userdata_bytes`; Karpenter measures on its create path only, and
/// re-creates its templates when their cache entry expires, so there too the gauge follows the
/// templates in use).
#[derive(Debug, Default, Clone)]
pub struct UserDataSizes(Arc<std::sync::Mutex<BTreeMap<String, usize>>>);

impl UserDataSizes {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, usize>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes `node_class`'s user data as about to be sent to CreateLaunchTemplate, warning
    /// when it nears EC2's limit (at 90% of it, as Karpenter warns).
    pub fn record(&self, node_class: &str, user_data: &str) {
        let bytes = user_data.len();
        if bytes >= USER_DATA_MAX_BYTES * 9 / 10 {
            tracing::info!(
                ec2nodeclass = node_class,
                userdata_bytes = bytes,
                warn_threshold = USER_DATA_MAX_BYTES * 9 / 10,
                limit = USER_DATA_MAX_BYTES,
                "rendered user data is approaching the EC2 user data size limit"
            );
        }
        self.lock().insert(node_class.to_string(), bytes);
    }

    /// Forgets a deleted class.
    pub fn forget(&self, node_class: &str) {
        self.lock().remove(node_class);
    }

    /// Every class's size, by name.
    pub fn sizes(&self) -> Vec<(String, usize)> {
        self.lock().iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

impl KnownTemplates {
    fn fresh(&self, name: &str, now: jiff::Timestamp) -> bool {
        self.confirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            // A confirmation later than `now` (made by a launch that started after this one,
            // while this one waited its turn) is fresh too.
            .is_some_and(|at| now < *at + KNOWN_TEMPLATE_TTL)
    }

    fn confirm(&self, name: &str, now: jiff::Timestamp) {
        self.confirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_string(), now);
    }

    fn forget(&self, names: impl IntoIterator<Item = String>) {
        let mut known = self
            .confirmed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for name in names {
            known.remove(&name);
        }
    }
}

/// Makes sure a launch template with `name` and `data` exists; `creating` is told before one
/// is created.
pub async fn ensure_launch_template(
    ec2: &dyn Ec2Api,
    name: &str,
    data: &LaunchTemplateData,
    tags: &[Tag],
    creating: impl FnOnce(),
) -> Result<(), AwsError> {
    let described = ec2
        .describe_launch_templates(DescribeLaunchTemplatesInput {
            launch_template_names: vec![name.to_string()],
            filters: Vec::new(),
        })
        .await;
    match described {
        Ok(found) if !found.is_empty() => return Ok(()),
        Ok(_) => {}
        Err(e) if e.code == codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND => {}
        Err(e) => return Err(e),
    }
    creating();
    let created = ec2
        .create_launch_template(CreateLaunchTemplateInput {
            launch_template_name: name.to_string(),
            launch_template_data: data.clone(),
            tag_specifications: vec![TagSpecification {
                resource_type: "launch-template".to_string(),
                tags: tags.to_vec(),
            }],
        })
        .await;
    match created {
        Ok(_) => Ok(()),
        Err(e) if e.code == codes::LAUNCH_TEMPLATE_NAME_ALREADY_EXISTS => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether a fleet launched nothing because a launch template was gone.
fn launch_template_missing(out: &CreateFleetOutput) -> bool {
    out.instances.iter().all(|i| i.instance_ids.is_empty())
        && out
            .errors
            .iter()
            .any(|e| e.error_code == codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND)
}

/// Makes sure the template `name` exists unless `known` confirmed it lately: one launch at a
/// time, and a launch that waited its turn finds it confirmed by the one before.
async fn make_sure_of_template(
    ec2: &dyn Ec2Api,
    known: &KnownTemplates,
    name: &str,
    data: &LaunchTemplateData,
    tags: &[Tag],
    now: jiff::Timestamp,
) -> Result<(), AwsError> {
    if known.fresh(name, now) {
        return Ok(());
    }
    let _one_at_a_time = known.ensuring.lock().await;
    if !known.fresh(name, now) {
        // The template's class, as its own tag names it.
        let class = tags
            .iter()
            .find(|t| t.key == driftwood_api::wellknown::LABEL_EC2NODECLASS);
        let record = || {
            if let Some(class) = class {
                known.user_data.record(&class.value, &data.user_data);
            }
        };
        let created = std::sync::atomic::AtomicBool::new(false);
        ensure_launch_template(ec2, name, data, tags, || {
            created.store(true, std::sync::atomic::Ordering::Relaxed);
            record();
        })
        .await?;
        // A template found holds this user data too (its name is a hash of its data): after a
        // restart the class is measured without creating anything.
        if !created.load(std::sync::atomic::Ordering::Relaxed) {
            record();
        }
        known.confirm(name, now);
    }
    Ok(())
}

/// A launch template vanished between its check and the fleet (deleted by hand, or by a class
/// cleanup racing the launch): create the templates again and retry the fleet once. The
/// launches of one batch all find it missing; the first recreates it, the others find it
/// confirmed.
async fn relaunch(
    ec2: &dyn Ec2Api,
    fleets: &Arc<Batcher<CreateFleetInput, FleetShare>>,
    known: &KnownTemplates,
    now: jiff::Timestamp,
    input: CreateFleetInput,
    templates: &[(String, LaunchTemplateData)],
    tags: &[Tag],
) -> Result<FleetShare, AwsError> {
    tracing::info!(
        templates = templates.len(),
        "launch template not found by CreateFleet; recreating it and retrying once"
    );
    for (name, data) in templates {
        make_sure_of_template(ec2, known, name, data, tags, now).await?;
    }
    fleets.add(input).await
}

/// Launches one instance for `plan` through `fleets` (the CreateFleet batcher over `ec2`);
/// templates in `known` (confirmed at `now`) are not described again. `fleet_errors` receives
/// the errors of the CreateFleet call that answered (one per offering refused, whether or not
/// another launched) when this launch is the one of its call that counts them.
pub async fn launch(
    ec2: &dyn Ec2Api,
    fleets: &Arc<Batcher<CreateFleetInput, FleetShare>>,
    plan: &LaunchPlan,
    config: &LaunchConfig,
    known: &KnownTemplates,
    now: jiff::Timestamp,
    fleet_errors: &mut Vec<CreateFleetError>,
) -> Result<FleetLaunch, LaunchError> {
    let lt_tags = vec![
        Tag::new("karpenter.k8s.aws/cluster", &config.cluster_name),
        Tag::new("karpenter.k8s.aws/ec2nodeclass", &config.node_class),
    ];
    let mut configs = Vec::new();
    let mut templates: Vec<(String, LaunchTemplateData)> = Vec::new();
    let mut image_by_template: BTreeMap<String, String> = BTreeMap::new();
    let mut prices: BTreeMap<(String, String), f64> = BTreeMap::new();
    for group in &plan.groups {
        let data = LaunchTemplateData {
            image_id: group.ami.id.clone(),
            ..config.data.clone()
        };
        let name = launch_template_name(&config.cluster_name, &data);
        make_sure_of_template(ec2, known, &name, &data, &lt_tags, now).await?;
        templates.push((name.clone(), data));
        image_by_template.insert(name.clone(), group.ami.id.clone());
        for o in &group.overrides {
            prices.insert((o.instance_type.clone(), o.zone.clone()), o.price);
        }
        configs.push(FleetLaunchTemplateConfig {
            launch_template_name: name,
            version: "$Latest".to_string(),
            overrides: group
                .overrides
                .iter()
                .map(|o| FleetOverride {
                    instance_type: o.instance_type.clone(),
                    subnet_id: o.subnet_id.clone(),
                    availability_zone: o.zone.clone(),
                    image_id: None,
                    priority: Some(o.price),
                })
                .collect(),
        });
    }
    let spot = plan.capacity_type == "spot";
    let tag_specs = ["instance", "volume", "fleet"]
        .into_iter()
        .map(|rt| TagSpecification {
            resource_type: rt.to_string(),
            tags: config.instance_tags.clone(),
        })
        .collect();
    let input = CreateFleetInput {
        type_: "instant".to_string(),
        launch_template_configs: configs,
        total_target_capacity: 1,
        default_target_capacity_type: plan.capacity_type.clone(),
        spot_allocation_strategy: spot.then(|| "price-capacity-optimized".to_string()),
        on_demand_allocation_strategy: (!spot).then(|| "lowest-price".to_string()),
        tag_specifications: tag_specs,
        context: config.context.clone(),
    };
    let missing = match fleets.add(input.clone()).await {
        Ok(share) if !launch_template_missing(&share.output) => Ok(share),
        Ok(_) => Err(input),
        Err(e) if e.code == codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND => Err(input),
        Err(e) => return Err(e.into()),
    };
    let share = match missing {
        Ok(share) => share,
        Err(input) => {
            known.forget(templates.iter().map(|(name, _)| name.clone()));
            relaunch(ec2, fleets, known, now, input, &templates, &lt_tags).await?
        }
    };
    let out = share.output;
    if share.counts_errors {
        fleet_errors.clone_from(&out.errors);
    }
    let refused: Vec<OfferingKey> = out
        .errors
        .iter()
        .filter(|e| is_insufficient_capacity_code(&e.error_code))
        .map(|e| {
            let lifecycle = if e.lifecycle.is_empty() {
                plan.capacity_type.as_str()
            } else {
                e.lifecycle.as_str()
            };
            let o = &e.launch_template_and_overrides;
            OfferingKey::new(&o.instance_type, &o.availability_zone, lifecycle)
        })
        .collect();
    let launched = out
        .instances
        .iter()
        .find_map(|i| i.instance_ids.first().map(|id| (i, id)));
    let Some((inst, id)) = launched else {
        if !refused.is_empty() {
            return Err(LaunchError::InsufficientCapacity { offerings: refused });
        }
        let first = out.errors.first();
        return Err(LaunchError::Fleet(AwsError::new(
            first
                .map(|e| e.error_code.clone())
                .unwrap_or_else(|| codes::INTERNAL_ERROR.to_string()),
            first
                .map(|e| e.error_message.clone())
                .unwrap_or_else(|| "fleet launched no instance".to_string()),
        )));
    };
    let o = &inst.launch_template_and_overrides;
    let image_id = plan
        .groups
        .iter()
        .find(|g| {
            g.overrides
                .iter()
                .any(|p| p.instance_type == inst.instance_type && p.zone == o.availability_zone)
        })
        .map(|g| g.ami.id.clone())
        .unwrap_or_default();
    let capacity_type = if inst.lifecycle.is_empty() {
        plan.capacity_type.clone()
    } else {
        inst.lifecycle.clone()
    };
    Ok(FleetLaunch {
        instance_id: id.clone(),
        instance_type: inst.instance_type.clone(),
        zone: o.availability_zone.clone(),
        subnet_id: o.subnet_id.clone(),
        capacity_type,
        image_id,
        price: prices
            .get(&(inst.instance_type.clone(), o.availability_zone.clone()))
            .copied()
            .unwrap_or_default(),
        refused,
    })
}

/// The provider ID of an instance: `aws:///ZONE/INSTANCE-ID`.
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

/// The instance ID in a provider ID (`aws:///us-west-2a/i-0123...` → `i-0123...`).
pub fn instance_id_from_provider_id(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix("aws://")?;
    let id = rest.rsplit('/').next()?;
    id.starts_with("i-").then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_round_trip() {
        let p = provider_id("us-west-2a", "i-0123456789abcdef0");
        assert_eq!(p, "aws:///us-west-2a/i-0123456789abcdef0");
        assert_eq!(
            instance_id_from_provider_id(&p),
            Some("i-0123456789abcdef0")
        );
        assert_eq!(instance_id_from_provider_id("kwok://x"), None);
        assert_eq!(instance_id_from_provider_id("aws:///us-west-2a/"), None);
    }

    #[test]
    fn template_name_depends_on_data() {
        let a = LaunchTemplateData {
            image_id: "ami-1".to_string(),
            ..Default::default()
        };
        let b = LaunchTemplateData {
            image_id: "ami-2".to_string(),
            ..Default::default()
        };
        assert_eq!(
            launch_template_name("c", &a),
            launch_template_name("c", &a.clone())
        );
        assert_ne!(launch_template_name("c", &a), launch_template_name("c", &b));
        assert!(launch_template_name("c", &a).starts_with("karpenter.k8s.aws/"));
    }
}
