//! A CSV's RBAC in its group's targets: OLM v0 copies the CSV's own Roles and RoleBindings into each target
//! namespace (tenant RBAC) and lifts them to ClusterRoles and ClusterRoleBindings for a group targeting every
//! namespace (singleton RBAC). Each scenario is also the attack on it: a namespace admin whose CSV and Roles would
//! have their ServiceAccount given rights outside their namespace gets nothing, and the same CSV authored by a
//! cluster admin gets OLM's objects.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::Api;
use kube::ResourceExt;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};

use super::{apply, bound_to, csv, csv_writer, installed_globally, kubectl, start, wait_phase, CRD, GLOBAL_GROUP};
use crate::support::harness::Harness;

/// The metadata of object `name` of `ops`, labelled and owned as OLM v0's InstallPlan makes them for CSV `uid`.
fn owned_meta(name: &str, uid: &str) -> String {
    format!(
        "{{name: {name}, namespace: ops, labels: {{olm.owner: plumbus.v1.0.0, olm.owner.namespace: ops, \
         olm.owner.kind: ClusterServiceVersion}}, ownerReferences: [{{apiVersion: operators.coreos.com/v1alpha1, \
         kind: ClusterServiceVersion, name: plumbus.v1.0.0, uid: {uid}}}]}}"
    )
}

/// A Role `role` with `rules` and a RoleBinding `binding` of it to `subjects`, in `ops`, labelled and owned as
/// OLM v0's InstallPlan makes them for CSV `uid`.
fn role_and_binding(uid: &str, role: &str, rules: &str, binding: &str, subjects: &str) -> String {
    format!(
        r#"
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {role_meta}
rules: {rules}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {binding_meta}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {role}}}
subjects: {subjects}
"#,
        role_meta = owned_meta(role, uid),
        binding_meta = owned_meta(binding, uid),
    )
}

/// The CSV's account `plumbus` of `ops`.
const ACCOUNT: &str = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: plumbus, namespace: ops}\n";

/// The CSV's account with a Role reading Secrets and its binding, labelled and owned as OLM v0's InstallPlan makes
/// them for CSV `uid`.
fn owned_rbac(uid: &str) -> String {
    let secrets = r#"[{apiGroups: [""], resources: [secrets], verbs: [get, list]}]"#;
    let account = "[{kind: ServiceAccount, name: plumbus, namespace: ops}]";
    ACCOUNT.to_owned() + &role_and_binding(uid, "plumbus-secrets", secrets, "plumbus-secrets-binding", account)
}

/// The Plumbus CSV asking to read Secrets, with the given install modes.
fn secrets_csv(modes: &[(&str, bool)]) -> String {
    csv("ops", modes).replace(
        "rules: [{apiGroups: [\"\"], resources: [configmaps], verbs: [get, list]}]",
        "rules: [{apiGroups: [\"\"], resources: [secrets], verbs: [get, list]}]",
    )
}

/// Mallory, admin of namespace `ops` (she may write CSVs, Deployments, Roles and RoleBindings there) and nothing
/// else, applies the CSV and its owned RBAC; the CSV succeeds in `ops`.
async fn mallory_installs(harness: &Harness, modes: &[(&str, bool)]) -> String {
    apply(harness, CRD);
    apply(harness, &bound_to("mallory", "admin", "ops"));
    apply(harness, &csv_writer("mallory"));
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let as_mallory = |manifest: &str| {
        let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(manifest));
        assert!(output.status.success(), "mallory: {}", String::from_utf8_lossy(&output.stderr));
    };
    as_mallory(&secrets_csv(modes));
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let uid = csvs.get("plumbus.v1.0.0").await.expect("csv").uid().unwrap();
    as_mallory(&owned_rbac(&uid));
    // A pass that ran between the CSV and its RBAC saw part of it; the RBAC labelled as the CSV's wakes it again, and
    // Mallory touches it too, as an author would.
    let touched = harness.kubectl(&mallory, &["annotate", "csv", "plumbus.v1.0.0", "-n", "ops", "touched=1"], None);
    assert!(touched.status.success(), "{}", String::from_utf8_lossy(&touched.stderr));
    wait_phase(harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    uid
}

