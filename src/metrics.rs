//! Prometheus metrics shared by the controllers: reconcile counts, failures by error category, and durations;
//! whether this replica leads; Installs by state; bundle image pulls and cache hits (docs/operations.md).

use std::time::Instant;

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
pub struct StateLabels {
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PullLabels {
    /// `pulled` (downloaded and unpacked), `cached` (found unpacked by digest) or `failed`.
    pub result: &'static str,
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
    /// 1 while this replica's controllers run (always without leader election; while it holds the Lease with it).
    pub leader: Gauge,
    /// Installs by `status.state` (`PendingApproval`, `ExceedsPolicy`, ...), counted by the Install controller.
    pub installs: Family<StateLabels, Gauge>,
    /// Bundle image pulls by result.
    pub bundle_pulls: Family<PullLabels, Counter>,
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

        let leader = Gauge::default();
        registry.register("leader", "Whether this replica reconciles (holds the Lease, or runs alone)", leader.clone());

        let installs = Family::<StateLabels, Gauge>::default();
        registry.register(
            "installs",
            "Installs by state, as this replica's Install controller last counted",
            installs.clone(),
        );
        let bundle_pulls = Family::<PullLabels, Counter>::default();
        registry.register(
            "bundle_pulls",
            "Bundle image pulls: downloaded and unpacked, found in the cache by digest, or failed",
            bundle_pulls.clone(),
        );

        Self { registry, reconciles, reconcile_failures, reconcile_duration, leader, installs, bundle_pulls }
    }
}

impl Metrics {
    /// Counts a reconcile of `controller` as started; its duration is recorded when the answer is dropped, however
    /// the reconcile ends (an answer, an error, or cancelled at shutdown).
    pub fn reconcile(&self, controller: &'static str) -> ReconcileTimer {
        let labels = ControllerLabels { controller };
        self.reconciles.get_or_create(&labels).inc();
        ReconcileTimer { duration: self.reconcile_duration.get_or_create(&labels).clone(), started: Instant::now() }
    }

    /// Counts a failed reconcile of `controller`, by the error's static category.
    pub fn reconcile_failed(&self, controller: &'static str, category: &'static str) {
        self.reconcile_failures.get_or_create(&FailureLabels { controller, category }).inc();
    }

    /// Counts a bundle pull by its result.
    pub fn bundle_pull(&self, result: &'static str) {
        self.bundle_pulls.get_or_create(&PullLabels { result }).inc();
    }

    /// Sets the count of Installs in each state; states not given are 0.
    pub fn set_install_states(&self, counts: &[(&'static str, i64)]) {
        for (state, count) in counts {
            self.installs.get_or_create(&StateLabels { state }).set(*count);
        }
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// Records the duration of one reconcile when dropped.
pub struct ReconcileTimer {
    duration: Histogram,
    started: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.duration.observe(self.started.elapsed().as_secs_f64());
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

    #[test]
    fn a_reconcile_is_counted_at_its_start_and_measured_when_it_ends() {
        let metrics = Metrics::default();
        let timer = metrics.reconcile("operator");
        let text = metrics.encode().expect("encode");
        assert!(text.contains("olmv2_reconciles_total{controller=\"operator\"} 1"), "{text}");
        assert!(text.contains("olmv2_reconcile_duration_seconds_count{controller=\"operator\"} 0"), "{text}");
        drop(timer);
        let text = metrics.encode().expect("encode");
        assert!(text.contains("olmv2_reconcile_duration_seconds_count{controller=\"operator\"} 1"), "{text}");
    }

    #[test]
    fn install_states_and_bundle_pulls_are_exposed() {
        let metrics = Metrics::default();
        metrics.set_install_states(&[("PendingApproval", 2), ("Installed", 5)]);
        metrics.bundle_pull("cached");
        metrics.bundle_pull("cached");
        let text = metrics.encode().expect("encode");
        assert!(text.contains("olmv2_installs{state=\"PendingApproval\"} 2"), "{text}");
        assert!(text.contains("olmv2_bundle_pulls_total{result=\"cached\"} 2"), "{text}");
    }
}
