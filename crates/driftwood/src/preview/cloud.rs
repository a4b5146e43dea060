//! The copy's cloud: the live EC2NodeClasses' resolved subnets, security groups and images,
//! and one running instance per live NodeClaim, put into the simulated account with their
//! ids, so that the copy's node class controller resolves each class as the live one did and
//! no node drifts before the change.

use driftwood_api::wellknown::{
    LABEL_ARCH, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_OS,
    LABEL_TOPOLOGY_ZONE,
};
use driftwood_api::{EC2NodeClass, NodeClaim};
use driftwood_aws::ami_family::{Variant, alias_parameters, parse_alias};
use driftwood_aws::claim_view::{instance_tags, registration_tags};
use driftwood_aws::launcher::instance_id_from_provider_id;
use driftwood_aws::ports::{GroupIdentifier, Image, Instance, SecurityGroup, Subnet, Tag};
use driftwood_sim_aws::SimAws;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Node;
use std::collections::{BTreeMap, BTreeSet};

use super::live::LiveCluster;

/// A selector term's tags as the resource's own: a `*` value becomes a concrete one.
fn tags_matching<'a>(terms: impl Iterator<Item = &'a BTreeMap<String, String>>) -> Vec<Tag> {
    let mut tags = BTreeMap::new();
    for term in terms {
        for (key, value) in term {
            let value = if value == "*" { "preview" } else { value };
            tags.insert(key.clone(), value.to_string());
        }
    }
    tags.into_iter().map(|(k, v)| Tag::new(k, v)).collect()
}

/// `amd64` → `x86_64`, as EC2 names architectures.
fn ec2_architecture(arch: &str) -> &str {
    match arch {
        "amd64" => "x86_64",
        other => other,
    }
}

/// An image status's architecture and variant, read from its requirements.
fn image_kind(
    requirements: &[driftwood_api::requirement::NodeSelectorRequirementWithMinValues],
) -> (String, Variant) {
    let arch = requirements
        .iter()
        .find(|r| r.key == LABEL_ARCH && r.operator == "In")
        .and_then(|r| r.values.first().cloned())
        .unwrap_or_else(|| "amd64".to_string());
    let exists = |part: &str| {
        requirements
            .iter()
            .any(|r| r.key.contains(part) && r.operator == "Exists")
    };
    let variant = if exists("gpu") {
        Variant::Nvidia
    } else if exists("accelerator") {
        Variant::Neuron
    } else {
        Variant::Standard
    };
    (arch, variant)
}

/// What the copy of the cloud was built from, for the report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CloudCopy {
    pub subnets: usize,
    pub security_groups: usize,
    pub images: usize,
    pub instances: usize,
    /// SSM parameters set to the image the live class resolved them to.
    pub pinned_parameters: usize,
    /// NodeClaims that could not be copied as instances, with why.
    pub skipped: Vec<String>,
}

/// Parses the live classes (those that do not parse are left out, named in `skipped`).
pub fn classes(live: &LiveCluster, skipped: &mut Vec<String>) -> Vec<EC2NodeClass> {
    live.nodeclasses
        .iter()
        .filter_map(
            |o| match serde_json::to_value(o).and_then(serde_json::from_value) {
                Ok(class) => Some(class),
                Err(error) => {
                    skipped.push(format!(
                        "EC2NodeClass {}: {error}",
                        o.metadata.name.as_deref().unwrap_or_default()
                    ));
                    None
                }
            },
        )
        .collect()
}

