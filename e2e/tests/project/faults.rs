//! Faults the controller must survive, each ending converged with nothing duplicated and nothing lost: the API
//! server failing a fifth of the controller's writes (the fault-injection switch, the test control plane's or the
//! fault proxy's in front of kube-apiserver: 429, 409, 500 before or after the write), every watch ended by an API-server restart and resumed into `410 Expired`, the leader
//! killed mid-apply at random points with a second replica taking over (its Lease left to expire), two replicas
//! started at once, and the answer to an InstallPlan's create lost after it was stored. (The
//! registry down during a pull is `install.rs`'s `a_pull_failure_is_a_content_import_error_until_the_registry_returns`;
//! the approval webhook down is the attack suite's.)

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, ListParams};
use kube_emulator::faults::{Fault, WriteFaults};
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase, InstallPlan, InstallPlanPhase, Subscription};
use olmv2::api::v2alpha1::InstallState;
use olmv2::process::Controllers;
use olmv2_e2e::project;

use crate::attacks::{config_map, installed_by_admin, raw_install};
use crate::leader::{holder, install_reconciles, leader_options, wait_holder};
use crate::legacy::installplans;
use crate::legacy::{apply, kubectl};
use crate::support::harness::{Harness, CONTROLLER_USER};
use crate::support::installs::{installs, wait_state};

/// The controllers' options as every suite has them.
fn none() -> crate::support::harness::Configure {
    Box::new(|_, _| {})
}

