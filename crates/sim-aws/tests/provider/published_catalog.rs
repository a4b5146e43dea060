//! driftwood's capacity and overhead arithmetic, and the labels it derives from type names,
//! against what Karpenter v1.14 publishes for every instance type (its generated "Instance
//! Types" reference: AL2023, no block device mappings). The table is data nobody here wrote; a
//! type that differs is named with both values.

use std::collections::BTreeMap;

use driftwood_aws::instance_types::{CatalogOptions, capacity, instance_type_labels, pods};
use driftwood_aws::overhead::{allocatable, overhead};
use driftwood_sim_aws::instance_catalog::instance_catalog;

const MIB: i64 = 1 << 20;

/// Families whose row in Karpenter's reference page predates their entry in Karpenter's VPC
/// limits table (generated later, 2026-05): the page shows no `vpc.amazonaws.com/pod-eni` for
/// them, the table (which driftwood uses, as Karpenter's code does) gives branch ENIs.
const POD_ENI_NEWER_THAN_THE_PAGE: &[&str] = &["m9g", "m9gd"];

/// A quantity of the table in base units (`940m` → 940 milli, `1392Mi` → bytes, `17Gi`).
fn base_units(quantity: &str) -> i64 {
    let (number, scale) = match quantity {
        q if q.ends_with('m') => (&q[..q.len() - 1], 1),
        q if q.ends_with("Mi") => (&q[..q.len() - 2], MIB),
        q if q.ends_with("Gi") => (&q[..q.len() - 2], 1 << 30),
        q => (q, 1),
    };
    number.parse::<i64>().expect("integer quantity") * scale
}

/// Karpenter instance-type suite "should expose memory metrics for instance types" and "should
/// default max pods based off of network interfaces", over the whole published catalog rather
/// than a handful of fakes: cpu, memory, pods, ephemeral-storage and every extended resource.
#[test]
fn allocatable_of_every_type_matches_karpenters_published_table() {
    let catalog = instance_catalog();
    let mut mismatches = Vec::new();
    for (name, entry) in &catalog {
        let desc = &entry.description;
        let cap = capacity(desc, &CatalogOptions::default());
        let oh = overhead(desc.default_vcpus, pods(&cap), &cap, &Default::default())
            .expect("default overhead");
        let family = name.split('.').next().unwrap_or_default();
        // The scheduling model's milli-units as the table's base units (cpu stays in millicores).
        let ours: BTreeMap<String, i64> = allocatable(&cap, &oh)
            .0
            .into_iter()
            .filter(|(resource, _)| {
                !(resource == "vpc.amazonaws.com/pod-eni"
                    && POD_ENI_NEWER_THAN_THE_PAGE.contains(&family))
            })
            .map(|(resource, milli)| {
                let base = if resource == "cpu" {
                    milli
                } else {
                    milli / 1000
                };
                (resource, base)
            })
            .collect();
        let theirs: BTreeMap<String, i64> = entry
            .published
            .iter()
            .map(|(k, v)| (k.clone(), base_units(v)))
            .collect();
        for key in ours.keys().chain(theirs.keys()) {
            let (a, b) = (ours.get(key).copied(), theirs.get(key).copied());
            // Memory is published rounded down to whole MiB.
            let equal = match (key.as_str(), a, b) {
                ("memory", Some(a), Some(b)) => a / MIB == b / MIB,
                ("ephemeral-storage", Some(a), Some(b)) => (a - b).abs() < 1 << 30,
                _ => a == b,
            };
            if !equal {
                mismatches.push(format!("{name} {key}: driftwood {a:?}, Karpenter {b:?}"));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} types differ from Karpenter's published allocatable:\n{}",
        mismatches.len(),
        catalog.len(),
        mismatches[..mismatches.len().min(40)].join("\n")
    );
}

/// Karpenter instance-type suite "should support individual instance type labels", over every
/// published type: category, family, generation, size and capability-flex, which driftwood
/// works out from the name (`c7i-flex.large`, `u-6tb1.metal`, `m8gb.metal-24xl`, ...).
#[test]
fn labels_derived_from_names_match_karpenters_published_table() {
    let catalog = instance_catalog();
    let mut mismatches = Vec::new();
    for (name, entry) in &catalog {
        let ours = instance_type_labels(&entry.description, "linux").expect("usable type");
        for (key, theirs) in &entry.published_labels {
            if ours.get(key) != Some(theirs) {
                mismatches.push(format!(
                    "{name} {key}: driftwood {:?}, Karpenter {theirs:?}",
                    ours.get(key)
                ));
            }
        }
    }
    assert!(
        catalog.values().all(|e| e.published_labels.len() >= 4),
        "the data carries the published labels"
    );
    assert!(
        mismatches.is_empty(),
        "{} labels differ from Karpenter's:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(40)].join("\n")
    );
}
