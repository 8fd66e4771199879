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

/// A CSV run by ServiceAccount `plumbus` (whose Role its InstallPlan would have made; the account itself only when
/// `account`), owning a CRD, supporting `modes`, in OperatorGroup `og` of `ops` with spec `group`.
fn csv_scenario(group: &str, modes: &str, account: bool) -> String {
    let account = if account {
        "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: plumbus, namespace: ops}\n"
    } else {
        ""
    };
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: ops}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: team-a}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: plumbuses.example.com}}
spec:
  group: example.com
  names: {{plural: plumbuses, singular: plumbus, kind: Plumbus, listKind: PlumbusList}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
{account}---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: plumbus, namespace: ops}}
rules: [{{apiGroups: [""], resources: [configmaps], verbs: [get, list]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: plumbus, namespace: ops}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: plumbus}}
subjects: [{{kind: ServiceAccount, name: plumbus, namespace: ops}}]
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {{name: og, namespace: ops}}
spec: {group}
---
apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: plumbus.v1.0.0
  namespace: ops
  annotations: {{capabilities: Basic Install}}
spec:
  displayName: Plumbus
  version: 1.0.0
  installModes: [{modes}]
  customresourcedefinitions:
    owned: [{{name: plumbuses.example.com, version: v1, kind: Plumbus}}]
  install:
    strategy: deployment
    spec:
      permissions:
      - serviceAccountName: plumbus
        rules: [{{apiGroups: [""], resources: [configmaps], verbs: [get, list]}}]
      deployments:
      - name: plumbus-operator
        spec:
          selector: {{matchLabels: {{app: plumbus}}}}
          template:
            metadata: {{labels: {{app: plumbus}}}}
            spec:
              serviceAccountName: plumbus
              containers: [{{name: manager, image: "example.com/plumbus:1.0.0"}}]
"#
    )
}

/// Every install mode supported.
const ALL_MODES: &str = "{type: OwnNamespace, supported: true}, {type: SingleNamespace, supported: true}, {type: MultiNamespace, supported: false}, {type: AllNamespaces, supported: true}";

/// `object`'s labels and annotations, but kubectl's and those `docs/legacy.md` lists as deliberate differences (CSVs,
/// "Differences"): the `olm.api.*` labels (OLM v0's labeler never writes them), the CSV author record
/// (`v2alpha1.operators.coreos.com/creator`, the author checks), and the value of `olm.deployment-spec-hash` (a hash
/// of its own, as OLM's hashes Go's encoding of its structs).
fn marks(meta: &kube::api::ObjectMeta) -> Value {
    let annotations: BTreeMap<String, String> = meta
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| key != "kubectl.kubernetes.io/last-applied-configuration")
        .filter(|(key, _)| key != olmv2::api::v2alpha1::CREATOR_ANNOTATION)
        .collect();
    let labels: Option<BTreeMap<String, String>> = meta.labels.clone().map(|labels| {
        labels
            .into_iter()
            .filter(|(key, _)| !key.starts_with("olm.api."))
            .map(|(key, value)| if key == "olm.deployment-spec-hash" { (key, "<hash>".into()) } else { (key, value) })
            .collect()
    });
    let labels = labels.filter(|labels| !labels.is_empty());
    json!({"labels": labels, "annotations": annotations})
}

/// A CSV's `status.requirementStatus` with its ServiceAccount entries sorted by name: OLM v0 appends them from a Go
/// map (`permissionStatus`), in an order that differs from run to run (seen: a CSV with two accounts listed them in
/// both orders in two runs); the project sorts them by name (`docs/legacy.md`, CSVs, requirements). The other
/// entries keep their order, which is compared.
fn requirements(entries: &Value) -> Value {
    let Some(entries) = entries.as_array() else { return entries.clone() };
    let (mut accounts, others): (Vec<&Value>, Vec<&Value>) =
        entries.iter().partition(|entry| entry["kind"] == "ServiceAccount");
    accounts.sort_by_key(|entry| entry["name"].as_str().unwrap_or_default().to_owned());
    json!(others.into_iter().chain(accounts).collect::<Vec<_>>())
}

