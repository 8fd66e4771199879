//! The RBAC engine end to end on objects: the rules a subject holds, what content requires (escalation included),
//! and what is missing, in the structure of `status.pending.permissions`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use olmv2::api::v2alpha1::{PendingPermission, PermissionScope};
use olmv2::category::Categorized;
use olmv2::rbac::{
    covers, missing_permissions, required_permissions, KindIndex, MissingRole, RbacSnapshot, RequiredPermissionsError,
    Roles, Rule, UserInfo,
};
use serde_json::{json, Value};

fn typed<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("valid object")
}

fn cluster_role(name: &str, labels: Value, rules: Value) -> ClusterRole {
    typed(json!({"metadata": {"name": name, "labels": labels}, "rules": rules}))
}

fn role(namespace: &str, name: &str, rules: Value) -> Role {
    typed(json!({"metadata": {"name": name, "namespace": namespace}, "rules": rules}))
}

fn cluster_binding(name: &str, role: &str, subjects: Value) -> ClusterRoleBinding {
    typed(
        json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}, "subjects": subjects}),
    )
}

fn binding(namespace: &str, name: &str, kind: &str, role: &str, subjects: Value) -> RoleBinding {
    typed(
        json!({"metadata": {"name": name, "namespace": namespace}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role}, "subjects": subjects}),
    )
}

fn sa(namespace: &str, name: &str) -> Value {
    json!([{"kind": "ServiceAccount", "name": name, "namespace": namespace}])
}

fn installer() -> UserInfo {
    UserInfo::service_account("olm", "plumbus-plan")
}

fn pods_reader() -> Value {
    json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
}

// === effective rules ===

#[test]
fn cluster_role_bindings_apply_everywhere_and_role_bindings_only_in_their_namespace() {
    let snapshot = RbacSnapshot::new(
        &[role("team-a", "secrets", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]))],
        &[cluster_role("pods-reader", json!({}), pods_reader())],
        vec![binding("team-a", "secrets", "Role", "secrets", sa("olm", "plumbus-plan"))],
        vec![cluster_binding("pods", "pods-reader", sa("olm", "plumbus-plan"))],
    );
    let secrets = [Rule::resource(&["get"], &[""], &["secrets"])];
    let pods = [Rule::resource(&["list"], &[""], &["pods"])];
    let (in_team_a, _) = snapshot.rules_for(&installer(), Some("team-a"));
    let (in_team_b, _) = snapshot.rules_for(&installer(), Some("team-b"));
    let (cluster_wide, _) = snapshot.rules_for(&installer(), None);
    assert!(covers(&in_team_a, &secrets) && covers(&in_team_a, &pods));
    assert!(!covers(&in_team_b, &secrets) && covers(&in_team_b, &pods));
    assert!(!covers(&cluster_wide, &secrets) && covers(&cluster_wide, &pods));
}

#[test]
fn role_binding_to_a_cluster_role_grants_it_in_the_binding_namespace_only() {
    let snapshot = RbacSnapshot::new(
        &[],
        &[cluster_role("pods-reader", json!({}), pods_reader())],
        vec![binding("team-a", "pods", "ClusterRole", "pods-reader", sa("olm", "plumbus-plan"))],
        vec![],
    );
    let pods = [Rule::resource(&["get"], &[""], &["pods"])];
    assert!(covers(&snapshot.rules_for(&installer(), Some("team-a")).0, &pods));
    assert!(!covers(&snapshot.rules_for(&installer(), Some("team-b")).0, &pods));
    assert!(!covers(&snapshot.rules_for(&installer(), None).0, &pods));
}

#[test]
fn subjects_match_users_groups_and_service_accounts_as_kubernetes_does() {
    let snapshot = RbacSnapshot::new(
        &[],
        &[cluster_role("pods-reader", json!({}), pods_reader())],
        vec![
            // A ServiceAccount subject without a namespace means the binding's namespace.
            binding(
                "olm",
                "local-sa",
                "ClusterRole",
                "pods-reader",
                json!([{"kind": "ServiceAccount", "name": "plumbus-plan"}]),
            ),
            binding(
                "team-a",
                "group",
                "ClusterRole",
                "pods-reader",
                json!([{"kind": "Group", "name": "system:serviceaccounts:olm", "apiGroup": "rbac.authorization.k8s.io"}]),
            ),
            binding(
                "team-b",
                "user",
                "ClusterRole",
                "pods-reader",
                json!([{"kind": "User", "name": "system:serviceaccount:olm:plumbus-plan", "apiGroup": "rbac.authorization.k8s.io"}]),
            ),
            binding(
                "team-c",
                "other-sa",
                "ClusterRole",
                "pods-reader",
                json!([{"kind": "ServiceAccount", "name": "plumbus-plan"}]),
            ),
        ],
        vec![],
    );
    let pods = [Rule::resource(&["get"], &[""], &["pods"])];
    for namespace in ["olm", "team-a", "team-b"] {
        assert!(covers(&snapshot.rules_for(&installer(), Some(namespace)).0, &pods), "{namespace}");
    }
    assert!(!covers(&snapshot.rules_for(&installer(), Some("team-c")).0, &pods), "team-c names team-c's SA");
    let alice = UserInfo::new("alice", &["system:authenticated"]);
    assert!(!covers(&snapshot.rules_for(&alice, Some("team-a")).0, &pods));
}

