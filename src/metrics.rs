//! Prometheus metrics shared by the controllers: reconcile counts, failures by error category, durations by result
//! and reconciles in flight;
//! whether this replica leads; Installs by state; bundle image pulls and cache hits; the allocator's view of the
//! process's memory (docs/operations.md).

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
pub struct DurationLabels {
    pub controller: &'static str,
    /// `success`, `error`, or `cancelled` (stopped before it answered: a lost Lease, a stop past its grace).
    pub result: &'static str,
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
    pub reconcile_duration: Family<DurationLabels, Histogram>,
    /// Reconciles running now, per controller (kube-runtime does not expose its queue; this and the rate of
    /// `reconciles` are what a dashboard can show of a controller's load: 16 in flight is every worker busy).
    pub in_flight: Family<ControllerLabels, Gauge>,
    /// 1 while this replica's controllers run (always without leader election; while it holds the Lease with it).
    pub leader: Gauge,
    /// Installs by `status.state` (`PendingApproval`, `ExceedsPolicy`, ...), counted by the Install controller.
    pub installs: Family<StateLabels, Gauge>,
    /// Bundle image pulls by result.
    pub bundle_pulls: Family<PullLabels, Counter>,
    /// The allocator's statistics, read again at each scrape.
    allocator: Family<AllocatorLabels, Gauge>,
    /// When the certificate a Service is served with, and the newest CA trusted for it, expire (Unix seconds).
    pub certificate_expiry: Family<CertificateLabels, Gauge>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CertificateLabels {
    /// The Service the certificate is for (`olmv2-webhook`, `olmv2-packages`).
    pub service: String,
    /// `serving`, or `ca` (the newest CA of the bundle its clients trust).
    pub certificate: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AllocatorLabels {
    /// jemalloc's statistic: `allocated` (what the program holds), `active` (the pages of the allocator's runs that
    /// hold something: the allocated bytes and the free space between them), `metadata` (the allocator's own), and
    /// `resident` (every page it maps that is in memory: active, metadata, and freed pages not handed back yet).
    pub statistic: &'static str,
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
        let reconcile_duration = Family::<DurationLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 15))
        });
        registry.register("reconcile_duration_seconds", "Duration of reconciliations", reconcile_duration.clone());
        let in_flight = Family::<ControllerLabels, Gauge>::default();
        registry.register("reconciles_in_flight", "Reconciliations running now", in_flight.clone());

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

        let allocator = Family::<AllocatorLabels, Gauge>::default();
        registry.register_with_unit(
            "allocator",
            "Heap memory as the allocator counts it, by statistic (the process's resident memory adds its code, \
             thread stacks and what the C library maps)",
            prometheus_client::registry::Unit::Bytes,
            allocator.clone(),
        );

        let certificate_expiry = Family::<CertificateLabels, Gauge>::default();
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "When the certificate a Service is served with (serving), and the newest CA its clients trust (ca), expire",
            certificate_expiry.clone(),
        );

        Self {
            certificate_expiry,
            registry,
            reconciles,
            reconcile_failures,
            reconcile_duration,
            in_flight,
            leader,
            installs,
            bundle_pulls,
            allocator,
        }
    }
}