/// What the CSV loops produced: the CSV's status (phase, reason, message, the phases it went through and its
/// requirements; times left out), its labels and annotations, its copies, its Deployment as rendered, the group's
/// provided APIs, and the provided API's ClusterRoles.
async fn observe_csv(cluster: &Cluster) -> Value {
    use k8s_openapi::api::apps::v1::Deployment;
    use olmv2::api::v1alpha1::ClusterServiceVersion;
    let admin = cluster.client().await.unwrap();
    let mut uids = BTreeMap::new();
    let mut observed = json!({});
    let crds = Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(
        admin.clone(),
    );
    for crd in crds.list(&ListParams::default()).await.unwrap().items {
        uids.insert(crd.metadata.uid.clone().unwrap(), format!("CRD {}", crd.metadata.name.clone().unwrap()));
    }
    let csvs = Api::<ClusterServiceVersion>::all(admin.clone()).list(&ListParams::default()).await.unwrap().items;
    for csv in &csvs {
        let namespace = csv.metadata.namespace.clone().unwrap();
        if namespace == project::CONTROLLER_NAMESPACE {
            // The controller's own namespace, which the cluster managed by OLM v0 does not have.
            continue;
        }
        uids.insert(
            csv.metadata.uid.clone().unwrap(),
            format!("CSV {namespace}/{}", csv.metadata.name.clone().unwrap()),
        );
        let status = serde_json::to_value(&csv.status).unwrap();
        // Whether a pass looked while the Deployment was still rolling out (`InstallWaiting`) is timing, not
        // behaviour: those entries of the history are left out on both sides.
        let conditions: Vec<Value> = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["reason"] != "InstallWaiting")
            .map(|c| json!({"phase": c["phase"], "reason": c["reason"], "message": c["message"]}))
            .collect();
        observed[format!("CSV {namespace}/{}", csv.metadata.name.clone().unwrap())] = json!({
            "phase": status["phase"], "reason": status["reason"], "message": status["message"],
            "conditions": conditions, "requirementStatus": requirements(&status["requirementStatus"]), "marks": marks(&csv.metadata),
        });
    }
    for group in Api::<OperatorGroup>::all(admin.clone()).list(&ListParams::default()).await.unwrap().items {
        uids.insert(group.metadata.uid.clone().unwrap(), "OperatorGroup".into());
        observed["OperatorGroup ops/og"] = marks(&group.metadata);
    }
    for deployment in
        Api::<Deployment>::namespaced(admin.clone(), "ops").list(&ListParams::default()).await.unwrap().items
    {
        let spec = serde_json::to_value(&deployment.spec).unwrap();
        observed[format!("Deployment ops/{}", deployment.metadata.name.clone().unwrap())] = json!({
            "marks": marks(&deployment.metadata), "template": spec["template"], "selector": spec["selector"],
            "replicas": spec["replicas"], "strategy": spec["strategy"],
        });
    }
    // The RBAC the CSV loop made for the CSV in its target namespaces (labelled as owned by it).
    let owned = ListParams::default().labels("olm.owner=plumbus.v1.0.0");
    for role in Api::<k8s_openapi::api::rbac::v1::Role>::all(admin.clone()).list(&owned).await.unwrap().items {
        let key = format!("Role {}/{}", role.metadata.namespace.clone().unwrap(), role.metadata.name.clone().unwrap());
        observed[key] = json!({"marks": marks(&role.metadata), "rules": role.rules});
    }
    let bindings = Api::<k8s_openapi::api::rbac::v1::RoleBinding>::all(admin.clone()).list(&owned).await.unwrap();
    for binding in bindings.items {
        let namespace = binding.metadata.namespace.clone().unwrap();
        let key = format!("RoleBinding {namespace}/{}", binding.metadata.name.clone().unwrap());
        observed[key] =
            json!({"marks": marks(&binding.metadata), "roleRef": binding.role_ref, "subjects": binding.subjects});
    }
    let configs = Api::<olmv2::api::v1::OLMConfig>::all(admin.clone());
    if let Some(config) = configs.get_opt("cluster").await.unwrap() {
        let status = serde_json::to_value(&config.status).unwrap();
        let conditions: Vec<Value> = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| json!({"type": c["type"], "status": c["status"], "reason": c["reason"], "message": c["message"]}))
            .collect();
        observed["OLMConfig cluster"] = json!({"conditions": conditions});
    }
    // The per-API ClusterRoles of the CRDs the CSVs own (`<crd>-<version>-admin` and the like).
    let owned_crds: Vec<String> = csvs
        .iter()
        .filter(|csv| csv.metadata.namespace.as_deref() != Some(project::CONTROLLER_NAMESPACE))
        .flat_map(|csv| csv.spec.custom_resource_definitions.iter().flat_map(|crds| crds.owned.iter()))
        .map(|crd| format!("{}-", crd.name))
        .collect();
    for role in Api::<ClusterRole>::all(admin).list(&ListParams::default()).await.unwrap().items {
        let name = role.metadata.name.clone().unwrap();
        if owned_crds.iter().any(|crd| name.starts_with(crd.as_str())) {
            observed[format!("ClusterRole {name}")] =
                json!({"marks": marks(&role.metadata), "aggregationRule": role.aggregation_rule, "rules": role.rules});
        }
    }
    without_uids(&observed, &uids)
}

