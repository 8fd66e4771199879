//! Prometheus metrics shared by the controllers: reconcile counts, failures by error category, and durations.

use prometheus_client::encoding::{text::encode, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub controller: &'static str,
    /// A static error category, never error text.
    pub category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
}

/// The metrics of one process, and the registry that exposes them.
pub struct Metrics {
    registry: Registry,
    pub reconciles: Family<ControllerLabels, Counter>,
    pub reconcile_failures: Family<FailureLabels, Counter>,
    pub reconcile_duration: Family<ControllerLabels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("olmv2");
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION") }).set(1);
        registry.register("build_info", "Version of the running controller", build_info);

        let reconciles = Family::<ControllerLabels, Counter>::default();
        registry.register("reconciles", "Reconciliations started", reconciles.clone());
        let reconcile_failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "reconcile_failures",
            "Reconciliations that failed, by error category",
            reconcile_failures.clone(),
        );
        let reconcile_duration = Family::<ControllerLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 15))
        });
        registry.register("reconcile_duration_seconds", "Duration of reconciliations", reconcile_duration.clone());

        Self { registry, reconciles, reconcile_failures, reconcile_duration }
    }
}

impl Metrics {
    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_carries_build_info_and_recorded_failures() {
        let metrics = Metrics::default();
        metrics
            .reconcile_failures
            .get_or_create(&FailureLabels { controller: "install", category: "PullFailed" })
            .inc();
        let text = metrics.encode().expect("encode");
        assert!(text.contains(&format!("olmv2_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"))));
        assert!(text.contains("olmv2_reconcile_failures_total{controller=\"install\",category=\"PullFailed\"} 1"));
        assert!(text.contains("# EOF"));
    }
}
