//! Operators OLM v0 itself installed (`docs/migration.md`, 'Operators OLM v0 installed'), end to end with the real
//! kubectl and the real `olmv2` binary. The cluster is as OLM v0 leaves it after installing grumbo 1.0.0 from a
//! catalog into `operators`: the CRD, the CSV, its ServiceAccount and RBAC with OLM's owner references and labels
//! (what OLM v0's InstallPlan made, applied here by the admin), the Deployment, lifted or copied Roles and copied
//! CSVs (made by this controller's legacy loops, as OLM's made them), and the Subscription with OLM v0's status.
//! Adopted with `olmv2 migrate plan` then `apply` (stopping at the approval the takeover needs) then
//! `apply --approve`: the Subscription and every copy gone, the Deployment and the CSV kept (the CSV is the
//! Install's record now), the Operator listing the components, what a copy owned passed to the Operator or
//! orphaned, the Roles a group gave it in its targets taken over in place. Upgraded after the switch without
//! migrating, and subscribed again: the InstallPlan's Install takes the CSV's objects over. And nobody but the
//! controller names a CSV for an Install to take over.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::api::{Api, ListParams};
use kube::ResourceExt;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase, Subscription};
use olmv2::api::v2alpha1::{Install, InstallState, Operator, TAKES_OVER_CSV_ANNOTATION, TAKES_OVER_CSV_UID_ANNOTATION};
use olmv2::bundle::names::rbac_name;
use serde_json::{json, Value};

use crate::migration::{apply, bundle_properties, deployment_uid, olmv2, text, GRUMBO_API};
use crate::operator::{has_condition, refs_of_kind};
use crate::support::harness::Harness;

const CSV: &str = "grumbo.v1.0.0";
const NAMESPACES: usize = 50;

fn bundle_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundles/grumbo/1.0.0/manifests").join(name);
    std::fs::read_to_string(path).unwrap()
}

/// OLM v0's non-controlling owner reference to the CSV.
fn owned_by_csv(uid: &str) -> Value {
    json!([{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": CSV, "uid": uid,
        "controller": false, "blockOwnerDeletion": false}])
}

/// What OLM v0's InstallPlan made for grumbo's CSV (uid `uid`) in `operators`: the ServiceAccount, the Role and
/// RoleBinding of its permissions (owned by the CSV), the ClusterRole and ClusterRoleBinding of its cluster
/// permissions (labelled as the CSV's), named as OLM names them.
fn installed_by_olm_v0(csv: &ClusterServiceVersion, uid: &str) -> Vec<Value> {
    let strategy = &csv.spec.install.spec;
    let labels = json!({"olm.owner": CSV, "olm.owner.namespace": "operators",
        "olm.owner.kind": "ClusterServiceVersion", "olm.managed": "true"});
    let subjects = json!([{"kind": "ServiceAccount", "name": "grumbo-operator", "namespace": "operators"}]);
    let role = rbac_name(CSV, &strategy.permissions[0]);
    let cluster_role = rbac_name(CSV, &strategy.cluster_permissions[0]);
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "grumbo-operator",
            "namespace": "operators", "ownerReferences": owned_by_csv(uid)}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": role,
            "namespace": "operators", "ownerReferences": owned_by_csv(uid), "labels": labels},
            "rules": strategy.permissions[0].rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": role,
            "namespace": "operators", "ownerReferences": owned_by_csv(uid), "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}, "subjects": subjects}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": cluster_role, "labels": labels}, "rules": strategy.cluster_permissions[0].rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": cluster_role, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": subjects}),
    ]
}

/// `objects` as one YAML stream: JSON documents between `---` lines are not one (kubectl reads a stream starting
/// with `{` as JSON, and stops at the first separator once the JSON it buffered ends with the first document).
fn manifest(objects: &[Value]) -> String {
    objects.iter().map(|o| serde_yaml_ng::to_string(o).unwrap()).collect::<Vec<_>>().join("---\n")
}

