//! Tests of `disclosure`: what an approver is shown of the bindings and aggregations in an Install's content.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

fn cluster_role(value: Value) -> ClusterRole {
    serde_json::from_value(value).expect("a ClusterRole")
}

fn role(value: Value) -> Role {
    serde_json::from_value(value).expect("a Role")
}

/// The default aggregated roles, as a cluster holds them: `view` into `edit` into `admin`.
fn default_cluster_roles() -> Vec<ClusterRole> {
    let aggregated = |name: &str, label: &str, into: Option<&str>| {
        let mut labels = serde_json::Map::new();
        if let Some(into) = into {
            labels.insert(format!("rbac.authorization.k8s.io/aggregate-to-{into}"), json!("true"));
        }
        cluster_role(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
        }))
    };
    let piece = |name: &str, into: &str, resource: &str| {
        cluster_role(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {format!("rbac.authorization.k8s.io/aggregate-to-{into}"): "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": [resource]}],
        }))
    };
    vec![
        aggregated("admin", "rbac.authorization.k8s.io/aggregate-to-admin", None),
        aggregated("edit", "rbac.authorization.k8s.io/aggregate-to-edit", Some("admin")),
        aggregated("view", "rbac.authorization.k8s.io/aggregate-to-view", Some("edit")),
        piece("system:aggregate-to-admin", "admin", "rolebindings"),
        piece("system:aggregate-to-edit", "edit", "secrets"),
        piece("system:aggregate-to-view", "view", "pods"),
    ]
}

fn cluster() -> Roles {
    let mut cluster_roles = default_cluster_roles();
    cluster_roles.push(cluster_role(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "secret-reader"},
        "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"]}],
    })));
    let roles = [role(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "existing", "namespace": "operators"},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}],
    }))];
    Roles::new(&roles, &cluster_roles)
}

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> BindingRule {
    let strings = |items: &[&str]| items.iter().map(|item| (*item).to_owned()).collect();
    BindingRule {
        verbs: strings(verbs),
        api_groups: strings(groups),
        resources: strings(resources),
        ..BindingRule::default()
    }
}

fn subject(kind: &str, namespace: Option<&str>, name: &str) -> PendingSubject {
    PendingSubject { kind: kind.into(), namespace: namespace.map(str::to_owned), name: name.into() }
}

fn role_ref(kind: &str, name: &str) -> PendingRoleRef {
    PendingRoleRef { kind: kind.into(), name: name.into() }
}

fn role_binding(name: &str, role_kind: &str, role_name: &str, subjects: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": "operators"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": subjects,
    })
}

fn disclosed(objects: &[Value]) -> Disclosure {
    disclose(objects, &cluster()).expect("valid content")
}

#[test]
fn content_without_rbac_discloses_nothing() {
    let objects = [
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "operators"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "operators"}}),
    ];
    assert_eq!(disclosed(&objects), Disclosure::default());
    assert_eq!(disclosed(&[]), Disclosure::default());
}

#[test]
fn a_role_binding_to_a_role_of_the_content_shows_its_rules_and_subjects() {
    let objects = [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "leases", "namespace": "operators"},
            "rules": [
                {"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]},
                {"verbs": ["create"], "apiGroups": [""], "resources": ["events"]},
            ],
        }),
        role_binding("leases", "Role", "leases", json!([{"kind": "ServiceAccount", "name": "plumbus"}])),
    ];
    let disclosure = disclosed(&objects);
    assert_eq!(
        disclosure.bindings,
        [PendingBinding {
            kind: "RoleBinding".into(),
            namespace: Some("operators".into()),
            name: "leases".into(),
            role_ref: role_ref("Role", "leases"),
            // The ServiceAccount names no namespace: the API server reads it as the binding's.
            subjects: vec![subject("ServiceAccount", Some("operators"), "plumbus")],
            role_found: true,
            rules: vec![
                rule(&["create"], &[""], &["events"]),
                rule(&["get", "update"], &["coordination.k8s.io"], &["leases"]),
            ],
        }]
    );
    assert!(disclosure.aggregations.is_empty());
}

#[test]
fn a_role_binding_to_a_role_of_the_cluster_finds_it_in_its_namespace() {
    let objects = [role_binding("cm", "Role", "existing", json!([{"kind": "User", "name": "alice"}]))];
    let binding = &disclosed(&objects).bindings[0];
    assert!(binding.role_found);
    assert_eq!(binding.rules, [rule(&["get"], &[""], &["configmaps"])]);
}

