//! Leader election (`--leader-elect`, `controller::leader`): two replicas of the controller against one control
//! plane, as `deploy/` runs them. Only the replica holding the Lease reconciles (the other's reconcile counters stay
//! at zero while both run); when the leader stops, the other takes the Lease and installs what comes next; a leader
//! that loses its Lease stops at once, even while it is stopping and waiting for its running passes; a leader asked
//! to stop releases its Lease, and only if it is still its own.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use olmv2::controller::leader::LeaderOptions;
use olmv2::metrics::{ControllerLabels, Metrics};
use olmv2_e2e::project;

use crate::attacks::installed_by_admin;
use crate::support::harness::Harness;

/// Leader election on, with a short Lease so that a takeover is quick.
pub(crate) fn leader_options(identity: &str) -> LeaderOptions {
    LeaderOptions {
        enabled: true,
        identity: Some(identity.to_owned()),
        lease_seconds: 3,
        grace_seconds: 1,
        ..LeaderOptions::default()
    }
}

pub(crate) fn install_reconciles(metrics: &Metrics) -> u64 {
    metrics.reconciles.get_or_create(&ControllerLabels { controller: "install" }).get()
}

pub(crate) async fn holder(harness: &Harness) -> Option<String> {
    let leases = Api::<Lease>::namespaced(harness.admin.clone(), project::CONTROLLER_NAMESPACE);
    leases.get_opt("olmv2-controller").await.unwrap().and_then(|lease| lease.spec?.holder_identity)
}

/// A Lease's time as Kubernetes writes a `MicroTime` (six digits of fraction).
fn micro(time: k8s_openapi::jiff::Timestamp) -> serde_json::Value {
    serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(time)).unwrap()
}

/// Patches the Lease as the cluster admin (merge patch).
fn patch_lease(harness: &Harness, patch: &serde_json::Value) {
    let namespace = project::CONTROLLER_NAMESPACE;
    let args = ["patch", "lease", "olmv2-controller", "-n", namespace, "--type=merge", "-p", &patch.to_string()];
    let patched = harness.admin_kubectl(&args, None);
    assert!(patched.status.success(), "{}", crate::support::emulator::kubectl::text(&patched));
}