#[test]
fn aggregated_cluster_roles_hold_the_rules_of_the_roles_they_select() {
    let aggregated: ClusterRole = typed(json!({
        "metadata": {"name": "operators-admin"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-operators-admin": "true"}}]},
        "rules": []
    }));
    let nested: ClusterRole = typed(json!({
        "metadata": {"name": "nested", "labels": {"aggregate-to-operators-admin": "true"}},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-nested": "true"}}]},
    }));
    let snapshot = RbacSnapshot::new(
        &[],
        &[
            aggregated,
            nested,
            cluster_role(
                "plumbai-admin",
                json!({"aggregate-to-operators-admin": "true"}),
                json!([{"apiGroups": ["how.theydoit.com"], "resources": ["plumbai"], "verbs": ["*"]}]),
            ),
            cluster_role(
                "grumbos-admin",
                json!({"aggregate-to-nested": "true"}),
                json!([{"apiGroups": ["manufacturing.how.theydoit.com"], "resources": ["grumbos"], "verbs": ["*"]}]),
            ),
            cluster_role(
                "unrelated",
                json!({"aggregate-to-view": "true"}),
                json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]}]),
            ),
        ],
        vec![],
        vec![cluster_binding("admins", "operators-admin", sa("olm", "plumbus-plan"))],
    );
    let (rules, missing) = snapshot.rules_for(&installer(), None);
    assert!(missing.is_empty());
    assert!(covers(&rules, &[Rule::resource(&["delete"], &["how.theydoit.com"], &["plumbai"])]));
    assert!(covers(&rules, &[Rule::resource(&["create"], &["manufacturing.how.theydoit.com"], &["grumbos"])]));
    assert!(!covers(&rules, &[Rule::resource(&["get"], &[""], &["secrets"])]));
}

#[test]
fn bindings_to_missing_roles_are_reported() {
    let snapshot = RbacSnapshot::new(
        &[],
        &[],
        vec![binding("team-a", "gone", "Role", "deleted-role", sa("olm", "plumbus-plan"))],
        vec![cluster_binding("gone", "deleted-cluster-role", sa("olm", "plumbus-plan"))],
    );
    let (rules, missing) = snapshot.rules_for(&installer(), Some("team-a"));
    assert!(rules.is_empty());
    assert_eq!(
        missing.iter().map(ToString::to_string).collect::<Vec<_>>(),
        vec![
            "ClusterRoleBinding gone refers to ClusterRole deleted-cluster-role, which does not exist",
            "RoleBinding team-a/gone refers to Role deleted-role, which does not exist",
        ]
    );
}

// === required and missing ===

fn configmap(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}})
}

fn pending(scope: PermissionScope, namespaces: &[&str], rule: Rule) -> PendingPermission {
    PendingPermission {
        scope,
        namespaces: namespaces.iter().map(|ns| (*ns).to_owned()).collect(),
        verbs: rule.verbs,
        api_groups: rule.api_groups,
        resources: rule.resources,
        resource_names: rule.resource_names,
        non_resource_urls: rule.non_resource_urls,
    }
}

fn missing_for(objects: &[Value], snapshot: &RbacSnapshot) -> Vec<PendingPermission> {
    let required = required_permissions(objects, &KindIndex::kubernetes(), &snapshot.roles).expect("required");
    missing_permissions(&required, snapshot, &installer()).permissions
}

#[test]
fn applying_objects_needs_create_per_resource_and_the_object_verbs_per_name() {
    let objects = [configmap("operators", "a"), configmap("operators", "b"), configmap("team-a", "a")];
    let missing = missing_for(&objects, &RbacSnapshot::default());
    assert_eq!(
        missing,
        vec![
            pending(
                PermissionScope::Namespaced,
                &["operators"],
                Rule::resource(&["delete", "get", "patch", "update"], &[""], &["configmaps"]).named(&["a", "b"])
            ),
            pending(
                PermissionScope::Namespaced,
                &["operators", "team-a"],
                Rule::resource(&["create"], &[""], &["configmaps"])
            ),
            pending(
                PermissionScope::Namespaced,
                &["team-a"],
                Rule::resource(&["delete", "get", "patch", "update"], &[""], &["configmaps"]).named(&["a"])
            ),
        ]
    );
}