#[test]
fn a_role_binding_to_a_cluster_role_of_the_cluster_shows_the_cluster_roles_rules() {
    let objects = [role_binding(
        "read-secrets",
        "ClusterRole",
        "secret-reader",
        json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"}]),
    )];
    let binding = &disclosed(&objects).bindings[0];
    assert_eq!(binding.role_ref, role_ref("ClusterRole", "secret-reader"));
    assert_eq!(binding.subjects, [subject("User", None, "mallory")]);
    assert!(binding.role_found);
    assert_eq!(binding.rules, [rule(&["get", "list"], &[""], &["secrets"])]);
}

#[test]
fn a_binding_to_an_aggregated_cluster_role_shows_the_gathered_rules() {
    let objects = [role_binding("admins", "ClusterRole", "admin", json!([{"kind": "Group", "name": "devs"}]))];
    let binding = &disclosed(&objects).bindings[0];
    assert_eq!(
        binding.rules,
        [
            rule(&["get"], &[""], &["pods"]),
            rule(&["get"], &[""], &["rolebindings"]),
            rule(&["get"], &[""], &["secrets"]),
        ]
    );
}

#[test]
fn a_binding_to_a_missing_role_says_the_role_was_not_found() {
    let objects = [
        role_binding("ghost", "Role", "nowhere", json!([{"kind": "User", "name": "mallory"}])),
        // A Role of that name in another namespace is not the one a RoleBinding refers to.
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "nowhere", "namespace": "elsewhere"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
        }),
    ];
    let binding = &disclosed(&objects).bindings[0];
    assert!(!binding.role_found);
    assert!(binding.rules.is_empty());
    assert_eq!(binding.subjects, [subject("User", None, "mallory")]);
    let yaml = serde_json::to_value(binding).expect("serializes");
    assert_eq!(yaml["roleFound"], json!(false), "an unknown role must not read as one granting nothing: {yaml}");
}

#[test]
fn a_cluster_role_binding_to_a_role_grants_nothing_known() {
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "odd"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "existing"},
        "subjects": [{"kind": "User", "name": "alice"}],
    })];
    assert!(!disclosed(&objects).bindings[0].role_found);
}

#[test]
fn a_cluster_role_binding_names_every_kind_of_subject_sorted() {
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "everyone-reads-secrets"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "secret-reader"},
        "subjects": [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"},
            {"kind": "ServiceAccount", "name": "plumbus", "namespace": "operators"},
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"},
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory"},
        ],
    })];
    let disclosure = disclosed(&objects);
    assert_eq!(
        disclosure.bindings,
        [PendingBinding {
            kind: "ClusterRoleBinding".into(),
            namespace: None,
            name: "everyone-reads-secrets".into(),
            role_ref: role_ref("ClusterRole", "secret-reader"),
            subjects: vec![
                subject("Group", None, "system:authenticated"),
                subject("ServiceAccount", Some("operators"), "plumbus"),
                subject("User", None, "mallory"),
            ],
            role_found: true,
            rules: vec![rule(&["get", "list"], &[""], &["secrets"])],
        }]
    );
}

#[test]
fn bindings_are_sorted_by_kind_namespace_and_name() {
    let crb = |name: &str| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        })
    };
    let objects = [
        role_binding("b", "Role", "existing", json!([])),
        crb("z"),
        role_binding("a", "Role", "existing", json!([])),
        crb("y"),
    ];
    let order: Vec<(String, String)> =
        disclosed(&objects).bindings.into_iter().map(|binding| (binding.kind, binding.name)).collect();
    let expected =
        [("ClusterRoleBinding", "y"), ("ClusterRoleBinding", "z"), ("RoleBinding", "a"), ("RoleBinding", "b")];
    assert_eq!(order, expected.map(|(kind, name)| (kind.to_owned(), name.to_owned())));
}

#[test]
fn a_cluster_role_with_an_aggregation_rule_names_the_roles_it_gathers() {
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "gatherer"},
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        ]},
    })];
    let disclosure = disclosed(&objects);
    assert_eq!(disclosure.aggregations.len(), 1, "{:?}", disclosure.aggregations);
    let aggregation = &disclosure.aggregations[0];
    assert_eq!(aggregation.aggregation_type, AggregationType::Gathers);
    assert_eq!(aggregation.cluster_role, "gatherer");
    assert_eq!(
        aggregation.selectors,
        [LabelSelector {
            match_labels: Some(BTreeMap::from([(
                "rbac.authorization.k8s.io/aggregate-to-edit".to_owned(),
                "true".to_owned()
            )])),
            ..LabelSelector::default()
        }]
    );
    // `view` is selected directly and brings the roles it gathers itself.
    assert_eq!(aggregation.aggregated_roles, ["system:aggregate-to-edit", "system:aggregate-to-view", "view"]);
    assert!(aggregation.aggregates_into.is_empty() && aggregation.labels.is_empty());
}