/// Puts the live cloud's resources into `aws` (whose own default network is forgotten).
pub fn copy_cloud(aws: &SimAws, live: &LiveCluster, cluster_name: &str) -> CloudCopy {
    let mut copy = CloudCopy::default();
    aws.forget_network();
    let now = aws.now();
    let classes = classes(live, &mut copy.skipped);
    let mut image_archs: BTreeMap<String, String> = BTreeMap::new();
    let mut subnets_by_class: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut groups_by_class: BTreeMap<String, Vec<GroupIdentifier>> = BTreeMap::new();
    for class in &classes {
        let name = class.metadata.name.clone().unwrap_or_default();
        let spec = &class.spec;
        if let Some(role) = &spec.role {
            aws.add_role(role);
        }
        let Some(status) = &class.status else {
            continue;
        };
        let subnet_tags = tags_matching(spec.subnet_selector_terms.iter().map(|t| &t.tags));
        for subnet in &status.subnets {
            aws.import_subnet(Subnet {
                subnet_id: subnet.id.clone(),
                vpc_id: "vpc-preview".to_string(),
                availability_zone: subnet.zone.clone(),
                availability_zone_id: subnet.zone_id.clone().unwrap_or_default(),
                cidr_block: "10.0.0.0/16".to_string(),
                available_ip_address_count: 8_000,
                map_public_ip_on_launch: false,
                tags: subnet_tags.clone(),
            });
            subnets_by_class
                .entry(name.clone())
                .or_default()
                .push((subnet.zone.clone(), subnet.id.clone()));
            copy.subnets += 1;
        }
        let group_tags = tags_matching(spec.security_group_selector_terms.iter().map(|t| &t.tags));
        for group in &status.security_groups {
            let group_name = group.name.clone().unwrap_or_else(|| group.id.clone());
            aws.import_security_group(SecurityGroup {
                group_id: group.id.clone(),
                group_name: group_name.clone(),
                description: group_name.clone(),
                vpc_id: "vpc-preview".to_string(),
                tags: group_tags.clone(),
            });
            groups_by_class
                .entry(name.clone())
                .or_default()
                .push(GroupIdentifier {
                    group_id: group.id.clone(),
                    group_name,
                });
            copy.security_groups += 1;
        }
        let image_tags = tags_matching(spec.ami_selector_terms.iter().map(|t| &t.tags));
        let amazon = spec
            .ami_selector_terms
            .iter()
            .any(|t| t.owner.as_deref() == Some("amazon") || t.alias.is_some());
        let owner = spec
            .ami_selector_terms
            .iter()
            .find_map(|t| {
                t.owner
                    .clone()
                    .filter(|o| o.chars().all(|c| c.is_ascii_digit()))
            })
            .unwrap_or_else(|| aws.config().account_id.clone());
        for ami in &status.amis {
            let (arch, variant) = image_kind(&ami.requirements);
            image_archs.insert(ami.id.clone(), arch.clone());
            aws.import_image(
                Image {
                    image_id: ami.id.clone(),
                    name: ami.name.clone().unwrap_or_else(|| ami.id.clone()),
                    description: String::new(),
                    owner_id: owner.clone(),
                    image_owner_alias: amazon.then(|| "amazon".to_string()),
                    architecture: ec2_architecture(&arch).to_string(),
                    creation_date: driftwood_sim_aws::images::ec2_time(
                        now - SignedDuration::from_hours(24),
                    ),
                    deprecation_time: ami.deprecated.then(|| {
                        driftwood_sim_aws::images::ec2_time(now - SignedDuration::from_hours(1))
                    }),
                    state: "available".to_string(),
                    platform_details: "Linux/UNIX".to_string(),
                    tags: image_tags.clone(),
                },
                Some(live.kubernetes_version.clone()),
            );
            copy.images += 1;
            for term in &spec.ami_selector_terms {
                if let Some(alias) = &term.alias
                    && let Ok((family, version)) = parse_alias(alias)
                {
                    for parameter in alias_parameters(family, &version, &live.kubernetes_version) {
                        if parameter.arch == arch
                            && (parameter.variants.contains(&variant)
                                || parameter.variants.contains(&Variant::Any))
                        {
                            aws.put_parameter(&parameter.path, &ami.id);
                            copy.pinned_parameters += 1;
                        }
                    }
                }
                if let Some(path) = &term.ssm_parameter {
                    aws.put_parameter(path, &ami.id);
                    copy.pinned_parameters += 1;
                }
            }
        }
    }
    let nodes: BTreeMap<&str, &Node> = live
        .nodes
        .iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
        .collect();
    for object in &live.nodeclaims {
        let name = object.metadata.name.clone().unwrap_or_default();
        let claim: NodeClaim = match serde_json::to_value(object).and_then(serde_json::from_value) {
            Ok(claim) => claim,
            Err(error) => {
                copy.skipped.push(format!("NodeClaim {name}: {error}"));
                continue;
            }
        };
        match instance_of(
            &claim,
            &nodes,
            &subnets_by_class,
            &groups_by_class,
            cluster_name,
        ) {
            Ok(instance) => {
                if aws.image(&instance.image_id).is_none() {
                    let arch = claim
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(LABEL_ARCH).cloned())
                        .unwrap_or_else(|| "amd64".to_string());
                    aws.import_image(
                        Image {
                            image_id: instance.image_id.clone(),
                            name: instance.image_id.clone(),
                            owner_id: aws.config().account_id.clone(),
                            architecture: ec2_architecture(&arch).to_string(),
                            creation_date: driftwood_sim_aws::images::ec2_time(
                                now - SignedDuration::from_hours(24 * 30),
                            ),
                            state: "available".to_string(),
                            platform_details: "Linux/UNIX".to_string(),
                            ..Image::default()
                        },
                        Some(live.kubernetes_version.clone()),
                    );
                    copy.images += 1;
                }
                image_archs.entry(instance.image_id.clone()).or_default();
                aws.import_instance(instance, Some(live.kubernetes_version.clone()));
                copy.instances += 1;
            }
            Err(why) => copy.skipped.push(format!("NodeClaim {name}: {why}")),
        }
    }
    copy
}