#[test]
fn nothing_is_missing_for_a_holder_of_everything() {
    let snapshot = RbacSnapshot::new(
        &[],
        &[cluster_role(
            "cluster-admin",
            json!({}),
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        )],
        vec![],
        vec![cluster_binding("admin", "cluster-admin", sa("olm", "plumbus-plan"))],
    );
    let objects = [
        configmap("operators", "a"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}, "subjects": []}),
    ];
    assert_eq!(missing_for(&objects, &snapshot), vec![]);
}

#[test]
fn a_binding_to_cluster_admin_shows_that_grant() {
    let snapshot = RbacSnapshot::new(
        &[],
        &[cluster_role(
            "cluster-admin",
            json!({}),
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        )],
        vec![],
        vec![],
    );
    let objects = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "plumbus-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "plumbus", "namespace": "operators"}]}),
    ];
    let missing = missing_for(&objects, &snapshot);
    assert!(
        missing.contains(&pending(PermissionScope::Cluster, &[], Rule::resource(&["*"], &["*"], &["*"]))),
        "{missing:#?}"
    );
    assert!(
        missing.contains(&pending(PermissionScope::Cluster, &[], Rule::non_resource(&["*"], &["*"]))),
        "{missing:#?}"
    );
}

#[test]
fn a_role_in_the_content_needs_its_rules_unless_the_applier_may_escalate() {
    let objects = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "plumbus", "namespace": "operators"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}),
    ];
    let without = missing_for(&objects, &RbacSnapshot::default());
    assert!(
        without.contains(&pending(
            PermissionScope::Namespaced,
            &["operators"],
            Rule::resource(&["get", "list"], &[""], &["secrets"])
        )),
        "{without:#?}"
    );

    let escalator = RbacSnapshot::new(
        &[role(
            "operators",
            "rbac-manager",
            json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["create", "get", "patch", "update", "delete", "escalate"]}]),
        )],
        &[],
        vec![binding("operators", "rbac-manager", "Role", "rbac-manager", sa("olm", "plumbus-plan"))],
        vec![],
    );
    assert_eq!(missing_for(&objects, &escalator), vec![]);
}

#[test]
fn a_binding_needs_the_role_rules_unless_the_applier_may_bind_that_role() {
    let cluster = [cluster_role(
        "secret-reader",
        json!({}),
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
    )];
    let objects = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "read", "namespace": "operators"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "secret-reader"}, "subjects": []}),
    ];
    let without = missing_for(&objects, &RbacSnapshot::new(&[], &cluster, vec![], vec![]));
    assert!(
        without.contains(&pending(
            PermissionScope::Namespaced,
            &["operators"],
            Rule::resource(&["get"], &[""], &["secrets"])
        )),
        "{without:#?}"
    );

    let binder_role = role(
        "operators",
        "binder",
        json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": ["create", "get", "patch", "update", "delete"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["secret-reader"]}]),
    );
    let binder = RbacSnapshot::new(
        &[binder_role],
        &cluster,
        vec![binding("operators", "binder", "Role", "binder", sa("olm", "plumbus-plan"))],
        vec![],
    );
    assert_eq!(missing_for(&objects, &binder), vec![]);

    // `bind` on another role is no exemption.
    let wrong_role = role(
        "operators",
        "binder",
        json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["view"]}]),
    );
    let wrong = RbacSnapshot::new(
        &[wrong_role],
        &cluster,
        vec![binding("operators", "binder", "Role", "binder", sa("olm", "plumbus-plan"))],
        vec![],
    );
    assert!(missing_for(&objects, &wrong).contains(&pending(
        PermissionScope::Namespaced,
        &["operators"],
        Rule::resource(&["get"], &[""], &["secrets"])
    )));
}

#[test]
fn a_binding_to_a_role_of_the_content_needs_that_role_rules() {
    let objects = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "plumbus-operator"},
            "rules": [{"apiGroups": ["how.theydoit.com"], "resources": ["plumbai"], "verbs": ["*"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "plumbus-operator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "plumbus-operator"}, "subjects": []}),
    ];
    let missing = missing_for(&objects, &RbacSnapshot::default());
    assert!(
        missing.contains(&pending(
            PermissionScope::Cluster,
            &[],
            Rule::resource(&["*"], &["how.theydoit.com"], &["plumbai"])
        )),
        "{missing:#?}"
    );
}

#[test]
fn a_binding_to_a_role_that_exists_nowhere_needs_bind_on_it() {
    let objects = [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "not-there"}, "subjects": []}),
    ];
    let missing = missing_for(&objects, &RbacSnapshot::default());
    assert!(
        missing.contains(&pending(
            PermissionScope::Cluster,
            &[],
            Rule::resource(&["bind"], &["rbac.authorization.k8s.io"], &["clusterroles"]).named(&["not-there"])
        )),
        "{missing:#?}"
    );
}