#[test]
fn an_aggregation_rule_matching_nothing_yet_is_still_shown() {
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "waiting"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/later": "true"}}]},
    })];
    let aggregation = &disclosed(&objects).aggregations[0];
    assert_eq!(aggregation.aggregation_type, AggregationType::Gathers);
    assert!(aggregation.aggregated_roles.is_empty());
    assert_eq!(aggregation.selectors.len(), 1);
}

#[test]
fn an_aggregation_rule_gathers_the_contents_cluster_roles_too() {
    let objects = [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "all-of-mine"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/mine": "true"}}]},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "mine", "labels": {"example.com/mine": "true"}},
            "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        }),
    ];
    let disclosure = disclosed(&objects);
    let gathers: Vec<_> =
        disclosure.aggregations.iter().filter(|a| a.aggregation_type == AggregationType::Gathers).collect();
    assert_eq!(gathers.len(), 1);
    assert_eq!(gathers[0].aggregated_roles, ["mine"]);
    // `mine` is selected by a role of the content, so it extends that role.
    let extends: Vec<_> =
        disclosure.aggregations.iter().filter(|a| a.aggregation_type == AggregationType::Extends).collect();
    assert_eq!(extends.len(), 1);
    assert_eq!(extends[0].cluster_role, "mine");
    assert_eq!(extends[0].aggregates_into, ["all-of-mine"]);
}

#[test]
fn an_aggregate_to_admin_label_shows_the_roles_it_extends() {
    let labels = BTreeMap::from([
        ("rbac.authorization.k8s.io/aggregate-to-admin".to_owned(), "true".to_owned()),
        ("app".to_owned(), "plumbus".to_owned()),
    ]);
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "plumbus-admin", "labels": labels},
        "rules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["secrets"]}],
    })];
    let disclosure = disclosed(&objects);
    assert_eq!(
        disclosure.aggregations,
        [PendingAggregation {
            aggregation_type: AggregationType::Extends,
            cluster_role: "plumbus-admin".into(),
            selectors: Vec::new(),
            aggregated_roles: Vec::new(),
            aggregates_into: vec!["admin".into()],
            labels,
        }]
    );
}

#[test]
fn a_cluster_role_applied_over_one_labelled_aggregate_to_admin_still_extends_admin() {
    // A server-side apply leaves the labels another manager set: the content's role stays in admin.
    let mut cluster_roles = default_cluster_roles();
    cluster_roles.push(cluster_role(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "plumbus-admin", "labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
    })));
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "plumbus-admin", "labels": {"app": "plumbus"}},
        "rules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["secrets"]}],
    })];
    let disclosure = disclose(&objects, &Roles::new(&[], &cluster_roles)).expect("valid content");
    let extends: Vec<&PendingAggregation> = disclosure.aggregations.iter().collect();
    assert_eq!(extends.len(), 1, "{extends:?}");
    assert_eq!(extends[0].aggregation_type, AggregationType::Extends);
    assert_eq!(extends[0].aggregates_into, ["admin"]);
    assert_eq!(extends[0].labels.get("app").map(String::as_str), Some("plumbus"));
    assert!(extends[0].labels.contains_key("rbac.authorization.k8s.io/aggregate-to-admin"), "{:?}", extends[0].labels);
}

#[test]
fn a_binding_to_a_cycle_the_content_applies_again_shows_the_rules_the_cycle_keeps() {
    // The cluster's ring holds a rule from a plain role since deleted; the content applies the ring again, without
    // rules (the aggregation controller's to set), and binds it: the rule stays round the ring, so it is shown.
    let ring = |name: &str, selects: &str, rules: Value| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {format!("example.com/{name}"): "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {format!("example.com/{selects}"): "true"}}]},
            "rules": rules,
        })
    };
    let kept = json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]);
    let cluster_roles = [cluster_role(ring("a", "b", kept.clone())), cluster_role(ring("b", "a", kept))];
    let mut unfilled = [ring("a", "b", Value::Null), ring("b", "a", Value::Null)];
    for role in &mut unfilled {
        role.as_object_mut().expect("object").remove("rules");
    }
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "a-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "a"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "reader"}],
    });
    let objects = [unfilled[0].clone(), unfilled[1].clone(), binding];
    let disclosure = disclose(&objects, &Roles::new(&[], &cluster_roles)).expect("valid content");
    assert_eq!(disclosure.bindings.len(), 1);
    assert_eq!(disclosure.bindings[0].rules, [rule(&["get"], &[""], &["secrets"])]);
}