fn can_i(harness: &Harness, verb: &str, resource: &str, namespace: &str) -> String {
    let output = harness.admin_kubectl(
        &["auth", "can-i", verb, resource, "-n", namespace, "--as", "system:serviceaccount:ops:plumbus"],
        None,
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Waits for the CSV's Warning event `TargetRBACRefused` whose message holds `settled`, and returns its line: a pass
/// that saw the Role before its binding refuses with what it saw, and a later one, woken by the binding (labelled as
/// the CSV's), says it all.
async fn refusal(harness: &Harness, settled: &str) -> String {
    let mut described = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while std::time::Instant::now() < deadline {
        described = kubectl(harness, &["describe", "csv", "-n", "ops", "plumbus.v1.0.0"]);
        let refused = |line: &&str| line.contains("TargetRBACRefused") && line.contains(settled);
        if let Some(line) = described.lines().find(refused) {
            return line.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no TargetRBACRefused event:\n{described}");
}

/// The admin takes the CSV over (a change of its spec makes them its author).
fn taken_over_by_the_admin(harness: &Harness, modes: &[(&str, bool)]) {
    apply(harness, &secrets_csv(modes).replace("displayName: Plumbus", "displayName: Plumbus Operator"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_csvs_roles_are_copied_into_its_targets_only_for_an_author_who_could_copy_them() {
    let harness = start("tenant-rbac").await;
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {targetNamespaces: [team-a]}\n",
    );
    let modes = [("SingleNamespace", true), ("MultiNamespace", true)];
    mallory_installs(&harness, &modes).await;
    let line = refusal(&harness, "not copied to namespace team-a").await;
    assert!(
        line.contains("its Roles are not copied to namespace team-a: the CSV's author mallory may not create roles.rbac.authorization.k8s.io in namespace team-a"),
        "{line}"
    );
    let roles = Api::<Role>::namespaced(harness.admin.clone(), "team-a");
    assert!(roles.get_opt("plumbus-secrets").await.expect("get").is_none(), "copied for mallory");
    assert_eq!(can_i(&harness, "list", "secrets", "team-a"), "no");

    taken_over_by_the_admin(&harness, &modes);
    let copied = harness.wait_for(&roles, "plumbus-secrets", "copied into team-a", |_| true).await;
    let labels = copied.labels();
    assert_eq!(labels.get("olm.owner.namespace").map(String::as_str), Some("team-a"));
    assert_eq!(labels.get("olm.copiedFrom").map(String::as_str), Some("ops"));
    assert_eq!(labels.get("olm.managed").map(String::as_str), Some("true"));
    let copy = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "team-a")
        .get("plumbus.v1.0.0")
        .await
        .expect("the copied CSV");
    assert_eq!(copied.owner_references()[0].uid, copy.uid().unwrap(), "owned by the copy in team-a");
    let bindings = Api::<RoleBinding>::namespaced(harness.admin.clone(), "team-a");
    let binding = harness.wait_for(&bindings, "plumbus-secrets-binding", "copied into team-a", |_| true).await;
    assert_eq!(binding.subjects.unwrap()[0].namespace.as_deref(), Some("ops"));
    assert_eq!(can_i(&harness, "list", "secrets", "team-a"), "yes");
    assert_eq!(can_i(&harness, "list", "secrets", "team-b"), "no", "only the group's targets");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_csvs_roles_are_lifted_cluster_wide_only_for_an_author_who_could_lift_them() {
    let harness = start("singleton-rbac").await;
    apply(&harness, GLOBAL_GROUP);
    let modes = [("AllNamespaces", true)];
    mallory_installs(&harness, &modes).await;
    let line = refusal(&harness, "(plumbus-secrets-binding)").await;
    assert!(
        line.contains("its Roles are not made ClusterRoles (plumbus-secrets) nor bound cluster-wide (plumbus-secrets-binding): the CSV's author mallory may not create clusterroles.rbac.authorization.k8s.io cluster-wide"),
        "{line}"
    );
    let cluster_roles = Api::<ClusterRole>::all(harness.admin.clone());
    assert!(cluster_roles.get_opt("plumbus-secrets").await.expect("get").is_none(), "lifted for mallory");
    assert_eq!(can_i(&harness, "list", "secrets", "team-b"), "no");

    taken_over_by_the_admin(&harness, &modes);
    let lifted = harness.wait_for(&cluster_roles, "plumbus-secrets", "lifted", |_| true).await;
    assert_eq!(lifted.labels().get("olm.owner").map(String::as_str), Some("plumbus.v1.0.0"));
    let rules = lifted.rules.unwrap();
    assert_eq!(rules.last().unwrap().resources.as_deref(), Some(&["namespaces".to_owned()][..]));
    assert!(lifted.metadata.owner_references.is_none());
    let bindings = Api::<ClusterRoleBinding>::all(harness.admin.clone());
    let binding = harness.wait_for(&bindings, "plumbus-secrets-binding", "lifted", |_| true).await;
    assert_eq!((binding.role_ref.kind.as_str(), binding.role_ref.name.as_str()), ("ClusterRole", "plumbus-secrets"));
    assert_eq!(can_i(&harness, "list", "secrets", "team-b"), "yes");
    assert_eq!(can_i(&harness, "list", "namespaces", "team-b"), "yes");

    // OLM's finalizer: deleting the CSV deletes what was lifted for it (they have no owner to be collected with).
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let finalizers = csvs.get("plumbus.v1.0.0").await.expect("csv").finalizers().to_vec();
    assert_eq!(finalizers, ["operators.coreos.com/csv-cleanup"]);
    kubectl(&harness, &["delete", "csv", "-n", "ops", "plumbus.v1.0.0", "--wait=true", "--timeout=20s"]);
    assert!(csvs.get_opt("plumbus.v1.0.0").await.expect("get").is_none());
    assert!(cluster_roles.get_opt("plumbus-secrets").await.expect("get").is_none(), "the lifted ClusterRole is gone");
    assert!(bindings.get_opt("plumbus-secrets-binding").await.expect("get").is_none(), "and its binding");
    assert_eq!(can_i(&harness, "list", "secrets", "team-b"), "no");
}

/// Mallory, admin of namespace `ops` only, plants Roles and RoleBindings labelled and owned as the admin's CSV's
/// (labels and owner references are anyone's to write), each bound to herself and the CSV's account: one granting
/// more than the CSV declares, one granting what it declares. The admin's CSV, allowed to lift its RBAC, lifts only
/// what it declares and only to its own account: nothing planted gives Mallory or the account more cluster-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn roles_planted_with_the_csvs_labels_are_not_lifted_for_the_planter() {
    let harness = start("planted-rbac").await;
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, CRD);
    apply(&harness, &bound_to("mallory", "admin", "ops"));
    let modes = [("AllNamespaces", true)];
    apply(&harness, &secrets_csv(&modes));
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "ops");
    let uid = csvs.get("plumbus.v1.0.0").await.expect("csv").uid().unwrap();
    let mallory_and_the_account = "[{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallory}, \
                                   {kind: ServiceAccount, name: plumbus, namespace: ops}]";
    let wide = r#"[{apiGroups: [""], resources: [secrets, pods], verbs: [get, list, create, delete]}]"#;
    let narrow = r#"[{apiGroups: [""], resources: [secrets], verbs: [get, list]}]"#;
    let planted = ACCOUNT.to_owned()
        + &role_and_binding(&uid, "mallory-wide", wide, "mallory-wide-binding", mallory_and_the_account)
        + &role_and_binding(&uid, "mallory-narrow", narrow, "mallory-narrow-binding", mallory_and_the_account);
    let mallory = harness.plane.user_kubeconfig("mallory", &[]);
    let output = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(&planted));
    assert!(output.status.success(), "mallory: {}", String::from_utf8_lossy(&output.stderr));

    // Mallory's Roles give the account what its CSV asks in `ops`: the CSV succeeds, and a pass lifts what it
    // takes from the plants. The narrow one lifted is the proof that the pass saw the wide one (made before it).
    wait_phase(&harness, "ops", CsvPhase::Succeeded, "InstallSucceeded").await;
    let bindings = Api::<ClusterRoleBinding>::all(harness.admin.clone());
    let mut lifted = None;
    for _ in 0..200 {
        assert!(bindings.get_opt("mallory-wide-binding").await.expect("get").is_none(), "a planted binding was lifted");
        lifted = bindings.get_opt("mallory-narrow-binding").await.expect("get");
        if lifted.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lifted = lifted.expect("the narrow planted Role, within the CSV's declaration, is never lifted");
    let subjects: Vec<String> = lifted.subjects.unwrap().iter().map(|subject| subject.name.clone()).collect();
    assert_eq!(subjects, ["plumbus"], "a planted subject was bound cluster-wide");
    assert_eq!(can_i(&harness, "list", "secrets", "team-b"), "yes", "what the CSV declares is lifted");

    let cluster_roles = Api::<ClusterRole>::all(harness.admin.clone());
    assert!(cluster_roles.get_opt("mallory-wide").await.expect("get").is_none(), "a planted Role was lifted");
    assert!(bindings.get_opt("mallory-wide-binding").await.expect("get").is_none(), "a planted binding was lifted");
    let as_mallory = |verb: &str, resource: &str| {
        let output = harness.admin_kubectl(&["auth", "can-i", verb, resource, "-n", "team-b", "--as", "mallory"], None);
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    assert_eq!(as_mallory("list", "secrets"), "no", "mallory reads Secrets everywhere");
    assert_eq!(can_i(&harness, "create", "pods", "team-b"), "no", "the account got more than its CSV declares");
}

/// A Role and RoleBinding labelled as the CSV's, made after it Succeeded, are lifted at once: they wake the CSV as
/// its Deployment does. The CSV succeeds on an unlabelled Role of `ops`, so that its passes settle with nothing to
/// lift, and the resync here is ten minutes: no later pass would come for them otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rbac_labelled_as_the_csvs_made_after_it_succeeded_is_lifted_at_once() {
    let namespaces = ["ops", "team-a", "team-b"];
    let harness = Harness::start("legacy", "late-rbac", &namespaces, Duration::from_secs(600)).await;
    let csv = installed_globally(&harness).await;
    assert_eq!(can_i(&harness, "list", "configmaps", "team-b"), "no", "nothing lifted yet");

    let account = "[{kind: ServiceAccount, name: plumbus, namespace: ops}]";
    let rules = r#"[{apiGroups: [""], resources: [configmaps], verbs: [get, list]}]"#;
    let uid = csv.uid().unwrap();
    apply(&harness, &role_and_binding(&uid, "plumbus-late", rules, "plumbus-late-binding", account));
    let bindings = Api::<ClusterRoleBinding>::all(harness.admin.clone());
    let lifted = harness.wait_for(&bindings, "plumbus-late-binding", "lifted at once", |_| true).await;
    assert_eq!((lifted.role_ref.kind.as_str(), lifted.role_ref.name.as_str()), ("ClusterRole", "plumbus-late"));
}