/// The tags of a live NodeClaim's instance: the launch tags, and once its Node is known, the
/// tags registration adds.
fn copied_tags(
    cluster_name: &str,
    nodepool: &str,
    class: &str,
    nodeclaim: &str,
    node_name: Option<&str>,
) -> Vec<Tag> {
    let mut tags = instance_tags(&BTreeMap::new(), cluster_name, nodepool, class);
    if let Some(node) = node_name {
        let added = registration_tags(cluster_name, nodeclaim, node);
        tags.retain(|t| !added.iter().any(|a| a.key == t.key));
        tags.extend(added);
    }
    tags
}

/// The instance a live NodeClaim runs on, as the cloud would describe it.
fn instance_of(
    claim: &NodeClaim,
    nodes: &BTreeMap<&str, &Node>,
    subnets: &BTreeMap<String, Vec<(String, String)>>,
    groups: &BTreeMap<String, Vec<GroupIdentifier>>,
    cluster_name: &str,
) -> Result<Instance, String> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let status = claim
        .status
        .as_ref()
        .ok_or("it has no status (not launched)")?;
    let provider_id = status
        .provider_id
        .as_deref()
        .ok_or("it has no status.providerID (not launched)")?;
    let instance_id = instance_id_from_provider_id(provider_id).ok_or_else(|| {
        format!("status.providerID {provider_id:?} is not aws:///ZONE/INSTANCE-ID")
    })?;
    let zone = labels
        .get(LABEL_TOPOLOGY_ZONE)
        .cloned()
        .or_else(|| {
            provider_id
                .trim_start_matches("aws:///")
                .split('/')
                .next()
                .map(str::to_string)
        })
        .unwrap_or_default();
    let class = claim.spec.node_class_ref.name.clone();
    let subnet_id = subnets
        .get(&class)
        .and_then(|s| s.iter().find(|(z, _)| *z == zone).or(s.first()))
        .map(|(_, id)| id.clone())
        .unwrap_or_default();
    let node = status.node_name.as_deref().and_then(|n| nodes.get(n));
    let address = |kind: &str| {
        node.and_then(|n| n.status.as_ref())
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == kind))
            .map(|a| a.address.clone())
    };
    let private_ip = address("InternalIP").unwrap_or_default();
    let private_dns = status
        .node_name
        .clone()
        .or_else(|| address("InternalDNS"))
        .unwrap_or_default();
    let launch_time = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
    let nodepool = labels.get(LABEL_NODEPOOL).cloned().unwrap_or_default();
    let arch = labels
        .get(LABEL_ARCH)
        .cloned()
        .unwrap_or_else(|| "amd64".to_string());
    Ok(Instance {
        instance_id: instance_id.to_string(),
        instance_type: labels.get(LABEL_INSTANCE_TYPE).cloned().unwrap_or_default(),
        image_id: status.image_id.clone().unwrap_or_default(),
        availability_zone: zone,
        subnet_id,
        vpc_id: "vpc-preview".to_string(),
        private_ip_address: private_ip,
        private_dns_name: private_dns,
        state: "running".to_string(),
        security_groups: groups.get(&class).cloned().unwrap_or_default(),
        tags: copied_tags(
            cluster_name,
            &nodepool,
            &class,
            &name,
            status.node_name.as_deref(),
        ),
        launch_time,
        instance_lifecycle: (labels.get(LABEL_CAPACITY_TYPE).map(String::as_str) == Some("spot"))
            .then(|| "spot".to_string()),
        architecture: ec2_architecture(&arch).to_string(),
        iam_instance_profile: None,
        platform: (labels.get(LABEL_OS).map(String::as_str) == Some("windows"))
            .then(|| "windows".to_string()),
    })
}