/// The copies of grumbo's CSV, by namespace.
async fn copies(harness: &Harness) -> Vec<ClusterServiceVersion> {
    let all = Api::<ClusterServiceVersion>::all(harness.admin.clone());
    all.list(&ListParams::default().labels("olm.copiedFrom=operators")).await.unwrap().items
}

/// Pushes the catalog OLM v0 installed grumbo from (`catalog:latest`, revision `revision`): grumbo 1.0.0, then each
/// of `later` (`(CSV, image)`) replacing the one before in channel `stable`.
async fn push_catalog(harness: &Harness, revision: usize, later: &[(&str, &str)]) {
    let image = harness.push_bundle("grumbo/1.0.0", "grumbo-bundle", "1.0.0").await;
    let mut entries = vec![json!({"name": CSV})];
    let mut blobs = vec![
        json!({"schema": "olm.package", "name": "grumbo", "defaultChannel": "stable"}),
        json!({"schema": "olm.bundle", "package": "grumbo", "name": CSV, "image": image,
               "properties": bundle_properties("grumbo", "1.0.0", GRUMBO_API)}),
    ];
    let mut previous = CSV.to_owned();
    for (name, image) in later {
        let version = name.trim_start_matches("grumbo.v");
        entries.push(json!({"name": name, "replaces": previous}));
        blobs.push(json!({"schema": "olm.bundle", "package": "grumbo", "name": name, "image": image,
                          "properties": bundle_properties("grumbo", version, GRUMBO_API)}));
        previous = (*name).to_owned();
    }
    blobs.push(json!({"schema": "olm.channel", "package": "grumbo", "name": "stable", "entries": entries}));
    harness.push_catalog(&format!("configs-{revision}"), &blobs).await;
}

/// Grumbo 1.1.0, replacing 1.0.0 with the same objects: pushed as `grumbo-bundle:1.1.0`; answers the image.
async fn push_grumbo_1_1_0(harness: &Harness) -> String {
    let text = |_: &str, text: &str| {
        text.replace("name: grumbo.v1.0.0", "name: grumbo.v1.1.0")
            .replace("version: 1.0.0", "version: 1.1.0\n  replaces: grumbo.v1.0.0")
            .replace("grumbo-operator:v1.0.0", "grumbo-operator:v1.1.0")
    };
    harness.push_rewritten_bundle("grumbo/1.0.0", "grumbo-bundle:1.1.0", text, str::to_owned).await
}

