//! A metrics registry that notes each family's name and type as it registers it, so a family's
//! name is written once, where it is registered, and the process still knows every family it
//! exports (a family with no series yet is left out of the exposition, as client_golang leaves
//! out an empty vector, but it is still declared).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeMetric;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

/// A family's name and type.
pub type Declared = (&'static str, MetricType);

/// A [`Registry`] with the families registered in it.
#[derive(Debug, Default)]
pub struct DeclaredRegistry {
    registry: Registry,
    declared: Vec<Declared>,
}

impl DeclaredRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `metric` as the family `name`.
    pub fn metric<M>(&mut self, name: &'static str, help: &str, metric: M)
    where
        M: TypedMetric + EncodeMetric + Send + Sync + std::fmt::Debug + 'static,
    {
        self.declared.push((name, M::TYPE));
        self.registry.register(name, help, metric);
    }

    /// Registers `collector`, which writes `families` at every scrape.
    pub fn collector(&mut self, families: &[Declared], collector: Box<dyn Collector>) {
        self.declared.extend_from_slice(families);
        self.registry.register_collector(collector);
    }

    /// The registry, to encode.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The families registered so far.
    pub fn declared(&self) -> &[Declared] {
        &self.declared
    }

    /// The registry and the families registered in it.
    pub fn into_parts(self) -> (Registry, Vec<Declared>) {
        (self.registry, self.declared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::DescriptorEncoder;
    use prometheus_client::metrics::counter::{ConstCounter, Counter};
    use prometheus_client::metrics::gauge::Gauge;

    #[derive(Debug)]
    struct Fixed;

    impl Collector for Fixed {
        fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
            ConstCounter::new(3u64).encode(encoder.encode_descriptor(
                "fixed_things",
                "Things",
                None,
                MetricType::Counter,
            )?)
        }
    }

    /// A family is declared with the type of what is registered, a collector with the families
    /// it says it writes, in registration order; the registry encodes them all.
    #[test]
    fn families_are_declared_as_they_are_registered() {
        let mut registry = DeclaredRegistry::new();
        let requests = Counter::<u64>::default();
        requests.inc();
        registry.metric("requests", "Requests", requests);
        registry.metric("depth", "Depth", Gauge::<i64>::default());
        registry.collector(&[("fixed_things", MetricType::Counter)], Box::new(Fixed));
        registry.collector(&[], Box::new(Fixed));
        let declared: Vec<(&str, &str)> = registry
            .declared()
            .iter()
            .map(|(name, kind)| (*name, kind.as_str()))
            .collect();
        assert_eq!(
            declared,
            [
                ("requests", "counter"),
                ("depth", "gauge"),
                ("fixed_things", "counter")
            ]
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry.registry()).unwrap();
        assert!(text.contains("requests_total 1\n"), "{text}");
        assert!(text.contains("depth 0\n"), "{text}");
        assert!(text.contains("fixed_things_total 3\n"), "{text}");
        let (_, declared) = registry.into_parts();
        assert_eq!(declared.len(), 3);
    }
}