pub(crate) async fn wait_holder(harness: &Harness, identity: &str) -> Duration {
    let start = Instant::now();
    for _ in 0..300 {
        if holder(harness).await.as_deref() == Some(identity) {
            return start.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{identity} never held the Lease; holder: {:?}", holder(harness).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_replica_holding_the_lease_reconciles_and_the_other_takes_over() {
    let configure = Box::new(|options: &mut olmv2::runtime::ControllerOptions, _: &std::path::Path| {
        options.leader = leader_options("replica-a");
    });
    let mut harness =
        Harness::start_configured("leader", "two-replicas", &["operators", "olm"], Duration::from_secs(1), configure)
            .await;
    wait_holder(&harness, "replica-a").await;
    let first = harness.metrics().expect("replica a runs");

    // Replica b starts beside it, with the same identity as a ServiceAccount and its own webhook and API.
    let mut options =
        project::controller_options(vec![harness.registry.host.clone()], harness.dir.join("cache-b"), harness_resync());
    options.leader = leader_options("replica-b");
    let second = harness.start_replica(options).await;

    // Replica b answers the aggregated API now (the Service's endpoint is its own), PackageManifests included: it
    // loads the catalogs although the CatalogSource loop runs on the leader only.
    let community = crate::packagemanifests::push(&harness, "community", &["kairos-operator"]).await;
    let source = crate::packagemanifests::catalog_source("olm", "community", "Community Operators", &community);
    assert!(harness.admin_kubectl(&["apply", "-f", "-"], Some(&source)).status.success());
    harness.wait_kubectl(&["get", "packagemanifests", "-n", "operators"], "kairos-operator").await;

    installed_by_admin(&harness, "settings", "one").await;
    assert!(install_reconciles(&first) > 0, "the leader reconciled");
    assert_eq!(install_reconciles(&second.metrics), 0, "the other replica reconciled nothing");
    assert_eq!((first.leader.get(), second.metrics.leader.get()), (1, 0));
    assert_eq!(holder(&harness).await.as_deref(), Some("replica-a"));

    // The leader stops: replica b takes the Lease and reconciles what comes next.
    harness.stop_controllers();
    let taken = wait_holder(&harness, "replica-b").await;
    assert!(taken < Duration::from_secs(10), "taken over in {taken:?}");
    let before = install_reconciles(&first);
    installed_by_admin(&harness, "more-settings", "two").await;
    assert!(install_reconciles(&second.metrics) > 0, "replica b reconciles now");
    assert_eq!(second.metrics.leader.get(), 1);
    assert_eq!(install_reconciles(&first), before, "the stopped replica did nothing more");
    second.stop().await;
}

pub(crate) fn harness_resync() -> Duration {
    Duration::from_secs(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_that_loses_its_lease_stops_reconciling_until_it_holds_it_again() {
    let configure = Box::new(|options: &mut olmv2::runtime::ControllerOptions, _: &std::path::Path| {
        options.leader = leader_options("replica-a");
    });
    let harness =
        Harness::start_configured("leader", "lose-lease", &["operators"], Duration::from_secs(1), configure).await;
    wait_holder(&harness, "replica-a").await;
    let metrics = harness.metrics().expect("replica a runs");
    installed_by_admin(&harness, "settings", "one").await;
    assert_eq!(metrics.leader.get(), 1);

    // Someone else holds the Lease now (as a replica elsewhere would after a partition): replica a stops at once.
    let now = k8s_openapi::jiff::Timestamp::now();
    let taken = serde_json::json!({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 30,
        "acquireTime": micro(now), "renewTime": micro(now)}});
    patch_lease(&harness, &taken);
    let start = Instant::now();
    while metrics.leader.get() != 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "replica a never stopped leading");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let frozen = install_reconciles(&metrics);
    let install = crate::attacks::raw_install("waiting", &crate::attacks::config_map("waiting", "x"), "operators");
    let created = harness.admin_kubectl(&["apply", "-f", "-"], Some(&install));
    assert!(created.status.success());
    // Longer than replica a's own Lease (3 s): a renewal it made blind, from what it last read, would have given the
    // intruder's Lease replica a's duration and let replica a take it back before the intruder's 30 seconds.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(holder(&harness).await.as_deref(), Some("intruder"), "the intruder's Lease holds");
    assert_eq!(install_reconciles(&metrics), frozen, "nothing reconciled while another holds the Lease");
    let waiting = crate::support::installs::installs(&harness).get("waiting").await.unwrap();
    assert!(waiting.status.is_none(), "the Install was not looked at: {:?}", waiting.status);

    // The intruder's Lease expires (renewed an hour ago): replica a takes it back and goes on.
    let expired = now.checked_sub(k8s_openapi::jiff::SignedDuration::from_hours(1)).unwrap();
    let lapsed = serde_json::json!({"spec": {"renewTime": micro(expired)}});
    patch_lease(&harness, &lapsed);
    wait_holder(&harness, "replica-a").await;
    crate::support::installs::wait_state(&harness, "waiting", olmv2::api::v2alpha1::InstallState::PendingApproval)
        .await;
    assert_eq!(metrics.leader.get(), 1);
}

/// A registry that takes connections and never answers; each connection accepted is reported.
async fn stalled_registry() -> (String, tokio::sync::mpsc::UnboundedReceiver<()>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    let (accepted, reported) = tokio::sync::mpsc::unbounded_channel();
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            connections.push(connection);
            let _ = accepted.send(());
        }
    });
    (host, reported, held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopping_leader_that_loses_its_lease_aborts_its_running_passes_at_once() {
    // An Install's pass pulls from a registry that never answers: it runs until the registry read timeout (30 s),
    // longer than a stopping controller waits for its passes (10 s).
    let (stalled, mut accepted, held) = stalled_registry().await;
    let host = stalled.clone();
    let configure = Box::new(move |options: &mut olmv2::runtime::ControllerOptions, _: &std::path::Path| {
        options.leader = leader_options("replica-a");
        options.registry.insecure_registries.push(host.clone());
    });
    let mut harness =
        Harness::start_configured("leader", "stopping-fence", &["operators"], Duration::from_secs(1), configure).await;
    wait_holder(&harness, "replica-a").await;
    let install = crate::support::installs::install_yaml("stalled", &format!("{stalled}/stalled-bundle:1"));
    assert!(harness.admin_kubectl(&["apply", "-f", "-"], Some(&install)).status.success());
    let pulling = tokio::time::timeout(Duration::from_secs(30), accepted.recv()).await;
    assert!(pulling.is_ok_and(|accepted| accepted.is_some()), "the Install's pass never reached the registry");

    // Asked to stop, replica a lets its running pass go on while the Lease is its own...
    let controllers = harness.take_controllers().expect("replica a runs");
    let metrics = controllers.metrics.clone();
    let asked = Instant::now();
    let stopping = tokio::spawn(controllers.stop());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!stopping.is_finished(), "the stop waits for the running pass");
    assert_eq!(metrics.leader.get(), 1, "still leading while it stops");

    // ...until someone else holds it: then it aborts the pass and stops, rather than waiting out its grace.
    let now = k8s_openapi::jiff::Timestamp::now();
    let taken = serde_json::json!({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 30,
        "acquireTime": micro(now), "renewTime": micro(now)}});
    patch_lease(&harness, &taken);
    let lost = Instant::now();
    let stopped = tokio::time::timeout(Duration::from_secs(30), stopping).await;
    stopped.expect("replica a stops").expect("the stop did not panic");
    // Without the fence it would have waited out the grace (10 s from the stop asked for).
    let (since_asked, since_lost) = (asked.elapsed(), lost.elapsed());
    assert!(since_asked < Duration::from_secs(8), "stopped {since_asked:?} after asked, {since_lost:?} after the loss");
    assert_eq!(metrics.leader.get(), 0);
    // Nor did it release the Lease on its way out: that would clear the new holder's.
    assert_eq!(holder(&harness).await.as_deref(), Some("intruder"), "it left the intruder's Lease alone");
    println!("stopped {since_lost:?} after losing the Lease");
    held.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_asked_to_stop_releases_its_lease_but_never_one_another_took() {
    let configure = Box::new(|options: &mut olmv2::runtime::ControllerOptions, _: &std::path::Path| {
        options.leader = leader_options("replica-a");
    });
    let mut harness =
        Harness::start_configured("leader", "release", &["operators"], Duration::from_secs(1), configure).await;
    wait_holder(&harness, "replica-a").await;
    let mut options =
        project::controller_options(vec![harness.registry.host.clone()], harness.dir.join("cache-b"), harness_resync());
    options.leader = leader_options("replica-b");
    let second = harness.start_replica(options).await;

    // Replica a, asked to stop, hands the Lease back as it goes: not left to expire as a killed replica's.
    let first = harness.take_controllers().expect("replica a runs");
    tokio::time::timeout(Duration::from_secs(30), first.stop()).await.expect("replica a stops");
    assert_ne!(holder(&harness).await.as_deref(), Some("replica-a"), "released when it stopped");
    wait_holder(&harness, "replica-b").await;
    for _ in 0..100 {
        if second.metrics.leader.get() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(second.metrics.leader.get(), 1, "replica b leads");

    // Someone else takes the Lease, and replica b is asked to stop before it noticed: it must not release the Lease it
    // last saw as its own, which would clear the new holder's.
    let now = k8s_openapi::jiff::Timestamp::now();
    let taken = serde_json::json!({"spec": {"holderIdentity": "intruder", "leaseDurationSeconds": 30,
        "acquireTime": micro(now), "renewTime": micro(now)}});
    patch_lease(&harness, &taken);
    tokio::time::timeout(Duration::from_secs(30), second.stop()).await.expect("replica b stops");
    // (Its lease manager may have renewed it once before it stopped, unconditioned too: the holder is what counts.)
    assert_eq!(holder(&harness).await.as_deref(), Some("intruder"), "it left the intruder's Lease alone");
}