/// The zones the live nodes run in (the copy's account offers capacity there).
pub fn zones(live: &LiveCluster) -> Vec<String> {
    let mut zones: BTreeSet<String> = BTreeSet::new();
    let mut skipped = Vec::new();
    for class in classes(live, &mut skipped) {
        for subnet in class.status.iter().flat_map(|s| s.subnets.iter()) {
            zones.insert(subnet.zone.clone());
        }
    }
    zones.into_iter().collect()
}

/// Images the change names by id that the copy's account does not know: added (named by their
/// id, with the architecture of the class's current images), so the change resolves. Returns
/// what the report says of each.
pub fn add_images_named_by_id(
    aws: &SimAws,
    live: &LiveCluster,
    change: &[EC2NodeClass],
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut skipped = Vec::new();
    let live_classes = classes(live, &mut skipped);
    for class in change {
        let name = class.metadata.name.clone().unwrap_or_default();
        let arch = live_classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.amis.first())
            .map_or_else(|| "amd64".to_string(), |a| image_kind(&a.requirements).0);
        for id in class
            .spec
            .ami_selector_terms
            .iter()
            .filter_map(|t| t.id.as_deref())
        {
            if aws.image(id).is_some() {
                continue;
            }
            aws.import_image(
                Image {
                    image_id: id.to_string(),
                    name: id.to_string(),
                    owner_id: aws.config().account_id.clone(),
                    architecture: ec2_architecture(&arch).to_string(),
                    creation_date: driftwood_sim_aws::images::ec2_time(aws.now()),
                    state: "available".to_string(),
                    platform_details: "Linux/UNIX".to_string(),
                    ..Image::default()
                },
                Some(live.kubernetes_version.clone()),
            );
            notes.push(format!(
                "{id} (named by EC2NodeClass {name}) is taken as an available {arch} image: AWS was not asked"
            ));
        }
    }
    notes
}

/// One `--ami NAME=ID[:ARCH]` override: what NAME resolves to in the copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmiOverride {
    /// An alias (`al2023@v20251120`), an SSM parameter path (`/aws/...`) or an image name.
    pub name: String,
    pub id: String,
    /// `amd64` unless given.
    pub arch: String,
}

impl std::str::FromStr for AmiOverride {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (name, rest) = text
            .split_once('=')
            .ok_or_else(|| format!("--ami {text:?}: want NAME=ID or NAME=ID:ARCH"))?;
        let (id, arch) = rest.split_once(':').unwrap_or((rest, "amd64"));
        if name.is_empty() || !id.starts_with("ami-") {
            return Err(format!(
                "--ami {text:?}: want NAME=ID with an image id (ami-...) after the ="
            ));
        }
        if arch != "amd64" && arch != "arm64" {
            return Err(format!(
                "--ami {text:?}: the architecture {arch:?} is not amd64 or arm64"
            ));
        }
        if name.contains('@') {
            parse_alias(name).map_err(|e| format!("--ami {text:?}: {e}"))?;
        }
        Ok(Self {
            name: name.to_string(),
            id: id.to_string(),
            arch: arch.to_string(),
        })
    }
}