#[test]
fn an_aggregate_to_view_label_reaches_edit_and_admin_through_the_chain() {
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "plumbus-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
    })];
    assert_eq!(disclosed(&objects).aggregations[0].aggregates_into, ["admin", "edit", "view"]);
}

#[test]
fn an_aggregate_to_label_no_role_selects_is_still_shown() {
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "later", "labels": {"example.com/aggregate-to-superuser": "true"}},
    })];
    let aggregation = &disclosed(&objects).aggregations[0];
    assert_eq!(aggregation.aggregation_type, AggregationType::Extends);
    assert!(aggregation.aggregates_into.is_empty());
    assert_eq!(aggregation.labels.get("example.com/aggregate-to-superuser").map(String::as_str), Some("true"));
}

#[test]
fn any_label_an_aggregation_rule_selects_extends_that_role() {
    let cluster_roles = [cluster_role(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "team"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [{"key": "team", "operator": "Exists"}]}]},
    }))];
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "innocent", "labels": {"team": "payments"}},
    })];
    let disclosure = disclose(&objects, &Roles::new(&[], &cluster_roles)).expect("valid content");
    assert_eq!(disclosure.aggregations[0].aggregates_into, ["team"]);
}

#[test]
fn a_cluster_role_without_aggregation_is_not_listed() {
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "plain", "labels": {"app": "plumbus"}},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
    })];
    assert!(disclosed(&objects).aggregations.is_empty());
}

#[test]
fn a_cluster_role_that_gathers_and_extends_is_listed_twice_in_order() {
    let objects = [json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "both", "labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/both": "true"}}]},
    })];
    let types: Vec<AggregationType> =
        disclosed(&objects).aggregations.iter().map(|aggregation| aggregation.aggregation_type).collect();
    assert_eq!(types, [AggregationType::Gathers, AggregationType::Extends]);
}

#[test]
fn aggregation_cycles_end() {
    let cyclic = |name: &str, own: &str, selects: &str| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {own: "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selects: "true"}}]},
        })
    };
    let objects = [cyclic("a", "example.com/a", "example.com/b"), cyclic("b", "example.com/b", "example.com/a")];
    let disclosure = disclosed(&objects);
    let summary: Vec<(String, AggregationType, Vec<String>, Vec<String>)> = disclosure
        .aggregations
        .into_iter()
        .map(|a| (a.cluster_role, a.aggregation_type, a.aggregated_roles, a.aggregates_into))
        .collect();
    let b = vec!["b".to_owned()];
    let a = vec!["a".to_owned()];
    assert_eq!(
        summary,
        [
            ("a".to_owned(), AggregationType::Gathers, b.clone(), vec![]),
            ("a".to_owned(), AggregationType::Extends, vec![], b),
            ("b".to_owned(), AggregationType::Gathers, a.clone(), vec![]),
            ("b".to_owned(), AggregationType::Extends, vec![], a),
        ]
    );
}

#[test]
fn invalid_rbac_objects_are_errors() {
    let unnamed = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {}});
    assert_eq!(
        disclose(&[unnamed], &Roles::default()),
        Err(RequiredPermissionsError::MissingName { kind: "ClusterRoleBinding".into(), index: 0 })
    );
    let no_namespace = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "x"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}});
    assert_eq!(
        disclose(&[no_namespace], &Roles::default()),
        Err(RequiredPermissionsError::MissingNamespace { kind: "RoleBinding".into(), name: "x".into() })
    );
    let no_role_ref =
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"}});
    assert!(matches!(
        disclose(&[no_role_ref], &Roles::default()),
        Err(RequiredPermissionsError::InvalidRbacObject { kind, name, .. }) if kind == "ClusterRoleBinding" && name == "x"
    ));
}

#[test]
fn objects_of_other_groups_with_rbac_kind_names_are_ignored() {
    let objects = [json!({"apiVersion": "example.com/v1", "kind": "RoleBinding", "metadata": {"name": "x"}})];
    assert_eq!(disclosed(&objects), Disclosure::default());
}

#[test]
fn disclosure_does_not_depend_on_content_order() {
    let objects = vec![
        role_binding(
            "b",
            "ClusterRole",
            "admin",
            json!([{"kind": "User", "name": "bob"}, {"kind": "User", "name": "al"}]),
        ),
        role_binding("a", "Role", "existing", json!([{"kind": "User", "name": "carol"}])),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "x", "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "w", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        }),
    ];
    let mut reversed = objects.clone();
    reversed.reverse();
    assert_eq!(disclosed(&objects), disclosed(&reversed));
}