/// What a scenario observes, and when it is ready to compare.
#[derive(Clone, Copy)]
enum Scenario {
    OperatorGroups,
    /// The groups, once group `ops/og` is gone.
    GroupDeleted,
    /// Ready once the CSV `ops/plumbus.v1.0.0` is in this phase.
    Csv(&'static str),
    /// Ready once `ops/plumbus.v2.0.0` Succeeded and the CSV it replaces is gone.
    Replaced,
    /// Ready once `ops/plumbus.v1.0.0` is Succeeded again, having left Succeeded once.
    SucceededAgain,
    /// Ready once `ops/plumbus.v1.0.0` has left Succeeded.
    LeftSucceeded,
    /// Ready once `ops/plumbus.v1.0.0` is Succeeded and `ops2/twin.v1.0.0` in this phase.
    Twin(&'static str),
    /// Ready once this many CSVs are in `ops`, each in this phase.
    Bundles(usize, &'static str),
}

impl Scenario {
    async fn observe(self, cluster: &Cluster) -> Value {
        match self {
            Self::OperatorGroups | Self::GroupDeleted => observe_operator_groups(cluster).await,
            Self::Csv(_)
            | Self::Replaced
            | Self::SucceededAgain
            | Self::LeftSucceeded
            | Self::Twin(_)
            | Self::Bundles(..) => observe_csv(cluster).await,
        }
    }

    fn ready(self, observed: &Value) -> bool {
        match self {
            // Every group's roles made: the manager has reconciled each group, not only the first it came to.
            Self::OperatorGroups => observed.as_object().is_some_and(|o| {
                let groups = o.keys().filter_map(|k| k.strip_prefix("OperatorGroup ")?.split_once('/'));
                let mut groups = groups.peekable();
                groups.peek().is_some()
                    && groups.all(|(_, name)| o.keys().any(|k| k.starts_with(&format!("ClusterRole olm.og.{name}."))))
            }),
            Self::GroupDeleted => observed["OperatorGroup ops/og"].is_null(),
            Self::Csv(phase) => observed["CSV ops/plumbus.v1.0.0"]["phase"] == phase,
            Self::LeftSucceeded => {
                let phase = &observed["CSV ops/plumbus.v1.0.0"]["phase"];
                !phase.is_null() && phase != "Succeeded"
            }
            Self::SucceededAgain => {
                let csv = &observed["CSV ops/plumbus.v1.0.0"];
                let succeeded =
                    csv["conditions"].as_array().into_iter().flatten().filter(|c| c["phase"] == "Succeeded");
                csv["phase"] == "Succeeded" && succeeded.count() >= 2
            }
            Self::Replaced => {
                observed["CSV ops/plumbus.v2.0.0"]["phase"] == "Succeeded"
                    && observed["CSV ops/plumbus.v1.0.0"].is_null()
            }
            Self::Twin(phase) => {
                observed["CSV ops/plumbus.v1.0.0"]["phase"] == "Succeeded"
                    && observed["CSV ops2/twin.v1.0.0"]["phase"] == phase
            }
            Self::Bundles(count, phase) => {
                let in_ops: Vec<&Value> = observed
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(key, _)| key.starts_with("CSV ops/"))
                    .map(|(_, csv)| csv)
                    .collect();
                in_ops.len() == count && in_ops.iter().all(|csv| csv["phase"] == phase)
            }
        }
    }
}

/// Polls `scenario`'s observation until it is ready and answers the same twice, 2 s apart (the loops settled), for
/// at most 90 s; the namespaces `rolled_out` get their Deployments available meanwhile.
async fn settled(cluster: &Cluster, scenario: Scenario, rolled_out: &[&str]) -> Value {
    let started = Instant::now();
    let mut last = Value::Null;
    loop {
        for namespace in rolled_out {
            cluster.run_pods(namespace).await.unwrap();
        }
        let now = scenario.observe(cluster).await;
        if now == last && scenario.ready(&now) {
            return now;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "never settled: {now:#}");
        last = now;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Applies `objects` to a cluster of OLM v0's and to one of this project's, and compares what each settled on.
async fn compare(name: &str, objects: &str, scenario: Scenario, rolled_out: &[&str]) {
    compare_stages(name, &[(objects, scenario)], rolled_out).await;
}

/// As [`compare`], in stages: each stage's objects applied once the previous stage settled; the last compared.
async fn compare_stages(name: &str, stages: &[(&str, Scenario)], rolled_out: &[&str]) {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut observed = Vec::new();
    for olm_v0 in [true, false] {
        let (cluster, manager) =
            cluster(olm_v0, &format!("oracle-{name}-{}", if olm_v0 { "olm-v0" } else { "olmv2" })).await;
        let mut last = Value::Null;
        for (objects, scenario) in stages {
            apply(&cluster, objects).await;
            last = settled(&cluster, *scenario, rolled_out).await;
        }
        observed.push(last);
        drop(manager);
    }
    let (olm_v0, ours) = (&observed[0], &observed[1]);
    assert_eq!(ours, olm_v0, "ours:\n{ours:#}\nOLM v0:\n{olm_v0:#}");
}

/// As [`compare`], with `act` done to each cluster once `objects` settled as `first` (its Deployments of
/// `rolled_out` available), then compared once settled as `then` (those of `rolled_out_then`). Answers OLM v0's
/// observation.
async fn compare_after(
    name: &str,
    objects: &str,
    (first, rolled_out): (Scenario, &[&str]),
    act: impl AsyncFn(&Cluster),
    (then, rolled_out_then): (Scenario, &[&str]),
) -> Value {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut observed = Vec::new();
    for olm_v0 in [true, false] {
        let (cluster, manager) =
            cluster(olm_v0, &format!("oracle-{name}-{}", if olm_v0 { "olm-v0" } else { "olmv2" })).await;
        apply(&cluster, objects).await;
        settled(&cluster, first, rolled_out).await;
        act(&cluster).await;
        observed.push(settled(&cluster, then, rolled_out_then).await);
        drop(manager);
    }
    let (olm_v0, ours) = (&observed[0], &observed[1]);
    assert_eq!(ours, olm_v0, "ours:\n{ours:#}\nOLM v0:\n{olm_v0:#}");
    observed.swap_remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_groups_are_reconciled_as_olm_v0_does() {
    compare("groups", OPERATOR_GROUPS, Scenario::OperatorGroups, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_groups_roles_and_namespace_labels_go_as_olm_v0_removes_them() {
    let delete = async |cluster: &Cluster| {
        let admin = cluster.client().await.unwrap();
        Api::<OperatorGroup>::namespaced(admin, "ops").delete("og", &Default::default()).await.unwrap();
    };
    let groups = (Scenario::OperatorGroups, &[][..]);
    let olm_v0 = compare_after("group-deleted", OPERATOR_GROUPS, groups, delete, (Scenario::GroupDeleted, &[])).await;
    let left: Vec<&String> = olm_v0.as_object().unwrap().keys().filter(|key| key.contains("olm.og.og.")).collect();
    assert!(left.is_empty(), "OLM v0 removed them: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_succeeded_csv_whose_deployment_goes_fails_and_installs_again_as_olm_v0_does() {
    use k8s_openapi::api::apps::v1::Deployment;
    let delete = async |cluster: &Cluster| {
        let admin = cluster.client().await.unwrap();
        Api::<Deployment>::namespaced(admin, "ops").delete("plumbus-operator", &Default::default()).await.unwrap();
    };
    let objects = csv_scenario("{}", ALL_MODES, true);
    let (succeeded, again) = ((Scenario::Csv("Succeeded"), &["ops"][..]), (Scenario::SucceededAgain, &["ops"][..]));
    compare_after("reinstall", &objects, succeeded, delete, again).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_succeeded_csv_whose_deployment_becomes_unavailable_fails_as_olm_v0_fails_it() {
    use k8s_openapi::api::core::v1::Pod;
    // The node goes: its pods are replaced by ones that never become ready.
    let unready = async |cluster: &Cluster| {
        cluster.stop_pods("ops");
        let pods = Api::<Pod>::namespaced(cluster.client().await.unwrap(), "ops");
        pods.delete_collection(&Default::default(), &ListParams::default()).await.unwrap();
    };
    let objects = csv_scenario("{}", ALL_MODES, true);
    let succeeded = (Scenario::Csv("Succeeded"), &["ops"][..]);
    compare_after("unavailable", &objects, succeeded, unready, (Scenario::LeftSucceeded, &[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_in_a_global_group_is_installed_and_copied_as_olm_v0_does() {
    compare("csv", &csv_scenario("{}", ALL_MODES, true), Scenario::Csv("Succeeded"), &["ops"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copied_csvs_turned_off_by_the_olmconfig_are_not_made_as_olm_v0_makes_none() {
    let off = "apiVersion: operators.coreos.com/v1\nkind: OLMConfig\nmetadata: {name: cluster}\n\
               spec: {features: {disableCopiedCSVs: true}}\n---\n";
    let objects = format!("{off}{}", csv_scenario("{}", ALL_MODES, true));
    compare("copies-off", &objects, Scenario::Csv("Succeeded"), &["ops"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_replacing_another_along_spec_replaces_takes_over_as_olm_v0_makes_it() {
    let first = csv_scenario("{}", ALL_MODES, true);
    let next = "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\n\
                metadata: {name: plumbus.v2.0.0, namespace: ops, annotations: {capabilities: Basic Install}}\n"
        .to_owned()
        + &first[first.find("spec:\n  displayName").unwrap()..]
            .replace("version: 1.0.0", "version: 2.0.0\n  replaces: plumbus.v1.0.0")
            .replace("plumbus:1.0.0", "plumbus:2.0.0");
    let stages = [(first.as_str(), Scenario::Csv("Succeeded")), (next.as_str(), Scenario::Replaced)];
    compare_stages("replaces", &stages, &["ops"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_in_a_multi_namespace_group_is_installed_and_copied_to_its_targets_as_olm_v0_does() {
    let modes = "{type: OwnNamespace, supported: false}, {type: SingleNamespace, supported: true}, \
                 {type: MultiNamespace, supported: true}, {type: AllNamespaces, supported: false}";
    let team_b = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n";
    let objects = csv_scenario("{targetNamespaces: [team-a, team-b]}", modes, true).replacen(
        "---\napiVersion: apiextensions.k8s.io/v1",
        &format!("{team_b}---\napiVersion: apiextensions.k8s.io/v1"),
        1,
    );
    compare("multi-namespace", &objects, Scenario::Csv("Succeeded"), &["ops"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_in_a_group_targeting_its_own_namespace_is_installed_as_olm_v0_does() {
    let own = csv_scenario("{targetNamespaces: [ops]}", ALL_MODES, true);
    compare("own-namespace", &own, Scenario::Csv("Succeeded"), &["ops"]).await;
}

/// A group whose selector matches no namespace names no targets, so its CSV is given none (not `""`, which would
/// read as all namespaces) and fails with `NoTargetNamespaces`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_in_a_group_selecting_no_namespace_fails_as_olm_v0_fails_it() {
    let nothing = csv_scenario("{selector: {matchLabels: {team: z}}}", ALL_MODES, true);
    compare("no-targets", &nothing, Scenario::Csv("Failed"), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_not_supporting_its_groups_install_mode_fails_as_olm_v0_fails_it() {
    let own_only = "{type: OwnNamespace, supported: true}, {type: AllNamespaces, supported: false}";
    compare("unsupported-mode", &csv_scenario("{}", own_only, true), Scenario::Csv("Failed"), &["ops"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_whose_account_is_missing_waits_pending_as_olm_v0_keeps_it() {
    let missing = csv_scenario("{}", ALL_MODES, false);
    compare("missing-account", &missing, Scenario::Csv("Pending"), &["ops"]).await;
}

/// Groups choosing their targets by label: one selecting two labelled namespaces (and not a third), one selecting
/// none; the `status.namespaces`, namespace labels and `olm.og.*` ClusterRoles OLM v0 settles on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_groups_choosing_namespaces_by_selector_are_reconciled_as_olm_v0_does() {
    let objects = "
apiVersion: v1
kind: Namespace
metadata: {name: ops}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-c, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {team: b}}
---
apiVersion: v1
kind: Namespace
metadata: {name: lonely}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: og, namespace: ops}
spec: {selector: {matchLabels: {team: a}}}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: nobody, namespace: lonely}
spec: {selector: {matchExpressions: [{key: team, operator: In, values: [z]}]}}
";
    compare("selectors", objects, Scenario::OperatorGroups, &[]).await;
}

/// A CSV in a group selecting one labelled namespace by label (SingleNamespace): installed, its RBAC made and its
/// copy put there as OLM v0 does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_in_a_group_selecting_its_targets_by_label_is_installed_as_olm_v0_does() {
    let objects = csv_scenario("{selector: {matchLabels: {team: a}}}", ALL_MODES, true).replacen(
        "metadata: {name: team-a}",
        "metadata: {name: team-a, labels: {team: a}}",
        1,
    );
    compare("selected", &objects, Scenario::Csv("Succeeded"), &["ops"]).await;
}

/// Two global groups whose CSVs own the same CRD: the second CSV meets the first's provided API in an intersecting
/// group and fails as OLM v0 fails it (`InterOperatorGroupOwnerConflict`), the first untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_providing_an_api_an_intersecting_group_provides_fails_as_olm_v0_fails_it() {
    let first = csv_scenario("{}", ALL_MODES, true);
    let twin = first[first.find("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role").unwrap()..]
        .replace("namespace: ops", "namespace: ops2")
        .replace("name: og,", "name: og2,")
        .replace("name: plumbus.v1.0.0", "name: twin.v1.0.0")
        .replace("plumbus-operator", "twin-operator");
    let twin = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: ops2}}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: plumbus, namespace: ops2}}\n{twin}");
    let stages = [(first.as_str(), Scenario::Csv("Succeeded")), (twin.as_str(), Scenario::Twin("Failed"))];
    compare_stages("intersection", &stages, &["ops", "ops2"]).await;
}

/// Real bundles of the community catalog (`../shared/testdata/community-bundles`), chosen for what they bring: many
/// rules (kuadrant-operator, 50), two permission entries for one account (percona-server-mysql-operator), two
/// accounts with cluster permissions (kubevirt-wol), a small one (snapscheduler). All support AllNamespaces and
/// define no webhook or APIService (their certificates would need a serving pod).
const COMMUNITY_BUNDLES: [(&str, &str); 4] = [
    ("kuadrant-operator", "0.11.1"),
    ("percona-server-mysql-operator", "1.2.0"),
    ("kubevirt-wol", "0.0.2"),
    ("snapscheduler", "3.5.0"),
];

/// The community bundles applied by hand as an OLM v0 user applies them (`ops` with a global group, the CRDs, the
/// ServiceAccounts the CSVs name, the CSVs), with or without the RBAC an InstallPlan would have made from each CSV's
/// permissions (a Role and RoleBinding per account, a ClusterRole and ClusterRoleBinding per account of the cluster
/// permissions, each named after the CSV, the account and its place in the list).
fn community_bundles(granted: bool) -> (String, usize) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/community-bundles");
    let mut documents: Vec<Value> = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": "ops"}}),
    ];
    let mut csvs = Vec::new();
    for (bundle, version) in COMMUNITY_BUNDLES {
        let manifests = root.join(bundle).join(version).join("manifests");
        let mut files: Vec<_> = std::fs::read_dir(&manifests).unwrap().map(|entry| entry.unwrap().path()).collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let object: Value = serde_yaml_ng::from_str(&text).unwrap();
            match object["kind"].as_str() {
                Some("CustomResourceDefinition") => documents.push(object),
                Some("ClusterServiceVersion") => csvs.push(object),
                _ => {} // Services, Roles of the bundle: an InstallPlan's business, not the CSV loop's.
            }
        }
    }
    let count = csvs.len();
    for mut csv in csvs {
        csv["metadata"]["namespace"] = json!("ops");
        // percona-server-mysql-operator's says `operators.coreos.com/v1`, a version no cluster serves CSVs at; OLM's
        // bundle tooling decodes it as v1alpha1 whatever it says, as a user applying it by hand would have to.
        csv["apiVersion"] = json!("operators.coreos.com/v1alpha1");
        let name = csv["metadata"]["name"].as_str().unwrap().to_owned();
        let install = &csv["spec"]["install"]["spec"];
        let mut accounts: Vec<String> = install["deployments"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|deployment| deployment["spec"]["template"]["spec"]["serviceAccountName"].as_str())
            .map(str::to_owned)
            .collect();
        for (field, cluster) in [("permissions", false), ("clusterPermissions", true)] {
            for (index, permission) in install[field].as_array().into_iter().flatten().enumerate() {
                let account = permission["serviceAccountName"].as_str().unwrap().to_owned();
                if granted {
                    let role = format!("{name}-{account}-{index}");
                    let (kind, binding) =
                        if cluster { ("ClusterRole", "ClusterRoleBinding") } else { ("Role", "RoleBinding") };
                    let metadata =
                        if cluster { json!({"name": role}) } else { json!({"name": role, "namespace": "ops"}) };
                    documents.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                        "metadata": metadata, "rules": permission["rules"]}));
                    documents.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": binding,
                        "metadata": metadata,
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "ops"}]}));
                }
                accounts.push(account);
            }
        }
        accounts.sort();
        accounts.dedup();
        for account in accounts {
            documents.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": "ops"}}));
        }
        documents.push(csv);
    }
    // JSON is YAML: one document each.
    let yaml = documents.iter().map(|document| document.to_string()).collect::<Vec<_>>().join("\n---\n");
    (yaml, count)
}

/// Real CSVs whose accounts hold none of the permissions they ask for wait in Pending (`RequirementsNotMet`) with
/// the requirement status OLM v0 reports: every CRD, account and rule, in its order and words.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_community_csvs_without_their_permissions_wait_as_olm_v0_keeps_them() {
    let (objects, count) = community_bundles(false);
    compare("community-pending", &objects, Scenario::Bundles(count, "Pending"), &[]).await;
}

/// The same CSVs with their permissions granted: installed as OLM v0 installs them (phases, conditions, Deployments
/// as rendered, copies, the per-API ClusterRoles of every owned CRD, the group's provided APIs).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_community_csvs_granted_their_permissions_are_installed_as_olm_v0_installs_them() {
    let (objects, count) = community_bundles(true);
    compare("community-installed", &objects, Scenario::Bundles(count, "Succeeded"), &["ops"]).await;
}
