use serde_json::{json, Value};

use super::*;

/// The CSV declares that its account `plumbus` reads Secrets and ConfigMaps in its namespace.
static DECLARED: std::sync::LazyLock<Declared> = std::sync::LazyLock::new(|| {
    Declared::of(&object(json!({"permissions": [{"serviceAccountName": "plumbus", "rules": [
        {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["get"]}]}]})))
});

fn csv() -> Owner<'static> {
    Owner { name: "plumbus.v1", namespace: "ops", uid: "csv-uid", declared: &DECLARED }
}

fn object<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("object")
}

fn owned_meta(name: &str, namespace: &str, owner_uid: &str) -> Value {
    json!({"name": name, "namespace": namespace, "uid": format!("{name}-uid"), "resourceVersion": "7",
           "labels": {"olm.owner": "plumbus.v1", "olm.owner.namespace": "ops",
                      "olm.owner.kind": "ClusterServiceVersion", "olm.permissions.hash": "h"},
           "annotations": {"note": "kept"},
           "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                                "name": "plumbus.v1", "uid": owner_uid}]})
}

fn role(name: &str, owner_uid: &str, resource: &str) -> Role {
    object(json!({"metadata": owned_meta(name, "ops", owner_uid),
                  "rules": [{"apiGroups": [""], "resources": [resource], "verbs": ["get"]}]}))
}

fn binding(name: &str, owner_uid: &str, kind: &str, role: &str) -> RoleBinding {
    object(json!({"metadata": owned_meta(name, "ops", owner_uid),
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
                  "subjects": [{"kind": "ServiceAccount", "name": "plumbus", "namespace": "ops"}]}))
}

/// The plan for target `team-a` of the CSV's Role `r` (reading Secrets) and its binding `r`, given what is there.
fn plan_with(existing_roles: &[Role], existing_bindings: &[RoleBinding]) -> TenantPlan {
    tenant_plan(
        csv(),
        "copy-uid",
        "team-a",
        &[role("r", "csv-uid", "secrets")],
        &[binding("r", "csv-uid", "Role", "r")],
        existing_roles,
        existing_bindings,
    )
}

/// The plan lifting the CSV's Role `r` (reading Secrets) and its binding `b` where ClusterRole `r` is `there`.
fn lifted_over(there: ClusterRole) -> SingletonPlan {
    let roles = [role("r", "csv-uid", "secrets")];
    singleton_plan(
        csv(),
        &roles,
        &[binding("b", "csv-uid", "Role", "r")],
        &BTreeMap::from([("r".into(), there)]),
        &BTreeMap::new(),
    )
}

fn secrets_get() -> Rule {
    Rule::resource(&["get"], &[""], &["secrets"])
}

#[test]
fn the_owner_selector_is_olms() {
    assert_eq!(
        owner_selector("plumbus.v1", "ops"),
        "olm.owner=plumbus.v1,olm.owner.namespace=ops,olm.owner.kind=ClusterServiceVersion"
    );
}

#[test]
fn permissions_are_met_in_the_namespace_or_cluster_wide_as_asked() {
    let strategy: StrategyDetailsDeployment = object(json!({
        "permissions": [{"serviceAccountName": "plumbus", "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}],
        "clusterPermissions": [{"serviceAccountName": "", "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]}],
    }));
    let nodes = Rule::resource(&["get"], &[""], &["nodes"]);
    let local = |account: &str| match account {
        "plumbus" => (vec![secrets_get()], vec![]),
        "default" => (vec![nodes.clone()], vec![nodes.clone()]),
        _ => (vec![], vec![]),
    };
    assert!(permissions_met(&strategy, false, &local));
    assert!(!permissions_met(&strategy, true, &local), "lifted: secrets must be held cluster-wide");
    let everywhere = |_: &str| (vec![secrets_get(), nodes.clone()], vec![secrets_get(), nodes.clone()]);
    assert!(permissions_met(&strategy, true, &everywhere));
    let no_nodes = |_: &str| (vec![secrets_get(), nodes.clone()], vec![secrets_get()]);
    assert!(!permissions_met(&strategy, false, &no_nodes), "cluster permissions need cluster-wide rules");
}

#[test]
fn roles_and_bindings_are_copied_into_a_target_owned_by_the_copy() {
    let plan = plan_with(&[], &[]);
    assert_eq!(plan.create_roles.len(), 1);
    let created = &plan.create_roles[0];
    let meta = &created.metadata;
    assert_eq!((meta.name.as_deref(), meta.namespace.as_deref()), (Some("r"), Some("team-a")));
    assert!(meta.uid.is_none() && meta.resource_version.is_none());
    let labels = meta.labels.clone().unwrap_or_default();
    assert_eq!(labels["olm.owner"], "plumbus.v1");
    assert_eq!(labels["olm.owner.namespace"], "team-a");
    assert_eq!(labels["olm.copiedFrom"], "ops");
    assert_eq!(labels["olm.managed"], "true");
    assert_eq!(labels["olm.permissions.hash"], "h", "the original's other labels are kept");
    assert_eq!(meta.annotations.clone().unwrap_or_default()["note"], "kept");
    let owner = &meta.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.uid.as_str(), owner.block_owner_deletion, owner.controller),
        ("copy-uid", Some(false), Some(false))
    );
    assert_eq!(plan.create_bindings.len(), 1);
    assert_eq!(plan.create_bindings[0].subjects.clone().unwrap_or_default()[0].namespace.as_deref(), Some("ops"));
    assert_eq!(plan.grants, [secrets_get()]);
}

#[test]
fn nothing_is_copied_into_the_operators_own_namespace() {
    let plan = tenant_plan(csv(), "copy-uid", "ops", &[role("r", "csv-uid", "secrets")], &[], &[], &[]);
    assert!(plan.is_empty());
}

#[test]
fn roles_labelled_but_owned_by_another_object_are_not_copied() {
    let plan = tenant_plan(
        csv(),
        "copy-uid",
        "team-a",
        &[role("r", "someone-else", "secrets")],
        &[binding("r", "someone-else", "Role", "r")],
        &[],
        &[],
    );
    assert!(plan.is_empty(), "{plan:?}");
}

#[test]
fn a_copied_role_is_updated_only_when_its_rules_differ_and_bindings_are_never_changed() {
    let copied = plan_with(&[], &[]);
    let mut there = copied.create_roles[0].clone();
    let same = plan_with(std::slice::from_ref(&there), &copied.create_bindings);
    assert!(same.is_empty() && same.grants.is_empty(), "{same:?}");
    there.rules = Some(vec![]);
    let drifted = plan_with(&[there], &copied.create_bindings);
    assert_eq!(drifted.update_roles.len(), 1);
    assert_eq!(drifted.update_roles[0].rules, copied.create_roles[0].rules);
    assert!(drifted.create_bindings.is_empty());
    assert_eq!(drifted.grants, [secrets_get()]);
}

#[test]
fn a_foreign_role_of_the_same_name_in_the_target_is_neither_changed_nor_bound() {
    let foreign: Role = object(json!({"metadata": {"name": "r", "namespace": "team-a"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}));
    let plan = plan_with(&[foreign], &[]);
    assert!(plan.is_empty(), "{plan:?}");
}

#[test]
fn bindings_to_cluster_roles_are_neither_copied_nor_lifted() {
    let bindings = [binding("admin-everywhere", "csv-uid", "ClusterRole", "cluster-admin")];
    let roles = [role("r", "csv-uid", "secrets")];
    let plan = tenant_plan(csv(), "copy-uid", "team-a", &roles, &bindings, &[], &[]);
    assert!(plan.create_bindings.is_empty());
    let lifted = singleton_plan(csv(), &roles, &bindings, &BTreeMap::new(), &BTreeMap::new());
    assert!(lifted.bindings.is_empty(), "{lifted:?}");
}

#[test]
fn roles_are_lifted_with_the_namespaces_rule_and_bound_cluster_wide() {
    let plan = singleton_plan(
        csv(),
        &[role("r", "csv-uid", "secrets")],
        &[binding("b", "csv-uid", "Role", "r")],
        &BTreeMap::new(),
        &BTreeMap::new(),
    );
    assert_eq!(plan.cluster_roles.len(), 1);
    let lifted = &plan.cluster_roles[0];
    assert_eq!(lifted.metadata.name.as_deref(), Some("r"));
    assert!(lifted.metadata.owner_references.is_none(), "OLM's lifted roles have no owner: the finalizer removes them");
    assert_eq!(lifted.metadata.labels.clone().unwrap_or_default()["olm.owner.namespace"], "ops");
    assert_eq!(lifted.rules.clone().unwrap_or_default().last(), Some(&namespaces_rule()));
    let bound = &plan.bindings[0];
    assert_eq!(
        (bound.metadata.name.as_deref(), bound.role_ref.kind.as_str(), bound.role_ref.name.as_str()),
        (Some("b"), "ClusterRole", "r")
    );
    assert_eq!(plan.grants, [secrets_get(), Rule::resource(&["get", "list", "watch"], &[""], &["namespaces"])]);
}

#[test]
fn existing_cluster_roles_are_kept_and_only_the_csvs_own_are_bound() {
    let ours: ClusterRole = object(json!({"metadata": {"name": "r", "labels": {"olm.owner": "plumbus.v1",
        "olm.owner.namespace": "ops", "olm.owner.kind": "ClusterServiceVersion"}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}));
    let plan = lifted_over(ours);
    assert!(plan.cluster_roles.is_empty(), "never updated");
    assert_eq!(
        plan.grants,
        [Rule::resource(&["get"], &[""], &["configmaps"]), Rule::from(&namespaces_rule())],
        "the binding grants what is there"
    );

    let foreign: ClusterRole =
        object(json!({"metadata": {"name": "r"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}));
    let plan = lifted_over(foreign);
    assert!(plan.is_empty(), "a role named like cluster-admin is not bound: {plan:?}");
}

#[test]
fn existing_cluster_role_bindings_are_left_alone() {
    let bound: ClusterRoleBinding = object(json!({"metadata": {"name": "b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}}));
    let plan = singleton_plan(
        csv(),
        &[role("r", "csv-uid", "secrets")],
        &[binding("b", "csv-uid", "Role", "r")],
        &BTreeMap::new(),
        &BTreeMap::from([("b".to_owned(), bound)]),
    );
    assert_eq!(plan.cluster_roles.len(), 1);
    assert!(plan.bindings.is_empty());
}

/// A binding `name` to Role `r` of the CSV's (labelled and owned as its), for `subjects`.
fn binding_for(name: &str, subjects: Value) -> RoleBinding {
    object(json!({"metadata": owned_meta(name, "ops", "csv-uid"),
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
                  "subjects": subjects}))
}

#[test]
fn roles_labelled_but_not_owned_by_the_csv_are_not_lifted() {
    // Anyone who may write Roles in the operator's namespace can write OLM's owner labels.
    let plan = singleton_plan(
        csv(),
        &[role("r", "someone-else", "secrets")],
        &[binding("b", "someone-else", "Role", "r")],
        &BTreeMap::new(),
        &BTreeMap::new(),
    );
    assert!(plan.is_empty(), "{plan:?}");
    let owned_role_planted_binding = singleton_plan(
        csv(),
        &[role("r", "csv-uid", "secrets")],
        &[binding("b", "someone-else", "Role", "r")],
        &BTreeMap::new(),
        &BTreeMap::new(),
    );
    assert!(owned_role_planted_binding.bindings.is_empty(), "{owned_role_planted_binding:?}");
}

#[test]
fn only_the_csvs_own_accounts_are_bound_and_named_with_their_namespace() {
    let subjects = json!([
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"},
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"},
        {"kind": "ServiceAccount", "name": "plumbus", "namespace": "elsewhere"},
        {"kind": "ServiceAccount", "name": "undeclared", "namespace": "ops"},
        {"kind": "ServiceAccount", "name": "plumbus"},
    ]);
    let roles = [role("r", "csv-uid", "secrets")];
    let bindings = [binding_for("b", subjects)];
    let kept = |subjects: Option<Vec<Subject>>| {
        let subjects = subjects.unwrap_or_default();
        subjects.iter().map(|s| (s.kind.clone(), s.name.clone(), s.namespace.clone())).collect::<Vec<_>>()
    };
    let expected = [("ServiceAccount".to_owned(), "plumbus".to_owned(), Some("ops".to_owned()))];
    let copied = tenant_plan(csv(), "copy-uid", "team-a", &roles, &bindings, &[], &[]);
    assert_eq!(kept(copied.create_bindings[0].subjects.clone()), expected);
    let lifted = singleton_plan(csv(), &roles, &bindings, &BTreeMap::new(), &BTreeMap::new());
    assert_eq!(kept(lifted.bindings[0].subjects.clone()), expected);

    let strangers =
        [binding_for("b", json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}]))];
    let copied = tenant_plan(csv(), "copy-uid", "team-a", &roles, &strangers, &[], &[]);
    assert!(copied.create_bindings.is_empty() && copied.grants == [secrets_get()], "{copied:?}");
    let lifted = singleton_plan(csv(), &roles, &strangers, &BTreeMap::new(), &BTreeMap::new());
    assert!(lifted.bindings.is_empty(), "{lifted:?}");
}

#[test]
fn roles_granting_more_than_the_csv_declares_are_neither_copied_nor_lifted() {
    let roles = [role("r", "csv-uid", "pods")];
    let bindings = [binding("b", "csv-uid", "Role", "r")];
    let copied = tenant_plan(csv(), "copy-uid", "team-a", &roles, &bindings, &[], &[]);
    assert!(copied.is_empty(), "{copied:?}");
    let lifted = singleton_plan(csv(), &roles, &bindings, &BTreeMap::new(), &BTreeMap::new());
    assert!(lifted.is_empty(), "{lifted:?}");
}

#[test]
fn a_binding_is_kept_only_when_its_own_accounts_are_declared_the_roles_rules() {
    // Declared: `plumbus` reads Secrets and ConfigMaps; `helper` only reads ConfigMaps.
    let declared = Declared::of(&object(json!({"permissions": [
        {"serviceAccountName": "plumbus", "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]},
        {"serviceAccountName": "helper", "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}]})));
    let owner = Owner { declared: &declared, ..csv() };
    let bindings = [binding_for("b", json!([{"kind": "ServiceAccount", "name": "helper", "namespace": "ops"}]))];
    let plan = tenant_plan(owner, "copy-uid", "team-a", &[role("r", "csv-uid", "secrets")], &bindings, &[], &[]);
    assert!(plan.create_bindings.is_empty(), "helper was not declared Secrets: {plan:?}");
}

#[test]
fn a_labelled_cluster_role_granting_more_than_declared_is_not_bound() {
    let widened: ClusterRole = object(json!({"metadata": {"name": "r", "labels": {"olm.owner": "plumbus.v1",
        "olm.owner.namespace": "ops", "olm.owner.kind": "ClusterServiceVersion"}},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}));
    let plan = lifted_over(widened);
    assert!(plan.is_empty(), "{plan:?}");
}

#[test]
fn a_labelled_role_in_the_target_not_owned_by_the_copy_is_not_updated() {
    let copied = plan_with(&[], &[]);
    let mut there = copied.create_roles[0].clone();
    there.metadata.owner_references = None;
    there.rules = Some(vec![]);
    let plan = plan_with(&[there], &[]);
    assert!(plan.update_roles.is_empty() && plan.create_bindings.is_empty(), "{plan:?}");
}
