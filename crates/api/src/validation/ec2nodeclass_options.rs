//! EC2NodeClass validation of the launch options: network interfaces, placement group,
//! connection tracking, CPU options, IP prefixes, capacity reservation terms (Karpenter v1.14's
//! schema rules for them).

use super::rules::{self, MAX_SELECTOR_TERMS};
use super::{Collector, quoted_list};
use crate::ec2nodeclass::{CapacityReservationSelectorTerm, EC2NodeClassSpec};
use crate::ec2nodeclass_options::{
    ConnectionTracking, INTERFACE_TYPE_EFA_ONLY, INTERFACE_TYPE_INTERFACE, INTERFACE_TYPES,
    MAX_NETWORK_INTERFACES, NESTED_VIRTUALIZATION_VALUES, NetworkInterface, PlacementGroupSelector,
    TCP_ESTABLISHED_TIMEOUT_RANGE, UDP_STREAM_TIMEOUT_RANGE, UDP_TIMEOUT_RANGE,
};

/// Checks every launch option the spec sets.
pub(super) fn check_launch_options(c: &mut Collector, spec: &EC2NodeClassSpec) {
    check_network_interfaces(c, &spec.network_interfaces);
    if let Some(selector) = &spec.placement_group_selector {
        check_placement_group(c, selector);
    }
    if let Some(tracking) = &spec.connection_tracking {
        check_connection_tracking(c, tracking);
    }
    if let Some(value) = spec
        .cpu_options
        .as_ref()
        .and_then(|o| o.nested_virtualization.as_deref())
    {
        c.one_of(
            "spec.cpuOptions.nestedVirtualization",
            value,
            NESTED_VIRTUALIZATION_VALUES,
        );
    }
    if let Some(count) = spec.ip_prefix_count
        && count < 0
    {
        c.invalid(
            "spec.ipPrefixCount",
            count.to_string(),
            "must not be negative",
        );
    }
    check_capacity_reservation_terms(c, &spec.capacity_reservation_selector_terms);
}

fn check_network_interfaces(c: &mut Collector, nics: &[NetworkInterface]) {
    let path = "spec.networkInterfaces";
    if nics.is_empty() {
        return;
    }
    if nics.len() > MAX_NETWORK_INTERFACES {
        c.error(
            path,
            format!("must have at most {MAX_NETWORK_INTERFACES} items"),
        );
    }
    for (i, nic) in nics.iter().enumerate() {
        let field = format!("{path}[{i}]");
        for (name, value) in [
            ("networkCardIndex", nic.network_card_index),
            ("deviceIndex", nic.device_index),
        ] {
            if value < 0 {
                c.invalid(
                    format!("{field}.{name}"),
                    value.to_string(),
                    "must not be negative",
                );
            }
        }
        c.one_of(
            &format!("{field}.interfaceType"),
            &nic.interface_type,
            INTERFACE_TYPES,
        );
        let same_slot = nics
            .iter()
            .filter(|o| {
                o.network_card_index == nic.network_card_index && o.device_index == nic.device_index
            })
            .count();
        if same_slot > 1 {
            c.error(
                &field,
                format!(
                    "networkCardIndex {} and deviceIndex {} are used by more than one interface",
                    nic.network_card_index, nic.device_index
                ),
            );
        }
        let efa_on_card = nics
            .iter()
            .filter(|o| {
                o.network_card_index == nic.network_card_index
                    && o.interface_type == INTERFACE_TYPE_EFA_ONLY
            })
            .count();
        if nic.interface_type == INTERFACE_TYPE_EFA_ONLY && efa_on_card > 1 {
            c.error(
                &field,
                format!(
                    "network card {} has more than one 'efa-only' interface (at most one per card)",
                    nic.network_card_index
                ),
            );
        }
    }
    let has_primary = nics.iter().any(|n| {
        n.network_card_index == 0
            && n.device_index == 0
            && n.interface_type == INTERFACE_TYPE_INTERFACE
    });
    if !has_primary {
        c.error(
            path,
            "must include the primary interface: networkCardIndex 0, deviceIndex 0, interfaceType 'interface'",
        );
    }
}

fn check_placement_group(c: &mut Collector, selector: &PlacementGroupSelector) {
    let path = "spec.placementGroupSelector";
    match (&selector.name, &selector.id) {
        (None, None) => c.error(path, "expected at least one, got none, ['name', 'id']"),
        (Some(_), Some(_)) => c.error(path, "'name' and 'id' are mutually exclusive"),
        (Some(name), None) if name.is_empty() => {
            c.error(format!("{path}.name"), "may not be empty")
        }
        (None, Some(id)) => {
            c.pattern(
                &format!("{path}.id"),
                id,
                rules::PLACEMENT_GROUP_ID_PATTERN,
                "must be a placement group id",
            );
        }
        _ => {}
    }
}

fn check_connection_tracking(c: &mut Collector, tracking: &ConnectionTracking) {
    let path = "spec.connectionTracking";
    let fields = [
        (
            "tcpEstablishedTimeout",
            tracking.tcp_established_timeout,
            TCP_ESTABLISHED_TIMEOUT_RANGE,
        ),
        (
            "udpStreamTimeout",
            tracking.udp_stream_timeout,
            UDP_STREAM_TIMEOUT_RANGE,
        ),
        ("udpTimeout", tracking.udp_timeout, UDP_TIMEOUT_RANGE),
    ];
    if fields.iter().all(|(_, value, _)| value.is_none()) {
        c.error(
            path,
            "at least one of tcpEstablishedTimeout, udpStreamTimeout or udpTimeout must be set",
        );
    }
    for (name, value, (lo, hi)) in fields {
        if let Some(v) = value
            && !(lo..=hi).contains(&i64::from(v))
        {
            c.invalid(
                format!("{path}.{name}"),
                v.to_string(),
                format!("must be between {lo} and {hi} seconds"),
            );
        }
    }
}

fn check_capacity_reservation_terms(c: &mut Collector, terms: &[CapacityReservationSelectorTerm]) {
    let path = "spec.capacityReservationSelectorTerms";
    if terms.len() > MAX_SELECTOR_TERMS {
        c.error(
            path,
            format!("must have at most {MAX_SELECTOR_TERMS} items"),
        );
    }
    for (i, term) in terms.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if term.tags.is_empty() && term.id.is_none() && term.instance_match_criteria.is_none() {
            c.error(
                &field,
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
            );
        }
        if term.id.is_some()
            && (!term.tags.is_empty()
                || term.owner_id.is_some()
                || term.instance_match_criteria.is_some())
        {
            c.error(
                &field,
                "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",
            );
        }
        if let Some(id) = &term.id {
            c.pattern(
                &format!("{field}.id"),
                id,
                rules::CAPACITY_RESERVATION_ID_PATTERN,
                "must be a capacity reservation id",
            );
        }
        if let Some(owner) = &term.owner_id {
            c.pattern(
                &format!("{field}.ownerID"),
                owner,
                rules::ACCOUNT_ID_PATTERN,
                "must be a 12-digit AWS account id",
            );
        }
        if let Some(criteria) = &term.instance_match_criteria
            && !rules::INSTANCE_MATCH_CRITERIA.contains(&criteria.as_str())
        {
            c.invalid(
                format!("{field}.instanceMatchCriteria"),
                criteria,
                format!(
                    "must be one of {}",
                    quoted_list(rules::INSTANCE_MATCH_CRITERIA)
                ),
            );
        }
    }
}