/// Makes the copy resolve each override's name to its id: the image added (named NAME unless
/// NAME is an alias or a parameter), an alias's standard parameter of the architecture or the
/// named SSM parameter set to it. Returns what the report says of each.
pub fn apply_ami_overrides(
    aws: &SimAws,
    kubernetes_version: &str,
    overrides: &[AmiOverride],
) -> Vec<String> {
    let mut notes = Vec::new();
    for o in overrides {
        let alias = o.name.contains('@');
        let parameter = o.name.starts_with('/');
        let image_name = if alias || parameter {
            o.id.clone()
        } else {
            o.name.clone()
        };
        if aws.image(&o.id).is_none() || !(alias || parameter) {
            aws.import_image(
                Image {
                    image_id: o.id.clone(),
                    name: image_name,
                    owner_id: aws.config().account_id.clone(),
                    image_owner_alias: alias.then(|| "amazon".to_string()),
                    architecture: ec2_architecture(&o.arch).to_string(),
                    creation_date: driftwood_sim_aws::images::ec2_time(aws.now()),
                    state: "available".to_string(),
                    platform_details: "Linux/UNIX".to_string(),
                    ..Image::default()
                },
                Some(kubernetes_version.to_string()),
            );
        }
        if parameter {
            aws.put_parameter(&o.name, &o.id);
        }
        if alias && let Ok((family, version)) = parse_alias(&o.name) {
            for p in alias_parameters(family, &version, kubernetes_version) {
                if p.arch == o.arch
                    && (p.variants.contains(&Variant::Standard)
                        || p.variants.contains(&Variant::Any))
                {
                    aws.put_parameter(&p.path, &o.id);
                }
            }
        }
        notes.push(format!(
            "{} resolves to {} ({}), as --ami says",
            o.name, o.id, o.arch
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_sim_aws::SimConfig;
    use kube::api::DynamicObject;
    use std::sync::Arc;

    fn account() -> SimAws {
        let clock = Arc::new(driftwood_cloud::ManualClock::new(
            driftwood_sim_aws::default_start_time(),
        ));
        SimAws::new(SimConfig::new("live", 7).without_realism(), clock)
    }

    fn live_with_alias_class() -> LiveCluster {
        let class: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "role": "NodeRole-live",
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "live"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "*"}}],
            },
            "status": {
                "subnets": [{"id": "subnet-live-a", "zone": "us-east-1a", "zoneID": "use1-az1"}],
                "securityGroups": [{"id": "sg-live", "name": "nodes"}],
                "amis": [
                    {"id": "ami-live-x86", "name": "al2023-x86",
                     "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
                    {"id": "ami-live-arm", "name": "al2023-arm",
                     "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
                ],
            },
        }))
        .unwrap();
        LiveCluster {
            kubernetes_version: "1.31".to_string(),
            nodeclasses: vec![class],
            ..LiveCluster::default()
        }
    }

    #[test]
    fn an_alias_resolves_in_the_copy_to_the_images_the_live_class_resolved() {
        let aws = account();
        let live = live_with_alias_class();
        let copy = copy_cloud(&aws, &live, "live");
        assert_eq!(copy.images, 2);
        assert!(copy.pinned_parameters >= 2, "{copy:?}");
        assert_eq!(
            aws.eks_ami("al2023", "latest", "1.31", "amd64").as_deref(),
            Some("ami-live-x86")
        );
        assert_eq!(
            aws.eks_ami("al2023", "latest", "1.31", "arm64").as_deref(),
            Some("ami-live-arm")
        );
        // Only the live network: its subnet, with tags its selector matches; the role exists.
        let subnets = aws.subnets();
        assert_eq!(subnets.len(), 1);
        assert_eq!(subnets[0].subnet_id, "subnet-live-a");
        assert!(
            subnets[0]
                .tags
                .iter()
                .any(|t| t.key == "karpenter.sh/discovery" && t.value == "live")
        );
        let groups = aws.security_groups();
        assert_eq!(groups.len(), 1);
        assert!(
            groups[0]
                .tags
                .iter()
                .any(|t| t.key == "karpenter.sh/discovery" && t.value == "preview")
        );
    }

    #[test]
    fn ami_overrides_read_name_id_and_architecture() {
        let o: AmiOverride = "al2023@v20251120=ami-0abc:arm64".parse().unwrap();
        assert_eq!(
            (o.name.as_str(), o.id.as_str(), o.arch.as_str()),
            ("al2023@v20251120", "ami-0abc", "arm64")
        );
        let o: AmiOverride = "my-golden-image=ami-0def".parse().unwrap();
        assert_eq!(o.arch, "amd64");
        for bad in [
            "no-equals",
            "x=notanami",
            "x=ami-1:sparc",
            "nofamily@v1=ami-1",
        ] {
            assert!(bad.parse::<AmiOverride>().is_err(), "{bad}");
        }
    }

    #[test]
    fn an_override_makes_an_alias_version_and_a_name_resolve_in_the_copy() {
        let aws = account();
        let notes = apply_ami_overrides(
            &aws,
            "1.31",
            &[
                "al2023@v20991231=ami-0future".parse().unwrap(),
                "golden-2026-11=ami-0golden".parse().unwrap(),
            ],
        );
        assert_eq!(notes.len(), 2);
        assert_eq!(
            aws.eks_ami("al2023", "v20991231", "1.31", "amd64")
                .as_deref(),
            Some("ami-0future")
        );
        assert_eq!(
            aws.image_id_by_name("golden-2026-11").as_deref(),
            Some("ami-0golden")
        );
    }
}
