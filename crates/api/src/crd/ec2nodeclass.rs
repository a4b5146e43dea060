//! The schema rules of the karpenter.k8s.aws EC2NodeClass CRD.

use super::common::condition_rules;
use super::schema::Schema;
use crate::ec2nodeclass::{ALIAS_FAMILIES, AMI_FAMILIES};
use crate::ec2nodeclass_options::{
    INTERFACE_TYPES, MAX_NETWORK_INTERFACES, NESTED_VIRTUALIZATION_VALUES,
    TCP_ESTABLISHED_TIMEOUT_RANGE, UDP_STREAM_TIMEOUT_RANGE, UDP_TIMEOUT_RANGE,
};
use crate::validation::rules;
use serde_json::json;

pub(super) fn ec2nodeclass_rules(s: &mut Schema) -> Result<(), String> {
    s.cel(
        "spec",
        "has(self.role) != has(self.instanceProfile)",
        "must specify exactly one of ['role', 'instanceProfile']",
    )?;
    for field in [
        "amiSelectorTerms",
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
    ] {
        s.require("spec", field)?;
    }
    s.cel("spec.role", "self != ''", "role may not be empty")?;
    s.cel(
        "spec.instanceProfile",
        "self != ''",
        "instanceProfile may not be empty",
    )?;
    ami_term_rules(s)?;
    s.enumeration("spec.amiFamily", AMI_FAMILIES)?;
    // An explicit amiFamily next to an alias is the alias's family or Custom.
    for (alias, family) in ALIAS_FAMILIES {
        s.cel(
            "spec",
            &format!("!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == '{alias}') ? (self.amiFamily == 'Custom' || self.amiFamily == '{family}') : true)"),
            &format!("if set, amiFamily must be '{family}' or 'Custom' when using an {family} alias"),
        )?;
    }
    subnet_and_security_group_term_rules(s)?;
    tag_rules(s)?;
    block_device_rules(s)?;
    kubelet_rules(s)?;
    s.enumeration("spec.instanceStorePolicy", rules::INSTANCE_STORE_POLICIES)?;
    let md = "spec.metadataOptions";
    s.set(
        md,
        "default",
        json!({"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1, "httpTokens": "required"}),
    )?;
    s.enumeration(&format!("{md}.httpEndpoint"), rules::HTTP_ENDPOINT_VALUES)?;
    s.enumeration(
        &format!("{md}.httpProtocolIPv6"),
        rules::HTTP_ENDPOINT_VALUES,
    )?;
    s.enumeration(&format!("{md}.httpTokens"), rules::HTTP_TOKENS_VALUES)?;
    s.set(
        &format!("{md}.httpPutResponseHopLimit"),
        "minimum",
        json!(rules::HOP_LIMIT_RANGE.0),
    )?;
    s.set(
        &format!("{md}.httpPutResponseHopLimit"),
        "maximum",
        json!(rules::HOP_LIMIT_RANGE.1),
    )?;
    capacity_reservation_rules(s)?;
    launch_option_rules(s)?;
    condition_rules(s, "status.conditions", false)?;
    s.require("status.amis.[]", "requirements")?;
    s.set(
        "status.amis.[].requirements.[].values",
        "x-kubernetes-list-type",
        json!("atomic"),
    )
}

/// AMI selector terms: at least one field per term; `id` and `alias` each exclude the other
/// fields; an alias term is the only term; alias `family@version` with a known family (and
/// `latest` for Windows). The list rules are Karpenter's (they judge the list as a whole).
fn ami_term_rules(s: &mut Schema) -> Result<(), String> {
    let ami = "spec.amiSelectorTerms";
    s.set(ami, "minItems", json!(1))?;
    s.set(ami, "maxItems", json!(rules::MAX_SELECTOR_TERMS))?;
    s.cel(
        ami,
        "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))",
        "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
    )?;
    s.cel(
        ami,
        "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
    )?;
    s.cel(
        ami,
        "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))",
        "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",
    )?;
    s.cel(
        ami,
        "!(self.exists(x, has(x.alias)) && self.size() != 1)",
        "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
    )?;
    let alias = format!("{ami}.[].alias");
    s.set(&alias, "maxLength", json!(30))?;
    s.cel(
        &alias,
        &format!("self.matches('{}')", rules::ALIAS_PATTERN),
        "'alias' must be family@version, e.g. al2023@latest",
    )?;
    s.cel(
        &alias,
        "self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']",
        "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",
    )?;
    s.cel(
        &alias,
        "self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true",
        "windows families may only specify version 'latest'",
    )?;
    s.pattern(&format!("{ami}.[].id"), rules::AMI_ID_PATTERN)?;
    selector_tags_rules(s, &format!("{ami}.[].tags"))
}

/// Subnet and security group selector terms: not empty, at least one field per term, `id`
/// (and for security groups `name`) exclusive, as Karpenter's list rules state it.
fn subnet_and_security_group_term_rules(s: &mut Schema) -> Result<(), String> {
    let subnets = "spec.subnetSelectorTerms";
    s.set(subnets, "maxItems", json!(rules::MAX_SELECTOR_TERMS))?;
    s.cel(
        subnets,
        "self.size() != 0",
        "subnetSelectorTerms may not be empty",
    )?;
    s.cel(
        subnets,
        "self.all(x, has(x.tags) || has(x.id))",
        "expected at least one, got none, ['tags', 'id']",
    )?;
    s.cel(
        subnets,
        "!self.all(x, has(x.id) && has(x.tags))",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
    )?;
    s.pattern(&format!("{subnets}.[].id"), rules::SUBNET_ID_PATTERN)?;
    selector_tags_rules(s, &format!("{subnets}.[].tags"))?;

    let groups = "spec.securityGroupSelectorTerms";
    s.set(groups, "maxItems", json!(rules::MAX_SELECTOR_TERMS))?;
    s.cel(
        groups,
        "self.size() != 0",
        "securityGroupSelectorTerms may not be empty",
    )?;
    s.cel(
        groups,
        "self.all(x, has(x.tags) || has(x.id) || has(x.name))",
        "expected at least one, got none, ['tags', 'id', 'name']",
    )?;
    s.cel(
        groups,
        "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))",
        "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
    )?;
    s.cel(
        groups,
        "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))",
        "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
    )?;
    s.pattern(&format!("{groups}.[].id"), rules::SECURITY_GROUP_ID_PATTERN)?;
    selector_tags_rules(s, &format!("{groups}.[].tags"))
}

/// A selector term's tags: at most 20, no empty key or value.
fn selector_tags_rules(s: &mut Schema, path: &str) -> Result<(), String> {
    s.set(path, "maxProperties", json!(rules::MAX_SELECTOR_TAGS))?;
    s.cel(
        path,
        "self.all(k, k != '' && self[k] != '')",
        "empty tag keys or values aren't supported",
    )
}

/// The class's own tags: no empty key, none of the keys driftwood (and Karpenter) set.
fn tag_rules(s: &mut Schema) -> Result<(), String> {
    s.cel(
        "spec.tags",
        "self.all(k, k != '')",
        "empty tag keys aren't supported",
    )?;
    for (rule, key) in [
        (
            "self.all(k, k !='eks:eks-cluster-name')",
            "eks:eks-cluster-name",
        ),
        (
            "self.all(k, !k.startsWith('kubernetes.io/cluster') )",
            "kubernetes.io/cluster",
        ),
        (
            "self.all(k, k != 'karpenter.sh/nodepool')",
            "karpenter.sh/nodepool",
        ),
        (
            "self.all(k, k !='karpenter.sh/nodeclaim')",
            "karpenter.sh/nodeclaim",
        ),
        (
            "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')",
            "karpenter.k8s.aws/ec2nodeclass",
        ),
    ] {
        s.cel(
            "spec.tags",
            rule,
            &format!("tag contains a restricted tag matching {key}"),
        )?;
    }
    Ok(())
}

/// Block devices: at most one root volume; an EBS volume needs a size or a snapshot, and an
/// initialization rate (100-300 MiB/s) needs a snapshot.
fn block_device_rules(s: &mut Schema) -> Result<(), String> {
    let bdm = "spec.blockDeviceMappings";
    s.set(bdm, "maxItems", json!(rules::MAX_BLOCK_DEVICE_MAPPINGS))?;
    s.cel(
        bdm,
        "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1",
        "must have only one blockDeviceMappings with rootVolume",
    )?;
    let ebs = format!("{bdm}.[].ebs");
    s.cel(
        &ebs,
        "has(self.snapshotID) || has(self.volumeSize)",
        "ebs must specify at least one of ['volumeSize', 'snapshotID']",
    )?;
    s.cel(
        &ebs,
        "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')",
        "volumeInitializationRate needs snapshotID",
    )?;
    s.range(
        &format!("{ebs}.volumeInitializationRate"),
        rules::VOLUME_INITIALIZATION_RATE_RANGE,
    )?;
    s.enumeration(&format!("{ebs}.volumeType"), rules::VOLUME_TYPES)?;
    s.pattern(&format!("{ebs}.volumeSize"), rules::QUANTITY_PATTERN)
}

/// Kubelet settings: eviction signals and reserved resources by name, values as
/// percentages or quantities, soft evictions paired with grace periods, image GC thresholds.
fn kubelet_rules(s: &mut Schema) -> Result<(), String> {
    let kubelet = "spec.kubelet";
    s.cel(
        kubelet,
        "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true",
        "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
    )?;
    s.cel(
        kubelet,
        "has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true",
        "every evictionSoft signal needs an evictionSoftGracePeriod",
    )?;
    s.cel(
        kubelet,
        "has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true",
        "every evictionSoftGracePeriod signal needs an evictionSoft threshold",
    )?;
    let signals = rules::EVICTION_SIGNALS
        .iter()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(",");
    for map in ["evictionHard", "evictionSoft", "evictionSoftGracePeriod"] {
        s.cel(
            &format!("{kubelet}.{map}"),
            &format!("self.all(x, x in [{signals}])"),
            &format!("valid keys for {map} are [{signals}]"),
        )?;
    }
    for map in ["evictionHard", "evictionSoft"] {
        s.pattern(
            &format!("{kubelet}.{map}.{{}}"),
            rules::EVICTION_THRESHOLD_PATTERN,
        )?;
    }
    for map in ["kubeReserved", "systemReserved"] {
        let path = format!("{kubelet}.{map}");
        s.cel(
            &path,
            "self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')",
            &format!("valid keys for {map} are ['cpu','memory','ephemeral-storage','pid']"),
        )?;
        s.cel(
            &path,
            "self.all(x, !self[x].startsWith('-'))",
            &format!("{map} value cannot be a negative resource quantity"),
        )?;
        s.pattern(&format!("{path}.{{}}"), rules::QUANTITY_PATTERN)?;
    }
    for field in ["imageGCHighThresholdPercent", "imageGCLowThresholdPercent"] {
        s.range(&format!("{kubelet}.{field}"), (0, 100))?;
    }
    for field in ["maxPods", "podsPerCore"] {
        s.set(&format!("{kubelet}.{field}"), "minimum", json!(0))?;
    }
    Ok(())
}

/// Capacity reservation selector terms and the reservations they resolve to (status).
fn capacity_reservation_rules(s: &mut Schema) -> Result<(), String> {
    let terms = "spec.capacityReservationSelectorTerms";
    s.set(terms, "maxItems", json!(rules::MAX_SELECTOR_TERMS))?;
    s.cel(
        terms,
        "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))",
        "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
    )?;
    s.cel(
        terms,
        "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))",
        "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",
    )?;
    s.pattern(
        &format!("{terms}.[].id"),
        rules::CAPACITY_RESERVATION_ID_PATTERN,
    )?;
    s.pattern(&format!("{terms}.[].ownerID"), rules::ACCOUNT_ID_PATTERN)?;
    s.enumeration(
        &format!("{terms}.[].instanceMatchCriteria"),
        rules::INSTANCE_MATCH_CRITERIA,
    )?;
    s.set(&format!("{terms}.[].tags"), "maxProperties", json!(20))?;
    s.cel(
        &format!("{terms}.[].tags"),
        "self.all(k, k != '' && self[k] != '')",
        "empty tag keys or values aren't supported",
    )?;
    let status = "status.capacityReservations.[]";
    s.pattern(
        &format!("{status}.id"),
        rules::CAPACITY_RESERVATION_ID_PATTERN,
    )?;
    s.pattern(&format!("{status}.ownerID"), rules::ACCOUNT_ID_PATTERN)?;
    s.enumeration(
        &format!("{status}.instanceMatchCriteria"),
        rules::INSTANCE_MATCH_CRITERIA,
    )?;
    s.enumeration(
        &format!("{status}.reservationType"),
        rules::RESERVATION_TYPES,
    )?;
    s.enumeration(&format!("{status}.state"), rules::RESERVATION_STATES)
}

/// Network interfaces, placement group, connection tracking, CPU options, IP prefixes.
fn launch_option_rules(s: &mut Schema) -> Result<(), String> {
    let nics = "spec.networkInterfaces";
    s.set(nics, "maxItems", json!(MAX_NETWORK_INTERFACES))?;
    s.cel(
        nics,
        "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')",
        "networkInterfaces must include the primary interface (networkCardIndex 0, deviceIndex 0, interfaceType 'interface')",
    )?;
    s.cel(
        nics,
        "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))",
        "networkInterfaces may not repeat a (networkCardIndex, deviceIndex) pair, and a network card may have at most one 'efa-only' interface",
    )?;
    s.set(&format!("{nics}.[].networkCardIndex"), "minimum", json!(0))?;
    s.set(&format!("{nics}.[].deviceIndex"), "minimum", json!(0))?;
    s.enumeration(&format!("{nics}.[].interfaceType"), INTERFACE_TYPES)?;

    let placement = "spec.placementGroupSelector";
    s.cel(
        placement,
        "has(self.name) || has(self.id)",
        "expected at least one, got none, ['name', 'id']",
    )?;
    s.cel(
        placement,
        "!(has(self.name) && has(self.id))",
        "'name' and 'id' are mutually exclusive",
    )?;
    s.pattern(
        &format!("{placement}.id"),
        rules::PLACEMENT_GROUP_ID_PATTERN,
    )?;
    s.set(&format!("{placement}.name"), "minLength", json!(1))?;

    let tracking = "spec.connectionTracking";
    s.cel(
        tracking,
        "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
        "at least one of tcpEstablishedTimeout, udpStreamTimeout or udpTimeout must be set",
    )?;
    s.range(
        &format!("{tracking}.tcpEstablishedTimeout"),
        TCP_ESTABLISHED_TIMEOUT_RANGE,
    )?;
    s.range(
        &format!("{tracking}.udpStreamTimeout"),
        UDP_STREAM_TIMEOUT_RANGE,
    )?;
    s.range(&format!("{tracking}.udpTimeout"), UDP_TIMEOUT_RANGE)?;

    s.enumeration(
        "spec.cpuOptions.nestedVirtualization",
        NESTED_VIRTUALIZATION_VALUES,
    )?;
    s.set("spec.ipPrefixCount", "minimum", json!(0))
}