/// The cluster as OLM v0 leaves it after installing grumbo 1.0.0 into `operators` under a group targeting `targets`
/// (every namespace when empty): the
/// CatalogSource and the group, the CRD, the CSV (with the package property OLM writes) and what OLM v0's InstallPlan
/// made for it (applied by the admin), then its Deployment, lifted ClusterRoles and copies made by the legacy loops;
/// waits until the CSV Succeeded and has at least `copies_expected` copies. Answers the CSV as applied and its uid.
async fn install_like_olm_v0(
    harness: &Harness,
    targets: &[&str],
    copies_expected: usize,
) -> (ClusterServiceVersion, String) {
    apply(
        harness,
        None,
        &format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: community, namespace: olm}}\n\
             spec: {{sourceType: grpc, image: {}, updateStrategy: {{registryPoll: {{interval: 1s}}}}}}\n---\n\
             apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: global, namespace: operators}}\n\
             spec: {{targetNamespaces: {}}}\n",
            harness.registry.reference("catalog:latest"),
            if targets.is_empty() { "null".to_owned() } else { format!("[{}]", targets.join(", ")) }
        ),
    );
    apply(harness, None, &bundle_file("grumbos.manufacturing.how.theydoit.com.crd.yaml"));
    let mut csv: ClusterServiceVersion =
        serde_yaml_ng::from_str(&bundle_file("grumbo.clusterserviceversion.yaml")).unwrap();
    csv.metadata.namespace = Some("operators".into());
    csv.annotations_mut().insert(
        "operatorframework.io/properties".into(),
        json!({"properties": bundle_properties("grumbo", "1.0.0", GRUMBO_API)}).to_string(),
    );
    apply(harness, None, &serde_json::to_string(&csv).unwrap());
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "operators");
    let csv_uid = csvs.get(CSV).await.unwrap().uid().unwrap();
    apply(harness, None, &manifest(&installed_by_olm_v0(&csv, &csv_uid)));
    for _ in 0..600 {
        harness.roll_out("operators").await;
        let phase = csvs.get(CSV).await.unwrap().status.map(|s| s.phase);
        if phase == Some(CsvPhase::Succeeded) && copies(harness).await.len() >= copies_expected {
            return (csv, csv_uid);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("grumbo never Succeeded and copied: {:?}", csvs.get(CSV).await.unwrap().status);
}

/// The Subscription to grumbo, with the status OLM v0 left it. Made first naming a catalog that does not exist, so
/// that this controller resolves nothing for it before its status says what OLM v0 installed (a cluster switching
/// from OLM v0 has that status already), then pointed at its catalog; its installed CSV stays grumbo 1.0.0.
async fn subscribe_like_olm_v0(harness: &Harness) {
    apply(
        harness,
        None,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: grumbo, namespace: operators}\n\
         spec: {source: not-yet, sourceNamespace: olm, name: grumbo, channel: stable}\n",
    );
    let status = json!({"status": {"currentCSV": CSV, "installedCSV": CSV, "state": "AtLatestKnown"}}).to_string();
    let args = ["patch", "subscription", "grumbo", "-n", "operators", "--subresource=status", "--type=merge", "-p"];
    let patched = harness.admin_kubectl(&[&args[..], &[status.as_str()]].concat(), None);
    assert!(patched.status.success(), "{}", text(&patched));
    let source = r#"{"spec":{"source":"community"}}"#;
    let args = ["patch", "subscription", "grumbo", "-n", "operators", "--type=merge", "-p", source];
    let pointed = harness.admin_kubectl(&args, None);
    assert!(pointed.status.success(), "{}", text(&pointed));
    let subscriptions = Api::<Subscription>::namespaced(harness.admin.clone(), "operators");
    for _ in 0..30 {
        let status = subscriptions.get("grumbo").await.unwrap().status.unwrap_or_default();
        assert_eq!(status.installed_csv.as_deref(), Some(CSV), "{status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `olmv2 migrate apply -n operators --approve --yes` as the admin, standing in for the Deployment controller
/// while it waits.
async fn approve_and_apply(harness: &Harness) -> std::process::Output {
    let file = harness.dir.join("admin.kubeconfig");
    std::fs::write(&file, harness.plane.kubeconfig()).unwrap();
    let approving = tokio::task::spawn_blocking(move || {
        std::process::Command::new(crate::support::harness::olmv2_binary())
            .args(["migrate", "apply", "-n", "operators", "--approve", "--yes", "--timeout-seconds", "120"])
            .env("KUBECONFIG", &file)
            .output()
            .unwrap()
    });
    while !approving.is_finished() {
        harness.roll_out("operators").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    approving.await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_olm_v0_installed_is_taken_over_and_its_copies_removed_with_nothing_lost() {
    let spread: Vec<String> = (1..=NAMESPACES).map(|n| format!("ns-{n:02}")).collect();
    let mut namespaces = vec!["operators", "olm"];
    namespaces.extend(spread.iter().map(String::as_str));
    let mut harness = Harness::start("migration", "v0", &namespaces, Duration::from_secs(30)).await;

    push_catalog(&harness, 1, &[]).await;
    let (csv, csv_uid) = install_like_olm_v0(&harness, &[], NAMESPACES).await;
    // Something a copy keeps alive in ns-07 (what OLM v0 gives an operator in a target namespace is owned so).
    let copy_uid =
        Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ns-07").get(CSV).await.unwrap().uid().unwrap();
    let owned_by_copy = json!([{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "name": CSV, "uid": copy_uid}]);
    apply(
        &harness,
        None,
        &manifest(&[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "kept-by-copy",
                "namespace": "ns-07", "ownerReferences": owned_by_copy},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept-by-copy", "namespace": "ns-07",
                "ownerReferences": owned_by_copy}, "data": {"a": "b"}}),
        ]),
    );

    subscribe_like_olm_v0(&harness).await;
    let installs = Api::<Install>::all(harness.admin.clone());
    assert!(installs.get_opt("grumbo.operators").await.unwrap().is_none(), "nothing installed again");
    let subscriptions = Api::<Subscription>::namespaced(harness.admin.clone(), "operators");
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "operators");
    let deployment = deployment_uid(&harness, "operators", "grumbo-operator").await.expect("the Deployment");

    // The plan: grumbo is taken over, then adopted.
    let planned = olmv2(&harness, &["migrate", "plan", "-n", "operators"]);
    assert!(planned.status.success(), "{}", text(&planned));
    let table = text(&planned);
    let row = table.lines().map(str::trim_start).find(|l| l.starts_with("operators/grumbo")).unwrap_or_else(|| {
        panic!("{table}");
    });
    for cell in ["grumbo.operators (takes over grumbo.v1.0.0)", "2 rules (its CSV's)", "grumbo (new)", "take over"] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    let yaml = olmv2(&harness, &["migrate", "plan", "-n", "operators", "-o", "yaml"]);
    let plans: Vec<Value> = serde_yaml_ng::from_slice(&yaml.stdout).expect("YAML plan");
    assert_eq!(plans[0]["takeover"]["csv"], CSV, "{plans:?}");
    // The copies the plan says go: every namespace's (checked below to be the ones removed).
    let planned_copies = plans[0]["takeover"]["copies"].as_array().map_or(0, Vec::len);
    assert!(planned_copies >= NAMESPACES, "{planned_copies} copies planned");
    assert_eq!(planned_copies, copies(&harness).await.len(), "the plan lists every copy");
    assert!(table.contains(&format!("operators/{CSV} in {planned_copies} namespaces: ")), "{table}");
    assert!(installs.get_opt("grumbo.operators").await.unwrap().is_none(), "the plan changed nothing");

    // Without --approve, apply stops at the approval the takeover needs, and says how to give it; nothing of the
    // running operator has changed. A controller restarted meanwhile picks up where it was.
    let stopped = olmv2(&harness, &["migrate", "apply", "-n", "operators", "--timeout-seconds", "60"]);
    assert!(!stopped.status.success(), "{}", text(&stopped));
    let said = text(&stopped);
    assert!(
        said.contains("InstallPendingApproval") && said.contains("kubectl olmv2 approve grumbo.operators"),
        "{said}"
    );
    let install = installs.get("grumbo.operators").await.unwrap();
    assert_eq!(install.status.as_ref().and_then(|s| s.state), Some(InstallState::PendingApproval));
    assert_eq!(
        install.annotations().get(TAKES_OVER_CSV_ANNOTATION).map(String::as_str),
        Some("operators/grumbo.v1.0.0")
    );
    let untouched = csvs.get(CSV).await.unwrap();
    assert!(!untouched.annotations().contains_key("v2alpha1.operators.coreos.com/install-record"));
    harness.stop_controllers();
    harness.start_controllers().await;

    // With --approve, the admin approves what the Install needs; the CLI waits while the Deployment rolls out.
    let applied = approve_and_apply(&harness).await;
    assert!(applied.status.success(), "{}", text(&applied));
    assert!(text(&applied).contains("Install grumbo.operators approved."), "{}", text(&applied));

    // The operator runs on under its Operator: same Deployment, same CSV (the Install's record now).
    assert!(subscriptions.get_opt("grumbo").await.unwrap().is_none());
    assert_eq!(deployment_uid(&harness, "operators", "grumbo-operator").await.as_deref(), Some(deployment.as_str()));
    let record = csvs.get(CSV).await.unwrap();
    assert_eq!(record.uid().as_deref(), Some(csv_uid.as_str()));
    assert_eq!(
        record.annotations().get("v2alpha1.operators.coreos.com/install-record").map(String::as_str),
        Some("grumbo.operators")
    );
    harness
        .wait_for(&installs, "grumbo.operators", "installed, recording where it came from", |install| {
            let status = install.status.clone().unwrap_or_default();
            status.state == Some(InstallState::Installed)
                && status.adopted_from.as_deref() == Some("Subscription operators/grumbo")
        })
        .await;
    // What OLM v0 labelled as the CSV's and the Install took over is the Install's alone now.
    let cluster_role = rbac_name(CSV, &csv.spec.install.spec.cluster_permissions[0]);
    let taken = Api::<ClusterRole>::all(harness.admin.clone()).get(&cluster_role).await.unwrap();
    assert!(!taken.labels().contains_key("olm.owner"), "{:?}", taken.labels());
    assert!(taken.owner_references().iter().any(|o| o.kind == "Install" && o.name == "grumbo.operators"));
    let operators = Api::<Operator>::all(harness.admin.clone());
    let operator = harness
        .wait_for(&operators, "grumbo", "adopted, listing its Deployment", |o| {
            has_condition(o, "Adopted", "True", "AdoptedFromSubscription")
                && refs_of_kind(o, "Deployment").contains(&"grumbo-operator".to_owned())
        })
        .await;
    let operator_uid = operator.uid().unwrap();

    // Every copy goes; what the copy in ns-07 owned passes to the Operator, or is orphaned, never deleted.
    let mut gone = false;
    for _ in 0..600 {
        if copies(&harness).await.is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "{} copies left", copies(&harness).await.len());
    let role = Api::<Role>::namespaced(harness.admin.clone(), "ns-07").get("kept-by-copy").await.unwrap();
    let owners: Vec<(&str, &str)> = role.owner_references().iter().map(|o| (o.kind.as_str(), o.uid.as_str())).collect();
    assert_eq!(owners, [("Operator", operator_uid.as_str())]);
    let configmaps = Api::<ConfigMap>::namespaced(harness.admin.clone(), "ns-07");
    let mut orphaned = false;
    for _ in 0..300 {
        let found = configmaps.get("kept-by-copy").await.expect("the ConfigMap is kept");
        if found.owner_references().is_empty() {
            orphaned = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(orphaned, "the garbage collector orphans what the copy owned");
}

/// Switching controllers first and migrating later: an operator OLM v0 installed upgrades under the legacy loops as
/// under OLM v0, its InstallPlan's Install taking over what OLM v0 made for the old CSV (the same Deployment, moved
/// to the new bundle) once a person approves what it needs; the old CSV is replaced and goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_the_switch_an_operator_olm_v0_installed_upgrades_by_taking_over_its_csv() {
    let harness =
        Harness::start("migration", "v0-upgrade", &["operators", "olm", "team-a"], Duration::from_secs(30)).await;
    push_catalog(&harness, 1, &[]).await;
    let (_, csv_uid) = install_like_olm_v0(&harness, &[], 1).await;
    subscribe_like_olm_v0(&harness).await;
    let deployment = deployment_uid(&harness, "operators", "grumbo-operator").await.expect("the Deployment");

    let newer = push_grumbo_1_1_0(&harness).await;
    push_catalog(&harness, 2, &[("grumbo.v1.1.0", &newer)]).await;
    let installs = Api::<Install>::all(harness.admin.clone());
    let install = harness
        .wait_for(&installs, "grumbo.operators", "waiting for a person", |install| {
            install.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
    let annotations = install.annotations();
    assert_eq!(annotations.get(TAKES_OVER_CSV_ANNOTATION).map(String::as_str), Some("operators/grumbo.v1.0.0"));
    assert_eq!(annotations.get(TAKES_OVER_CSV_UID_ANNOTATION), Some(&csv_uid));
    let approved = harness.admin_kubectl(
        &["patch", "install", "grumbo.operators", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#],
        None,
    );
    assert!(approved.status.success(), "{}", text(&approved));

    let subscriptions = Api::<Subscription>::namespaced(harness.admin.clone(), "operators");
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "operators");
    let mut upgraded = false;
    for _ in 0..600 {
        harness.roll_out("operators").await;
        let status = subscriptions.get("grumbo").await.unwrap().status.unwrap_or_default();
        let old_gone = csvs.get_opt(CSV).await.unwrap().is_none();
        let new_succeeded = csvs
            .get_opt("grumbo.v1.1.0")
            .await
            .unwrap()
            .and_then(|csv| csv.status)
            .is_some_and(|status| status.phase == CsvPhase::Succeeded);
        if status.installed_csv.as_deref() == Some("grumbo.v1.1.0") && old_gone && new_succeeded {
            upgraded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let install = installs.get("grumbo.operators").await.unwrap();
    assert!(upgraded, "not upgraded: {:?} {:?}", install.status, csvs.get_opt(CSV).await.unwrap().map(|c| c.status));
    assert_eq!(deployment_uid(&harness, "operators", "grumbo-operator").await.as_deref(), Some(deployment.as_str()));
    let running = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(harness.admin.clone(), "operators")
        .get("grumbo-operator")
        .await
        .unwrap();
    let image = running.spec.unwrap().template.spec.unwrap().containers[0].image.clone();
    assert_eq!(image.as_deref(), Some("quay.io/howtheydoit/grumbo-operator:v1.1.0"), "the new bundle runs");
}

/// Naming the CSV an Install takes over is the controller's alone: an Install of mallory's naming grumbo's CSV
/// would take over grumbo's Deployment, account and RBAC, and deleting her Install would delete them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nobody_but_the_controller_may_name_a_csv_for_an_install_to_take_over() {
    let harness = Harness::start("migration", "v0-claim", &["operators", "olm"], Duration::from_secs(30)).await;
    push_catalog(&harness, 1, &[]).await;
    let (_, csv_uid) = install_like_olm_v0(&harness, &[], 0).await;
    apply(
        &harness,
        None,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: install-writer}\n\
         rules: [{apiGroups: [operators.coreos.com], resources: [installs], verbs: [get, list, create, update, patch]}]\n\
         ---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: mallory-installs}\n\
         roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: install-writer}\n\
         subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallory}]\n",
    );
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let plain = "apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata:\n  name: mine\nspec:\n  \
                 namespaces: [{from: default, to: operators}]\n  content: [{type: Raw, raw: \"apiVersion: v1\\nkind: \
                 ServiceAccount\\nmetadata: {name: grumbo-operator}\\n\"}]\n";
    let claimed = plain.replace(
        "  name: mine\n",
        &format!(
            "  name: mine\n  annotations: {{{TAKES_OVER_CSV_ANNOTATION}: operators/{CSV}, \
             {TAKES_OVER_CSV_UID_ANNOTATION}: {csv_uid}}}\n"
        ),
    );
    let refused = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&claimed));
    assert!(!refused.status.success(), "mallory named grumbo's CSV for her Install");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(&format!("only the controller sets the annotation {TAKES_OVER_CSV_ANNOTATION}")),
        "{stderr}"
    );
    // Made plain, then annotated: refused as well; her Install cannot touch grumbo's account.
    let made = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(plain));
    assert!(made.status.success(), "{}", text(&made));
    for annotation in
        [format!("{TAKES_OVER_CSV_ANNOTATION}=operators/{CSV}"), format!("{TAKES_OVER_CSV_UID_ANNOTATION}={csv_uid}")]
    {
        let annotated = harness.kubectl(&mallory, &["annotate", "install", "mine", &annotation], None);
        assert!(!annotated.status.success(), "mallory annotated her Install with {annotation}");
        let said = String::from_utf8_lossy(&annotated.stderr);
        assert!(said.contains("only the controller sets the annotation"), "{said}");
    }
    let mine = Api::<Install>::all(harness.admin.clone()).get("mine").await.unwrap();
    assert!(!mine.annotations().contains_key(TAKES_OVER_CSV_ANNOTATION), "her Install names no CSV");
}

