//! The built instance-type catalog of each EC2NodeClass, kept while what it is built from (the
//! described data, the class's options, the offerings unavailable now) is unchanged.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use driftwood_scheduling::InstanceType;

use jiff::Timestamp;

use super::instance_types::{CatalogData, CatalogOptions, build_catalog};
use super::overhead::OverheadError;
use super::unavailable::{OfferingKey, UnavailableOfferings};

/// One class's catalog and the inputs it was built from.
struct Built {
    data: Arc<CatalogData>,
    opts: CatalogOptions,
    unavailable: Vec<OfferingKey>,
    catalog: Arc<Vec<InstanceType>>,
}

/// Built catalogs by class name.
#[derive(Default)]
pub struct BuiltCatalogs {
    by_class: Mutex<BTreeMap<String, Built>>,
}

impl BuiltCatalogs {
    /// The catalog of `class` for these inputs: the kept one when they are the same, else
    /// built now and kept.
    pub fn get_or_build(
        &self,
        class: &str,
        data: &Arc<CatalogData>,
        opts: CatalogOptions,
        unavailable: &UnavailableOfferings,
        now: Timestamp,
    ) -> Result<Arc<Vec<InstanceType>>, OverheadError> {
        let unavailable_now = unavailable.unavailable_at(now);
        let mut by_class = self.by_class.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = by_class.get(class)
            && Arc::ptr_eq(&b.data, data)
            && b.opts == opts
            && b.unavailable == unavailable_now
        {
            return Ok(b.catalog.clone());
        }
        let catalog = Arc::new(build_catalog(data, &opts, unavailable, now)?);
        by_class.insert(
            class.to_string(),
            Built {
                data: data.clone(),
                opts,
                unavailable: unavailable_now,
                catalog: catalog.clone(),
            },
        );
        Ok(catalog)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::ports::InstanceTypeDescription;

    fn data() -> Arc<CatalogData> {
        Arc::new(CatalogData {
            descriptions: vec![InstanceTypeDescription {
                instance_type: "m5.large".to_string(),
                supported_usage_classes: vec!["on-demand".to_string()],
                supported_architectures: vec!["x86_64".to_string()],
                default_vcpus: 2,
                memory_mib: 8192,
                maximum_network_interfaces: 3,
                ipv4_addresses_per_interface: 10,
                ..Default::default()
            }],
            offered_zones: BTreeMap::from([(
                "m5.large".to_string(),
                BTreeSet::from(["us-west-2a".to_string()]),
            )]),
            spot_prices: BTreeMap::new(),
            on_demand_prices: BTreeMap::from([("m5.large".to_string(), 0.096)]),
        })
    }

    fn opts() -> CatalogOptions {
        CatalogOptions {
            zones: BTreeMap::from([("us-west-2a".to_string(), "usw2-az1".to_string())]),
            ..Default::default()
        }
    }

    #[test]
    fn kept_while_inputs_are_the_same_rebuilt_when_one_changes() {
        let cache = BuiltCatalogs::default();
        let t0: Timestamp = "2026-07-20T00:00:00Z".parse().unwrap();
        let d = data();
        let mut unavailable = UnavailableOfferings::new();
        let a = cache
            .get_or_build("c", &d, opts(), &unavailable, t0)
            .unwrap();
        let b = cache
            .get_or_build("c", &d, opts(), &unavailable, t0)
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b), "same inputs: the kept catalog");
        // An offering becomes unavailable: rebuilt, and the offering is marked.
        unavailable.mark(OfferingKey::new("m5.large", "us-west-2a", "on-demand"), t0);
        let c = cache
            .get_or_build("c", &d, opts(), &unavailable, t0)
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(!c[0].offerings[0].available);
        // Other options (another class's kubelet): rebuilt.
        let mut other = opts();
        other.kubelet.max_pods = Some(20);
        let e = cache
            .get_or_build("c", &d, other, &unavailable, t0)
            .unwrap();
        assert_eq!(crate::instance_types::pods(&e[0].capacity), 20);
        // Fresh data: rebuilt.
        let f = cache
            .get_or_build("c", &data(), opts(), &unavailable, t0)
            .unwrap();
        assert!(!Arc::ptr_eq(&c, &f));
    }
}
