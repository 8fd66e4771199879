//! OLM v0 as the oracle of the legacy loops: the same objects applied to a real cluster that OLM v0's own `olm`
//! operator (and its own CRDs) manages, and to one this project's controllers manage; what each produced is compared
//! after normalising only what must differ (uids, resourceVersions, timestamps: each normalisation says why). A
//! difference fails the test unless `docs/legacy.md` lists it as deliberate.
//!
//! Runs on real Kubernetes only (`scripts/install-olm` builds OLM v0), one scenario at a time: OLM v0 serves on port
//! 8080, which no flag moves.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ListParams, Patch, PatchParams};
use olmv2::api::v1::OperatorGroup;
use olmv2_e2e::cluster::{Cluster, Crds, Kubernetes};
use olmv2_e2e::olm_v0::{OlmV0, OlmV0Binaries};
use olmv2_e2e::project;
use olmv2_e2e::real::ServicePorts;
use serde_json::{json, Value};

/// One scenario at a time on the machine (OLM v0's fixed port).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Which controllers manage a cluster of the comparison.
enum Manager {
    OlmV0(#[allow(dead_code)] OlmV0),
    Project(#[allow(dead_code)] olmv2::process::Controllers),
}

/// A real cluster managed by OLM v0, or by this project.
async fn cluster(olm_v0: bool, name: &str) -> (Cluster, Manager) {
    if olm_v0 {
        let binaries = OlmV0Binaries::find().expect("scripts/install-olm built OLM v0");
        let cluster = Cluster::start_with_crds(Kubernetes::Real, name, &Crds::Files(binaries.crds.clone()))
            .await
            .expect("the cluster starts");
        let olm = OlmV0::start(cluster.real().unwrap(), &binaries).expect("OLM v0 starts");
        (cluster, Manager::OlmV0(olm))
    } else {
        let cluster = Cluster::start(Kubernetes::Real, name).await.expect("the cluster starts");
        let cache = std::env::temp_dir().join(format!("olmv2-oracle-cache-{}", std::process::id()));
        let options = project::controller_options(Vec::new(), cache, Duration::from_secs(5));
        let ports = ServicePorts::free().expect("free ports");
        let controllers = cluster.start_controllers(options, &ports).await.expect("controllers start");
        (cluster, Manager::Project(controllers))
    }
}

async fn apply(cluster: &Cluster, yaml: &str) {
    let admin = cluster.client().await.unwrap();
    for document in serde_yaml_ng::Deserializer::from_str(yaml) {
        let object: Value = serde::Deserialize::deserialize(document).unwrap();
        let api = olmv2_e2e::real::api_for(&admin, &object).await.unwrap();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        api.patch(&name, &PatchParams::apply("oracle").force(), &Patch::Apply(&object)).await.unwrap();
    }
}

const OPERATOR_GROUPS: &str = "
apiVersion: v1
kind: Namespace
metadata: {name: ops}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: v1
kind: Namespace
metadata: {name: everywhere}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: og, namespace: ops}
spec:
  targetNamespaces: [team-a, team-b]
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: global, namespace: everywhere}
";

/// `value` with the uids of `uids` (uid → name) replaced by `<uid of name>`: uids differ between clusters.
fn without_uids(value: &Value, uids: &BTreeMap<String, String>) -> Value {
    let mut text = value.to_string();
    for (uid, name) in uids {
        text = text.replace(uid.as_str(), &format!("<uid of {name}>"));
    }
    serde_json::from_str(&text).unwrap()
}

/// What the OperatorGroup loops produced: each group's status and annotations, the OperatorGroup labels of every
/// namespace, and the `olm.og.*` ClusterRoles (name, labels, aggregation, rules).
async fn observe_operator_groups(cluster: &Cluster) -> Value {
    let admin = cluster.client().await.unwrap();
    let groups = Api::<OperatorGroup>::all(admin.clone()).list(&ListParams::default()).await.unwrap().items;
    let uids: BTreeMap<String, String> = groups
        .iter()
        .map(|g| {
            (
                g.metadata.uid.clone().unwrap(),
                format!("{}/{}", g.metadata.namespace.clone().unwrap(), g.metadata.name.clone().unwrap()),
            )
        })
        .collect();
    let mut observed = json!({});
    for group in &groups {
        let key = format!(
            "OperatorGroup {}/{}",
            group.metadata.namespace.as_deref().unwrap(),
            group.metadata.name.as_deref().unwrap()
        );
        let mut namespaces = group.status.as_ref().map(|s| s.namespaces.clone()).unwrap_or_default();
        namespaces.sort();
        // lastUpdated is a timestamp: left out.
        observed[key] = json!({"status.namespaces": namespaces, "annotations": group.metadata.annotations, "labels": group.metadata.labels});
    }
    for namespace in Api::<Namespace>::all(admin.clone()).list(&ListParams::default()).await.unwrap().items {
        let labels: BTreeMap<String, String> = namespace
            .metadata
            .labels
            .unwrap_or_default()
            .into_iter()
            .filter(|(key, _)| key.starts_with("olm.operatorgroup"))
            .collect();
        if !labels.is_empty() {
            observed[format!("Namespace {}", namespace.metadata.name.unwrap())] = json!(labels);
        }
    }
    for role in Api::<ClusterRole>::all(admin).list(&ListParams::default()).await.unwrap().items {
        let name = role.metadata.name.clone().unwrap();
        if name.starts_with("olm.og.") {
            observed[format!("ClusterRole {name}")] =
                json!({"labels": role.metadata.labels, "aggregationRule": role.aggregation_rule, "rules": role.rules});
        }
    }
    without_uids(&observed, &uids)
}

/// Polls `observe` until it answers the same twice, 2 s apart (the loops settled), for at most 60 s.
async fn settled(cluster: &Cluster) -> Value {
    let started = Instant::now();
    let mut last = observe_operator_groups(cluster).await;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = observe_operator_groups(cluster).await;
        let ready = now.as_object().is_some_and(|o| o.keys().any(|k| k.starts_with("ClusterRole")));
        if now == last && ready {
            return now;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "never settled: {now:#}");
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_groups_are_reconciled_as_olm_v0_does() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut observed = Vec::new();
    for olm_v0 in [true, false] {
        let (cluster, manager) = cluster(olm_v0, if olm_v0 { "oracle-olm-v0" } else { "oracle-olmv2" }).await;
        apply(&cluster, OPERATOR_GROUPS).await;
        observed.push(settled(&cluster).await);
        drop(manager);
    }
    let (olm_v0, ours) = (&observed[0], &observed[1]);
    assert_eq!(ours, olm_v0, "ours:\n{ours:#}\nOLM v0:\n{olm_v0:#}");
}