fn names<K: kube::Resource>(items: &[K]) -> BTreeSet<String> {
    items.iter().filter_map(|item| item.meta().name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fifth_of_the_controllers_writes_failing_delays_but_neither_duplicates_nor_loses_anything() {
    // OLM's one-minute InstallPlan retry timeout (the suites' 5 s would fail a plan whose applies keep meeting faults).
    let configure = Box::new(|options: &mut olmv2::runtime::ControllerOptions, _: &std::path::Path| {
        options.install_plan_retry_timeout = Duration::from_secs(60);
    });
    let namespaces = ["ops", "olm", "operators"];
    let harness = Harness::start_faulty("faults", "writes", &namespaces, Duration::from_secs(2), configure).await;
    let faults = WriteFaults { user: CONTROLLER_USER.into(), fraction: 0.2, seed: 24, ..WriteFaults::default() };
    harness.faults().fail_writes(faults);

    // OLM v0's path (Subscription, InstallPlan, generated Subscription, Installs, CSVs) and a Raw Install.
    installplans::catalog(&harness).await;
    apply(&harness, installplans::GROUP);
    apply(&harness, &installplans::subscription("Automatic"));
    for install in ["plumbus.ops", "grumbo.ops"] {
        wait_state(&harness, install, InstallState::PendingApproval).await;
        installplans::approve(&harness, install);
    }
    installed_by_admin(&harness, "settings", "one").await;
    let start = Instant::now();
    loop {
        harness.roll_out("ops").await;
        let plan = installplans::the_plan(&harness, "any", |_| true).await;
        if installplans::phase(&plan) == InstallPlanPhase::Complete {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "the plan never completed: {:?}", plan.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let injected = harness.faults().injected();
    harness.faults().stop_failing_writes();
    let total: u64 = injected.values().sum();
    assert!(total >= 10, "few faults met: {injected:?}");
    // Conflicts fall only on the few writes naming a resourceVersion: the next test meets them for sure.
    for fault in [Fault::InternalError, Fault::InternalErrorAfterWrite] {
        assert!(injected.get(&fault).copied().unwrap_or(0) > 0, "no {fault:?} met: {injected:?}");
    }

    // Nothing duplicated: one plan (made with generateName), the Subscriptions, Installs and CSVs once each.
    let plans = Api::<InstallPlan>::namespaced(harness.admin.clone(), "ops").list(&ListParams::default()).await;
    assert_eq!(plans.unwrap().items.len(), 1, "one InstallPlan for one resolution");
    let subscriptions = Api::<Subscription>::namespaced(harness.admin.clone(), "ops").list(&Default::default()).await;
    assert_eq!(
        names(&subscriptions.unwrap().items),
        BTreeSet::from(["plumbus".to_owned(), "grumbo-stable-community-olm".to_owned()])
    );
    let all_installs = installs(&harness).list(&ListParams::default()).await.unwrap().items;
    assert_eq!(
        names(&all_installs),
        BTreeSet::from(["plumbus.ops".to_owned(), "grumbo.ops".to_owned(), "settings".to_owned()])
    );
    // Nothing lost: every Install installed, every CSV succeeded, the Raw content there.
    for install in &all_installs {
        let state = install.status.as_ref().and_then(|s| s.state);
        assert_eq!(state, Some(InstallState::Installed), "{:?}", install.metadata.name);
    }
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops").list(&Default::default()).await;
    let csvs = csvs.unwrap().items;
    assert_eq!(names(&csvs), BTreeSet::from(["plumbus.v2.0.0-alpha".to_owned(), "grumbo.v1.0.0".to_owned()]));
    assert!(csvs.iter().all(|csv| csv.status.as_ref().is_some_and(|s| s.phase == CsvPhase::Succeeded)));
    let settings = Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators").get("settings").await.unwrap();
    assert_eq!(settings.data.unwrap()["value"], "one");
    // Converged: with the faults gone, a resync later nothing has moved.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let columns =
        kubectl(&harness, &["get", "installs", "-o", "custom-columns=NAME:.metadata.name,STATE:.status.state"]);
    assert_eq!(columns.matches("Installed").count(), 3, "{columns}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_refused_as_conflicts_are_retried_until_they_pass() {
    let harness = Harness::start_faulty("faults", "conflicts", &["operators"], Duration::from_secs(2), none()).await;
    // Every write of an Install made against a resourceVersion (its status, its approval) conflicts for a while.
    let conflicts = WriteFaults {
        user: CONTROLLER_USER.into(),
        fraction: 1.0,
        resources: vec!["installs".into()],
        kinds: vec![Fault::Conflict],
        ..WriteFaults::default()
    };
    harness.faults().fail_writes(conflicts);
    apply(&harness, &raw_install("settings", &config_map("settings", "one"), "operators"));
    let start = Instant::now();
    while harness.faults().injected().get(&Fault::Conflict).copied().unwrap_or(0) < 3 {
        assert!(start.elapsed() < Duration::from_secs(60), "no write of the Install met a conflict");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stuck = installs(&harness).get("settings").await.unwrap();
    assert!(stuck.status.is_none(), "no status got through the conflicts: {:?}", stuck.status);
    harness.faults().stop_failing_writes();
    installplans::approve(
        &harness,
        &wait_state(&harness, "settings", InstallState::PendingApproval).await.metadata.name.unwrap(),
    );
    wait_state(&harness, "settings", InstallState::Installed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watches_ended_by_an_api_server_restart_are_listed_again_and_what_changed_meanwhile_is_seen() {
    // A resync far beyond the test: what happens must come from the watches.
    let harness = Harness::start_faulty("faults", "watches", &["operators"], Duration::from_secs(600), none()).await;
    installed_by_admin(&harness, "before", "one").await;
    let configmaps = Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators");
    let applied = configmaps.get("before").await.unwrap();

    // Drift on what the controller applied, before the restart: the controller watches no ConfigMap and resyncs
    // far beyond the test, so only the Installs listed again after the restart can repair it. (Made after the
    // restart, it raced the list: the controller lists again within its watch backoff, and a drift written after
    // that list stayed, as the suite under load showed.)
    let patched = harness.admin_kubectl(
        &["patch", "configmap", "before", "-n", "operators", "--type=merge", "-p", r#"{"data":{"value":"drifted"}}"#],
        None,
    );
    assert!(patched.status.success());
    let expired = harness.expired_watches();
    harness.restart_watches().await;
    // While the controller's watches are down or listing again: an Install created.
    let created = harness
        .admin_kubectl(&["apply", "-f", "-"], Some(&raw_install("during", &config_map("during", "two"), "operators")));
    assert!(created.status.success());

    wait_state(&harness, "during", InstallState::PendingApproval).await;
    let start = Instant::now();
    loop {
        let current = configmaps.get("before").await.unwrap();
        if current.data.as_ref().is_some_and(|d| d["value"] == "one")
            && current.metadata.resource_version != applied.metadata.resource_version
        {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the drift was never repaired: {:?}", current.data);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        harness.expired_watches() > expired,
        "the controller resumed its watches from before the restart and was told 410 Expired"
    );
    let approved = harness.admin_kubectl(
        &["patch", "install", "during", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#],
        None,
    );
    assert!(approved.status.success());
    wait_state(&harness, "during", InstallState::Installed).await;
    assert_eq!(configmaps.get("during").await.unwrap().data.unwrap()["value"], "two");
}

/// A replica with leader election (a 3-second Lease), its own image cache.
async fn replica(harness: &Harness, identity: &str) -> Controllers {
    let cache = harness.dir.join(format!("cache-{identity}"));
    let mut options = project::controller_options(vec![harness.registry.host.clone()], cache, Duration::from_secs(1));
    options.leader = leader_options(identity);
    harness.start_replica(options).await
}

const CONFIG_MAPS: usize = 20;

/// An Install of `CONFIG_MAPS` ConfigMaps `<name>-NN`, approved by the admin.
async fn approved_settings(harness: &Harness, name: &str) {
    let raw: String =
        (0..CONFIG_MAPS).map(|i| format!("{}---\n", config_map(&format!("{name}-{i:02}"), &i.to_string()))).collect();
    apply(harness, &raw_install(name, &raw, "operators"));
    wait_state(harness, name, InstallState::PendingApproval).await;
    installplans::approve(harness, name);
}

async fn applied_count(harness: &Harness, prefix: &str) -> usize {
    let configmaps = Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators");
    let listed = configmaps.list(&ListParams::default()).await.unwrap().items;
    listed.iter().filter(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with(prefix))).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_killed_mid_apply_at_random_points_is_replaced_and_the_apply_finished_once() {
    let harness = Harness::start_idle("faults", "failover", &["operators"], Duration::from_secs(1)).await;
    let _slow = harness.slow_configmap_writes().await;
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as usize;
    let mut leader = replica(&harness, "replica-0").await;
    wait_holder(&harness, "replica-0").await;
    let mut standby = replica(&harness, "replica-1").await;
    for round in 0..3 {
        let name = format!("settings-{round}");
        // Killed after a random number of the ConfigMaps (0: right after the approval, before any is applied).
        let kill_at = (seed / (round + 1) + round * 7) % CONFIG_MAPS;
        approved_settings(&harness, &name).await;
        let start = Instant::now();
        while applied_count(&harness, &format!("{name}-")).await < kill_at {
            assert!(start.elapsed() < Duration::from_secs(30), "the leader never applied (seed {seed})");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(leader); // killed: the Lease is not released
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Not released (a release empties the holder); it lapses, or the standby has taken it already.
        assert!(holder(&harness).await.is_some(), "a killed leader's Lease stays until it expires");
        let next = format!("replica-{}", round + 1);
        let taken = wait_holder(&harness, &next).await;
        let installed = wait_state(&harness, &name, InstallState::Installed).await;
        assert_eq!(applied_count(&harness, &format!("{name}-")).await, CONFIG_MAPS, "round {round}, seed {seed}");
        assert_eq!(installed.status.unwrap().applied.len(), CONFIG_MAPS, "round {round}, seed {seed}");
        let roles = Api::<Role>::namespaced(harness.admin.clone(), "operators").list(&ListParams::default()).await;
        let grants =
            roles.unwrap().items.into_iter().filter(|r| {
                r.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("olmv2-install-{name}-")))
            });
        assert_eq!(grants.count(), 1, "one grant for the Install (seed {seed})");
        println!("round {round}: killed after {kill_at} of {CONFIG_MAPS}, {next} took over in {taken:?}");
        leader = standby;
        standby = replica(&harness, &format!("replica-{}", round + 2)).await;
    }
    assert_eq!(holder(&harness).await.as_deref(), Some("replica-3"));
    drop(standby);
    leader.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_cut_off_from_the_api_server_stops_and_the_other_takes_over_and_keeps_the_lease() {
    let harness = Harness::start_faulty_idle("faults", "cut-off", &["operators"], Duration::from_secs(1)).await;
    let a = replica(&harness, "replica-a").await;
    wait_holder(&harness, "replica-a").await;
    let b = replica(&harness, "replica-b").await;
    installed_by_admin(&harness, "before", "one").await;
    let audit = || harness.audit_records();
    let from_a = |agent: &str| agent.starts_with("olmv2/") && agent.ends_with("(replica-a)");
    assert!(audit().iter().any(|r| from_a(&r.user_agent) && r.code < 300), "replica-a's requests name it");

    // A partition: nothing replica-a sends reaches the API server; its watches end and cannot be opened again.
    harness.faults().cut_off("(replica-a)");
    harness.restart_watches().await;
    let taken = wait_holder(&harness, "replica-b").await;
    let start = Instant::now();
    while a.metrics.leader.get() != 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "replica-a still leads, cut off for {taken:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let reconciled_by_a = install_reconciles(&a.metrics);
    installed_by_admin(&harness, "after", "two").await;
    assert_eq!(install_reconciles(&a.metrics), reconciled_by_a, "replica-a reconciled nothing once it lost the Lease");
    assert!(install_reconciles(&b.metrics) > 0, "replica-b installed what came next");
    assert!(harness.faults().refused_cut_off() > 0, "replica-a kept trying");

    // Back: replica-a joins the election again and follows; replica-b keeps the Lease (a write of replica-a's
    // retried across the partition and landing now would take it from replica-b: the election does not retry).
    harness.faults().reconnect_all();
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(holder(&harness).await.as_deref(), Some("replica-b"));
    assert_eq!((a.metrics.leader.get(), b.metrics.leader.get()), (0, 1));
    let settings = installs(&harness).get("after").await.unwrap();
    assert_eq!(settings.status.unwrap().applied.len(), 1, "installed once");
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_controllers_started_at_once_elect_one_and_only_it_reconciles() {
    let harness = Harness::start_idle("faults", "two-at-once", &["operators"], Duration::from_secs(1)).await;
    let (a, b) = tokio::join!(replica(&harness, "replica-a"), replica(&harness, "replica-b"));
    installed_by_admin(&harness, "settings", "one").await;
    let leading = holder(&harness).await.expect("a holder");
    let (leader, follower) = if leading == "replica-a" { (&a, &b) } else { (&b, &a) };
    assert_eq!((leader.metrics.leader.get(), follower.metrics.leader.get()), (1, 0), "{leading} leads alone");
    assert!(install_reconciles(&leader.metrics) > 0);
    assert_eq!(install_reconciles(&follower.metrics), 0, "the replica without the Lease reconciled nothing");
    let settings = installs(&harness).get("settings").await.unwrap();
    assert_eq!(settings.status.unwrap().applied.len(), 1);
    // Both serve the webhook with the one certificate the caBundle trusts: an Install write reaching either passes.
    for (replica, name) in [(&a, "through-a"), (&b, "through-b")] {
        harness
            .plane
            .point_service(project::CONTROLLER_NAMESPACE, "olmv2-webhook", replica.webhook.address)
            .await
            .expect("Service pointed");
        let install = raw_install(name, &config_map(name, "x"), "operators");
        let created = harness.admin_kubectl(&["create", "-f", "-"], Some(&install));
        assert!(created.status.success(), "{name}: {}", crate::support::emulator::kubectl::text(&created));
    }
    let secrets =
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(harness.admin.clone(), project::CONTROLLER_NAMESPACE);
    for service in ["olmv2-webhook", project::API_SERVICE] {
        assert!(secrets.get_opt(&format!("{service}-generated-tls")).await.unwrap().is_some(), "{service}'s Secret");
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_install_plan_whose_create_answer_is_lost_is_not_made_twice() {
    let harness = Harness::start_faulty("faults", "lost-plan", &["ops", "olm"], Duration::from_secs(2), none()).await;
    // The first InstallPlan write (its create) is stored, and its answer lost.
    let lost = WriteFaults {
        user: CONTROLLER_USER.into(),
        fraction: 1.0,
        resources: vec!["installplans".into()],
        kinds: vec![Fault::InternalErrorAfterWrite],
        ..WriteFaults::default()
    };
    harness.faults().fail_writes(lost);
    installplans::catalog(&harness).await;
    apply(&harness, installplans::GROUP);
    apply(&harness, &installplans::subscription("Automatic"));
    let start = Instant::now();
    while harness.faults().injected().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(60), "no InstallPlan was written");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    harness.faults().stop_failing_writes();
    let plan = installplans::the_plan(&harness, "pointed at", |_| true).await;
    let name = plan.metadata.name.clone().unwrap();
    let subscription = harness
        .wait_for(&installplans::subscriptions(&harness), "plumbus", "pointing at the plan", |s| {
            s.status.as_ref().and_then(|s| s.install_plan_ref.as_ref()).is_some()
        })
        .await;
    let reference = subscription.status.unwrap().install_plan_ref.unwrap();
    assert_eq!(reference.name.as_deref(), Some(name.as_str()), "the Subscription points at the plan made first");
    wait_state(&harness, "plumbus.ops", InstallState::PendingApproval).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let plans = Api::<InstallPlan>::namespaced(harness.admin.clone(), "ops").list(&ListParams::default()).await;
    assert_eq!(names(&plans.unwrap().items), BTreeSet::from([name]), "one InstallPlan, reused rather than made again");
}
