//! The README's main job runs this walkthrough for a newcomer; here it runs against the controllers as `deploy/`
//! sets them up, and what it leaves behind is checked: plumbus installed through its Install, grumbo through an
//! Operator whose status gathers its components.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::Path;
use std::time::Duration;

use crate::support;
use kube::api::Api;
use olmv2::api::v2alpha1::{Install, InstallState, Operator, OperatorState};
use olmv2_e2e::cluster::Kubernetes;
use olmv2_e2e::registry::Registry;
use olmv2_e2e::walkthrough::Rollouts;
use support::emulator::kubectl::text;
use support::harness::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_walkthrough_installs_plumbus_and_the_grumbo_operator() {
    let registry = Registry::start("walkthrough-test").expect("docker-registry starts");
    let host = registry.host.clone();
    let harness = Harness::start_configured(
        "walkthrough",
        "run",
        &[],
        Duration::from_secs(2),
        Box::new(move |options, _| options.registry.insecure_registries.push(host.clone())),
    )
    .await;
    let bundles = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundles");
    // On real Kubernetes its Deployment and ReplicaSet controllers roll out, from pods a stand-in kubelet runs.
    let rollouts = match harness.kubernetes() {
        Kubernetes::Emulator => Rollouts::Reported,
        Kubernetes::Real => {
            harness.plane.run_pods("operators").await.expect("a stand-in kubelet");
            Rollouts::ByTheCluster
        }
    };
    let _registry = olmv2_e2e::walkthrough::run(harness.admin.clone(), &bundles, registry, rollouts, None)
        .await
        .expect("walkthrough");

    let plumbus = Api::<Install>::all(harness.admin.clone()).get("plumbus").await.unwrap();
    assert_eq!(plumbus.status.unwrap().state, Some(InstallState::Installed));
    let grumbo = Api::<Operator>::all(harness.admin.clone()).get("grumbo").await.unwrap();
    let status = grumbo.status.unwrap();
    assert_eq!(status.state, Some(OperatorState::Installed));
    let kinds: Vec<String> = status.components.unwrap().refs.into_iter().map(|r| r.kind).collect();
    for kind in ["Install", "ClusterServiceVersion", "Deployment", "CustomResourceDefinition"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} among {kinds:?}");
    }
    let listed = text(&harness.admin_kubectl(&["get", "operators"], None));
    assert!(listed.contains("grumbo") && listed.contains("Installed"), "{listed}");
}
