//! The leader killed mid-apply, again and again: two replicas of the controllers with leader election (in-process,
//! as `deploy/`'s identity) on the test control plane; each round an admin creates and approves an Install of 20
//! ConfigMaps (each ConfigMap write slowed to 40 ms by a webhook, so an apply takes a while), the leader is killed
//! (dropped where it is, its Lease not released) after a random number of them, the standby takes over, and a new
//! standby starts. Each round checks the Install ends Installed with its 20 ConfigMaps, once each, and one grant;
//! it prints how long the takeover and the convergence took, and the medians and maxima over the rounds.
//!
//! Run with `cargo bench -p olmv2-e2e --bench failover`. Environment: `OLMV2_BENCH_KILLS` rounds [20],
//! `OLMV2_BENCH_LEASE_SECONDS` the Lease duration [15, `deploy/`'s], `OLMV2_BENCH_SEED` the kill points' seed [the
//! clock].

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

#[path = "support/plane.rs"]
mod plane;
#[path = "support/scale.rs"]
mod scale;
#[path = "../apiserver/tests/conformance/support/workloads.rs"]
mod workloads;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube_emulator::ControlPlane;
use olmv2::api::v2alpha1::{Install, InstallState};
use olmv2::controller::leader::LeaderOptions;
use olmv2::process::Controllers;
use olmv2_e2e::project;
use scale::env_number;
use serde_json::json;

const CONFIG_MAPS: usize = 20;

async fn replica(plane: &ControlPlane, dir: &std::path::Path, identity: &str, lease_seconds: u64) -> Controllers {
    let config = project::controller_config(plane).await.expect("controller identity");
    let mut options = project::controller_options(Vec::new(), dir.join(identity), Duration::from_secs(60));
    options.leader = LeaderOptions {
        enabled: true,
        identity: Some(identity.to_owned()),
        lease_seconds,
        grace_seconds: (lease_seconds / 3).max(1),
        ..LeaderOptions::default()
    };
    project::start_controllers(plane, config, options).await.expect("replica starts")
}

async fn holder(admin: &kube::Client) -> Option<String> {
    let leases = Api::<Lease>::namespaced(admin.clone(), project::CONTROLLER_NAMESPACE);
    leases.get_opt("olmv2-controller").await.unwrap().and_then(|lease| lease.spec?.holder_identity)
}

async fn wait<F: std::future::Future<Output = bool>>(what: &str, limit: Duration, mut done: impl FnMut() -> F) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < limit, "{what} not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn applied(admin: &kube::Client, prefix: &str) -> usize {
    let listed = Api::<ConfigMap>::namespaced(admin.clone(), "operators").list(&ListParams::default()).await.unwrap();
    listed.items.iter().filter(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with(prefix))).count()
}

async fn state(installs: &Api<Install>, name: &str) -> Option<InstallState> {
    installs.get_opt(name).await.unwrap().and_then(|i| i.status.and_then(|s| s.state))
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds = env_number("OLMV2_BENCH_KILLS", 20) as usize;
    let lease_seconds = env_number("OLMV2_BENCH_LEASE_SECONDS", 15);
    let clock = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut seed = env_number("OLMV2_BENCH_SEED", clock);
    println!("failover: {rounds} rounds, Lease {lease_seconds} s, seed {seed}");

    // The test control plane: its ConfigMap writes are slowed (a fault only it injects) so that a kill lands
    // mid-apply.
    let options = kube_emulator::Options { bookmark_interval: Duration::from_millis(300), ..Default::default() };
    let plane = ControlPlane::start(options).await.expect("control plane starts");
    project::install_crds(&plane).await.expect("CRDs");
    let operators = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "operators"}});
    project::create(&plane, &operators).await.expect("namespace operators");
    let _slow = workloads::slow_configmap_writes(&plane).await;
    let admin = plane.client().await.expect("admin");
    let installs = Api::<Install>::all(admin.clone());
    let dir = std::env::temp_dir().join(format!("olmv2-failover-bench-{}", std::process::id()));

    let mut leader = replica(&plane, &dir, "replica-0", lease_seconds).await;
    wait("replica-0 leading", Duration::from_secs(60), || async {
        holder(&admin).await.as_deref() == Some("replica-0")
    })
    .await;
    let mut standby = replica(&plane, &dir, "replica-1", lease_seconds).await;
    let (mut takeovers, mut convergences) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let name = format!("settings-{round}");
        let raw: String = (0..CONFIG_MAPS)
            .map(|i| {
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-{i:02}\ndata:\n  index: \"{i}\"\n---\n"
                )
            })
            .collect();
        let install = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": name},
            "spec": {"namespaces": [{"from": "default", "to": "operators"}], "content": [{"type": "Raw", "raw": raw}]}});
        installs.create(&PostParams::default(), &serde_json::from_value(install).unwrap()).await.unwrap();
        wait("pending approval", Duration::from_secs(60), || async {
            state(&installs, &name).await == Some(InstallState::PendingApproval)
        })
        .await;
        let approve = json!({"spec": {"approval": "Approved"}});
        installs.patch(&name, &PatchParams::default(), &Patch::Merge(&approve)).await.unwrap();
        // splitmix64 step: the kill point of this round, 0 (before any ConfigMap) to 19.
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let kill_at = ((seed ^ (seed >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 40) as usize % CONFIG_MAPS;
        let prefix = format!("{name}-");
        wait("the leader applying", Duration::from_secs(60), || async { applied(&admin, &prefix).await >= kill_at })
            .await;
        let killed = Instant::now();
        drop(leader);
        let next = format!("replica-{}", round + 1);
        wait("the takeover", Duration::from_secs(lease_seconds * 4), || async {
            holder(&admin).await.as_deref() == Some(next.as_str())
        })
        .await;
        let taken = killed.elapsed();
        wait("the Install installed", Duration::from_secs(120), || async {
            state(&installs, &name).await == Some(InstallState::Installed)
        })
        .await;
        let converged = killed.elapsed();
        let count = applied(&admin, &prefix).await;
        let roles = Api::<Role>::namespaced(admin.clone(), "operators").list(&ListParams::default()).await.unwrap();
        let grants = roles
            .items
            .iter()
            .filter(|r| r.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("olmv2-install-{name}-"))))
            .count();
        assert_eq!((count, grants), (CONFIG_MAPS, 1), "round {round}: ConfigMaps and grants after the takeover");
        println!(
            "round {round:2}: killed after {kill_at:2} of {CONFIG_MAPS} ConfigMaps; {next} took over in {taken:.1?}, \
             Installed {converged:.1?} after the kill; {count} ConfigMaps, {grants} grant"
        );
        takeovers.push(taken);
        convergences.push(converged);
        leader = standby;
        standby = replica(&plane, &dir, &format!("replica-{}", round + 2), lease_seconds).await;
    }
    let max = |values: &[Duration]| values.iter().max().copied().unwrap_or_default();
    println!(
        "{rounds} kills, none lost or duplicated: takeover median {:.1?} max {:.1?} (Lease {lease_seconds} s); \
         Installed after the kill median {:.1?} max {:.1?}",
        median(&mut takeovers.clone()),
        max(&takeovers),
        median(&mut convergences.clone()),
        max(&convergences)
    );
    drop(standby);
    drop(leader);
    let _ = std::fs::remove_dir_all(dir);
}