/// An operator OLM v0 installed for some namespaces: the Roles and bindings its group gave it there (copied by the
/// OperatorGroup loop, owned by the CSV's copy in each) are named as its Install renders them, and are taken over
/// in place, then pass to the Operator as the copies go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_olm_v0_installed_for_some_namespaces_keeps_its_roles_there() {
    let targets = ["team-a", "team-b"];
    let harness =
        Harness::start("migration", "v0-targets", &["operators", "olm", "team-a", "team-b"], Duration::from_secs(30))
            .await;
    push_catalog(&harness, 1, &[]).await;
    let (csv, _) = install_like_olm_v0(&harness, &targets, targets.len()).await;
    let role_name = rbac_name(CSV, &csv.spec.install.spec.permissions[0]);
    let roles = Api::<Role>::namespaced(harness.admin.clone(), "team-a");
    let copied = harness
        .wait_for(&roles, &role_name, "copied into team-a by the OperatorGroup loop", |role| {
            role.owner_references().iter().any(|owner| owner.kind == "ClusterServiceVersion")
        })
        .await;
    subscribe_like_olm_v0(&harness).await;

    let applied = approve_and_apply(&harness).await;
    assert!(applied.status.success(), "{}", text(&applied));
    let operator = Api::<Operator>::all(harness.admin.clone()).get("grumbo").await.unwrap();
    let mut kept = None;
    for _ in 0..300 {
        if copies(&harness).await.is_empty() {
            kept = Some(roles.get(&role_name).await.expect("the Role in team-a is kept"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept = kept.expect("the copies go");
    assert_eq!(kept.uid(), copied.uid(), "taken over in place");
    let mut owners: Vec<&str> = kept.owner_references().iter().map(|owner| owner.kind.as_str()).collect();
    owners.sort_unstable();
    assert_eq!(owners, ["Install", "Operator"], "{:?} (operator {})", kept.owner_references(), operator.name_any());
}

/// A Subscription made again for an operator OLM v0 installed (its old one deleted, so no status says what is
/// installed): OLM v0 fails its resolution (`ConstraintsNotSatisfiable`, the installed CSV and the catalog's bundle
/// "originate from package grumbo"); here its InstallPlan's Install takes that very CSV over in place once approved
/// (`docs/legacy.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscription_made_again_for_an_operator_olm_v0_installed_takes_it_over() {
    let harness = Harness::start("migration", "v0-again", &["operators", "olm"], Duration::from_secs(30)).await;
    push_catalog(&harness, 1, &[]).await;
    let (_, csv_uid) = install_like_olm_v0(&harness, &[], 0).await;
    let deployment = deployment_uid(&harness, "operators", "grumbo-operator").await.expect("the Deployment");
    apply(
        &harness,
        None,
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {name: grumbo, namespace: operators}\n\
         spec: {source: community, sourceNamespace: olm, name: grumbo, channel: stable}\n",
    );
    let installs = Api::<Install>::all(harness.admin.clone());
    let install = harness
        .wait_for(&installs, "grumbo.operators", "waiting for a person", |install| {
            install.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
        })
        .await;
    assert_eq!(install.annotations().get(TAKES_OVER_CSV_UID_ANNOTATION), Some(&csv_uid));
    let patch = r#"{"spec":{"approval":"Approved"}}"#;
    let approved = harness.admin_kubectl(&["patch", "install", "grumbo.operators", "--type=merge", "-p", patch], None);
    assert!(approved.status.success(), "{}", text(&approved));
    let mut installed = false;
    for _ in 0..300 {
        harness.roll_out("operators").await;
        let state = installs.get("grumbo.operators").await.unwrap().status.and_then(|s| s.state);
        if state == Some(InstallState::Installed) {
            installed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(installed, "{:?}", installs.get("grumbo.operators").await.unwrap().status);
    let csv = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "operators").get(CSV).await.unwrap();
    assert_eq!(csv.uid(), Some(csv_uid), "the same CSV, the Install's record now");
    assert!(csv.annotations().contains_key("v2alpha1.operators.coreos.com/install-record"));
    assert_eq!(deployment_uid(&harness, "operators", "grumbo-operator").await, Some(deployment));
}