#[test]
fn an_aggregated_cluster_role_in_the_content_needs_full_authority() {
    let objects =
        [json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "gatherer"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}})];
    let missing = missing_for(&objects, &RbacSnapshot::default());
    assert!(
        missing.contains(&pending(PermissionScope::Cluster, &[], Rule::resource(&["*"], &["*"], &["*"]))),
        "{missing:#?}"
    );
}

#[test]
fn held_rules_in_one_namespace_do_not_satisfy_another() {
    let snapshot = RbacSnapshot::new(
        &[],
        &[cluster_role(
            "edit-configmaps",
            json!({}),
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
        )],
        vec![binding("operators", "edit", "ClusterRole", "edit-configmaps", sa("olm", "plumbus-plan"))],
        vec![],
    );
    let objects = [configmap("operators", "a"), configmap("team-a", "a")];
    let missing = missing_for(&objects, &snapshot);
    assert!(missing.iter().all(|permission| permission.namespaces == ["team-a"]), "{missing:#?}");
    assert_eq!(missing.len(), 2);
}

#[test]
fn the_applier_missing_roles_are_reported_with_the_result() {
    let snapshot = RbacSnapshot::new(
        &[],
        &[],
        vec![binding("operators", "gone", "Role", "gone", sa("olm", "plumbus-plan"))],
        vec![],
    );
    let required = required_permissions(&[configmap("operators", "a")], &KindIndex::kubernetes(), &snapshot.roles)
        .expect("required");
    let missing = missing_permissions(&required, &snapshot, &installer());
    assert_eq!(
        missing.missing_roles,
        vec![MissingRole {
            binding_kind: "RoleBinding",
            binding: "operators/gone".into(),
            role_kind: "Role".into(),
            role: "gone".into()
        }]
    );
    assert_eq!(missing.permissions.len(), 2);
}

#[test]
fn unknown_kinds_and_incomplete_objects_are_errors_naming_them() {
    let roles = Roles::default();
    let kinds = KindIndex::kubernetes();
    let monitor = json!({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {"name": "plumbus", "namespace": "operators"}});
    let error = required_permissions(&[monitor], &kinds, &roles).expect_err("unknown kind");
    assert_eq!(error.to_string(), "ServiceMonitor (monitoring.coreos.com/v1) \"plumbus\" is a kind that neither the cluster nor a CustomResourceDefinition in the content defines");
    assert_eq!(error.category(), "ContentKindUnknown");

    let no_namespace = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token"}});
    assert_eq!(
        required_permissions(&[no_namespace], &kinds, &roles),
        Err(RequiredPermissionsError::MissingNamespace { kind: "Secret".into(), name: "token".into() })
    );
    let no_name = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "a"}});
    assert_eq!(
        required_permissions(&[no_name], &kinds, &roles),
        Err(RequiredPermissionsError::MissingName { kind: "Secret".into(), index: 0 })
    );
    assert_eq!(
        required_permissions(&[json!({"metadata": {}})], &kinds, &roles),
        Err(RequiredPermissionsError::MissingType { index: 0 })
    );
}

#[test]
fn crds_in_the_content_define_kinds_for_the_rest_of_it() {
    let objects = [
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "plumbai.how.theydoit.com"},
            "spec": {"group": "how.theydoit.com", "scope": "Namespaced", "names": {"kind": "Plumbus", "plural": "plumbai"}, "versions": []}}),
        json!({"apiVersion": "how.theydoit.com/v2alpha1", "kind": "Plumbus", "metadata": {"name": "default", "namespace": "operators"}}),
    ];
    let missing = missing_for(&objects, &RbacSnapshot::default());
    assert!(
        missing.contains(&pending(
            PermissionScope::Namespaced,
            &["operators"],
            Rule::resource(&["create"], &["how.theydoit.com"], &["plumbai"])
        )),
        "{missing:#?}"
    );
    assert!(
        missing.contains(&pending(
            PermissionScope::Cluster,
            &[],
            Rule::resource(&["create"], &["apiextensions.k8s.io"], &["customresourcedefinitions"])
        )),
        "{missing:#?}"
    );
}