impl Metrics {
    /// Records when `certificate` of `service` (and the newest CA of its bundle, when known) expire.
    pub fn certificate(&self, service: &str, certificate: &crate::tls::ServingCertificate) {
        let set = |which: &'static str, pem: Option<&str>| {
            if let Some((_, end)) = pem.and_then(crate::tls::validity) {
                let labels = CertificateLabels { service: service.to_owned(), certificate: which };
                self.certificate_expiry.get_or_create(&labels).set(end);
            }
        };
        set("serving", Some(&certificate.cert_pem));
        set("ca", certificate.ca_pem.as_deref());
    }

    /// Counts a reconcile of `controller` as started and running; its duration is recorded by result when the
    /// answer is dropped, however the reconcile ends (`cancelled` unless [`ReconcileTimer::finished`] said).
    pub fn reconcile(&self, controller: &'static str) -> ReconcileTimer {
        let labels = ControllerLabels { controller };
        self.reconciles.get_or_create(&labels).inc();
        let in_flight = self.in_flight.get_or_create(&labels).clone();
        in_flight.inc();
        ReconcileTimer {
            durations: self.reconcile_duration.clone(),
            in_flight,
            controller,
            started: Instant::now(),
            result: "cancelled",
        }
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

    /// The OpenMetrics text exposition of every metric, the allocator's statistics read now.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        for (statistic, bytes) in allocator_statistics() {
            self.allocator.get_or_create(&AllocatorLabels { statistic }).set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// jemalloc's statistics of the heap, as of now (its counters are refreshed by advancing its epoch). None where
/// jemalloc is not built (musl, other systems): the metric is then absent; a read that fails leaves the value of the
/// last scrape. jemalloc is the `olmv2` binary's global allocator; where the library runs in another process (its
/// unit tests, the e2e suites' in-process controllers), these are jemalloc's own nearly empty heap.
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
fn allocator_statistics() -> Vec<(&'static str, usize)> {
    use tikv_jemalloc_ctl::{epoch, stats};
    if epoch::advance().is_err() {
        return Vec::new();
    }
    [
        ("allocated", stats::allocated::read()),
        ("active", stats::active::read()),
        ("metadata", stats::metadata::read()),
        ("resident", stats::resident::read()),
    ]
    .into_iter()
    .filter_map(|(statistic, read)| read.ok().map(|bytes| (statistic, bytes)))
    .collect()
}

#[cfg(not(all(target_os = "linux", not(target_env = "musl"))))]
fn allocator_statistics() -> Vec<(&'static str, usize)> {
    Vec::new()
}

/// Records the duration of one reconcile, by result, when dropped.
pub struct ReconcileTimer {
    durations: Family<DurationLabels, Histogram>,
    in_flight: Gauge,
    controller: &'static str,
    started: Instant,
    result: &'static str,
}

impl ReconcileTimer {
    /// The reconcile answered: with success or with an error.
    pub fn finished(mut self, succeeded: bool) {
        self.result = if succeeded { "success" } else { "error" };
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        let labels = DurationLabels { controller: self.controller, result: self.result };
        self.durations.get_or_create(&labels).observe(self.started.elapsed().as_secs_f64());
        self.in_flight.dec();
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
    fn a_reconcile_is_counted_at_its_start_in_flight_until_it_ends_and_measured_by_result() {
        let metrics = Metrics::default();
        let answered = metrics.reconcile("operator");
        let cancelled = metrics.reconcile("operator");
        let text = metrics.encode().expect("encode");
        assert!(text.contains("olmv2_reconciles_total{controller=\"operator\"} 2"), "{text}");
        assert!(text.contains("olmv2_reconciles_in_flight{controller=\"operator\"} 2"), "{text}");
        assert!(!text.contains("olmv2_reconcile_duration_seconds_count"), "{text}");
        answered.finished(false);
        drop(cancelled);
        let text = metrics.encode().expect("encode");
        assert!(text.contains("olmv2_reconciles_in_flight{controller=\"operator\"} 0"), "{text}");
        for result in ["error", "cancelled"] {
            let line =
                format!("olmv2_reconcile_duration_seconds_count{{controller=\"operator\",result=\"{result}\"}} 1");
            assert!(text.contains(&line), "{text}");
        }
        assert!(!text.contains("result=\"success\""), "{text}");
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

    /// Where jemalloc is the allocator's library: its statistics, read at the scrape, in the order they contain each
    /// other (what is resident holds the active pages and metadata; active pages hold what is allocated).
    #[cfg(all(target_os = "linux", not(target_env = "musl")))]
    #[test]
    fn the_allocators_statistics_are_read_at_each_scrape() {
        let metrics = Metrics::default();
        let text = metrics.encode().expect("encode");
        let read = |statistic: &str| -> i64 {
            let prefix = format!("olmv2_allocator_bytes{{statistic=\"{statistic}\"}} ");
            let line = text.lines().find_map(|line| line.strip_prefix(&prefix));
            line.unwrap_or_else(|| panic!("{statistic} in {text}")).parse().expect("a number")
        };
        let (allocated, active, metadata, resident) =
            (read("allocated"), read("active"), read("metadata"), read("resident"));
        assert!(metadata > 0, "{text}");
        assert!(allocated <= active && active <= resident && metadata <= resident, "{text}");
        assert!(text.contains("# UNIT olmv2_allocator_bytes bytes"), "{text}");
    }
}
