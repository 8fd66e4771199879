//! Properties of the RBAC engine over generated rules: coverage is reflexive and agrees with breakdown,
//! compaction never changes what is covered, the held-rule index answers as a plain scan does, and missing
//! permissions are never less and never more than what the holder lacks; roles overlaid with an Install's content
//! resolve as the same roles read anew; an aggregated ClusterRole, through chains and cycles, resolves to every rule
//! Kubernetes' aggregation controller may give it, and to exactly what it holds once that controller has settled.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use olmv2::rbac::compact::compact;
use olmv2::rbac::held::HeldRules;
use olmv2::rbac::missing::rule_of;
use olmv2::rbac::resolve::Roles;
use olmv2::rbac::{
    breakdown, covers, missing_permissions, rule_covers, Grant, RbacSnapshot, RequiredPermissions, Rule, Scope,
    ScopedRule, UserInfo,
};
use proptest::prelude::*;
use proptest::sample::subsequence;

fn values(pool: &'static [&'static str], min: usize) -> impl Strategy<Value = Vec<String>> {
    subsequence(pool, min..=pool.len()).prop_map(|picked| picked.into_iter().map(str::to_owned).collect())
}

const VERBS: &[&str] = &["get", "list", "create", "delete", "escalate", "*"];
const GROUPS: &[&str] = &["", "apps", "rbac.authorization.k8s.io", "*"];
const RESOURCES: &[&str] =
    &["pods", "pods/log", "deployments", "deployments/scale", "*/scale", "secrets", "roles", "*"];
const NAMES: &[&str] = &["a", "b", "*"];
const URLS: &[&str] = &["/healthz", "/api", "/api/*", "/api*", "/api**", "/apis/*", "/metrics", "*"];

fn resource_rule() -> impl Strategy<Value = Rule> {
    (values(VERBS, 1), values(GROUPS, 1), values(RESOURCES, 1), values(NAMES, 0)).prop_map(
        |(verbs, api_groups, resources, resource_names)| Rule {
            verbs,
            api_groups,
            resources,
            resource_names,
            non_resource_urls: vec![],
        },
    )
}

fn url_rule() -> impl Strategy<Value = Rule> {
    (values(VERBS, 1), values(URLS, 1)).prop_map(|(verbs, non_resource_urls)| Rule {
        verbs,
        non_resource_urls,
        ..Rule::default()
    })
}

/// Valid PolicyRules: resource rules or URL rules, never both (the API server refuses a mix).
fn rule() -> impl Strategy<Value = Rule> {
    prop_oneof![3 => resource_rule(), 1 => url_rule()]
}

fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![Just(Scope::Cluster), Just(Scope::Namespace("a".into())), Just(Scope::Namespace("b".into()))]
}

fn snapshot_granting(rules: &[Rule]) -> RbacSnapshot {
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta { name: Some("held".into()), ..Default::default() },
        rules: Some(rules.iter().map(Into::into).collect()),
        ..Default::default()
    };
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "held"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "held"},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": "olm"}]
    }))
    .expect("binding");
    RbacSnapshot::new(&[], &[role], vec![], vec![binding])
}

fn installer() -> UserInfo {
    UserInfo::service_account("olm", "installer")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_rule_covers_itself(rule in rule()) {
        prop_assert!(covers(std::slice::from_ref(&rule), std::slice::from_ref(&rule)));
    }

    #[test]
    fn a_rule_covers_every_piece_of_its_breakdown(rule in rule()) {
        for atom in breakdown(&rule) {
            prop_assert!(rule_covers(&rule, &atom), "{rule:?} does not cover {atom:?}");
        }
    }

    #[test]
    fn compaction_never_changes_what_is_covered(rules in prop::collection::vec(rule(), 0..8)) {
        let compacted = compact(&rules);
        prop_assert!(covers(&compacted, &rules), "compaction lost coverage: {rules:?} -> {compacted:?}");
        prop_assert!(covers(&rules, &compacted), "compaction added coverage: {rules:?} -> {compacted:?}");
        prop_assert_eq!(compact(&compacted), compacted.clone(), "compaction is not stable");
    }

    #[test]
    fn the_held_index_answers_as_a_scan(held in prop::collection::vec(rule(), 0..8), wanted in rule()) {
        let index = HeldRules::new(held.clone());
        for atom in breakdown(&wanted) {
            prop_assert_eq!(index.covers_atom(&atom), held.iter().any(|rule| rule_covers(rule, &atom)), "{:?}", atom);
        }
    }

    #[test]
    fn nothing_is_missing_for_a_holder_of_everything(
        apply in prop::collection::vec((scope(), rule()), 0..6),
        granted in prop::collection::vec((scope(), prop::collection::vec(rule(), 0..3)), 0..3),
    ) {
        let required = RequiredPermissions {
            apply: apply.into_iter().map(|(scope, rule)| ScopedRule { scope, rule }).collect(),
            grants: granted.into_iter().map(|(scope, rules)| Grant {
                object: "Role x".into(), scope, rules: Some(rules),
                exemption: Rule::resource(&["escalate"], &["rbac.authorization.k8s.io"], &["roles"]).named(&["x"]),
            }).collect(),
        };
        let missing = missing_permissions(&required, &snapshot_granting(&Rule::full_authority()), &installer());
        prop_assert!(missing.permissions.is_empty(), "{:?}", missing.permissions);
    }

    #[test]
    fn missing_is_never_less_and_never_more_than_what_is_lacked(
        held in prop::collection::vec(rule(), 0..6),
        wanted in prop::collection::vec(rule(), 1..6),
    ) {
        let required = RequiredPermissions {
            apply: wanted.iter().cloned().map(|rule| ScopedRule { scope: Scope::Cluster, rule }).collect(),
            grants: vec![],
        };
        let missing = missing_permissions(&required, &snapshot_granting(&held), &installer());
        let pending: Vec<Rule> = missing.permissions.iter().map(rule_of).collect();
        let mut after_approval = held.clone();
        after_approval.extend(pending.iter().cloned());
        prop_assert!(covers(&after_approval, &wanted), "approving {pending:?} still leaves {wanted:?} uncovered");
        for atom in pending.iter().flat_map(breakdown) {
            prop_assert!(!held.iter().any(|rule| rule_covers(rule, &atom)), "{atom:?} is pending but held");
            prop_assert!(covers(&wanted, std::slice::from_ref(&atom)), "{atom:?} is pending but not wanted");
        }
    }
}

const ROLE_NAMES: &[&str] = &["a", "b", "c", "d", "e"];
const LABELS: &[&str] = &["x", "y", "z"];

fn label_key(label: &str) -> String {
    format!("aggregate-to-{label}")
}

/// A selector of aggregationRule: on one label by matchLabels or an expression of any operator, or `{}`.
fn selector() -> impl Strategy<Value = serde_json::Value> {
    let label = proptest::sample::select(LABELS);
    prop_oneof![
        3 => label.clone().prop_map(|label| serde_json::json!({"matchLabels": {label_key(label): "true"}})),
        2 => (label, proptest::sample::select(&["In", "NotIn", "Exists", "DoesNotExist"][..])).prop_map(
            |(label, operator)| {
                let values = if operator.ends_with("In") { serde_json::json!(["true"]) } else { serde_json::json!(null) };
                serde_json::json!({"matchExpressions": [{"key": label_key(label), "operator": operator, "values": values}]})
            }
        ),
        1 => Just(serde_json::json!({})),
    ]
}

/// A ClusterRole labelled with any of x, y and z, or not labelled; aggregating by one or more selectors, or plain;
/// holding rules, or none set, either way (an aggregated role holds what its aggregation controller last copied, or what its author wrote):
/// chains and cycles of aggregation happen.
fn cluster_role() -> impl Strategy<Value = ClusterRole> {
    let name = proptest::sample::select(ROLE_NAMES);
    let labels = subsequence(LABELS, 0..=LABELS.len());
    let selectors = proptest::option::of(proptest::collection::vec(selector(), 1..3));
    let rules = proptest::option::of(proptest::collection::vec(rule(), 0..3));
    (name, labels, selectors, rules).prop_map(|(name, labels, selectors, rules)| {
        let mut role: ClusterRole = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        // No labels at all, or none set: an apply leaves others' either way.
        role.metadata.labels = Some(labels.iter().map(|label| (label_key(label), "true".into())).collect())
            .filter(|labels: &std::collections::BTreeMap<String, String>| !labels.is_empty());
        role.aggregation_rule = selectors
            .map(|selectors| serde_json::from_value(serde_json::json!({"clusterRoleSelectors": selectors})).unwrap());
        role.rules = rules.map(|rules| rules.iter().map(Into::into).collect());
        role
    })
}

/// A Role of namespace a or b.
fn namespaced_role() -> impl Strategy<Value = Role> {
    (
        proptest::sample::select(ROLE_NAMES),
        proptest::sample::select(&["a", "b"][..]),
        proptest::collection::vec(rule(), 0..3),
    )
        .prop_map(|(name, namespace, rules)| {
            let mut role: Role =
                serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": namespace}}))
                    .unwrap();
            role.rules = Some(rules.iter().map(Into::into).collect());
            role
        })
}

/// Roles with distinct names, as a cluster or one piece of content holds them.
fn distinct<T: kube::Resource>(roles: Vec<T>) -> Vec<T> {
    let mut seen = std::collections::BTreeSet::new();
    roles.into_iter().filter(|role| seen.insert((role.meta().namespace.clone(), role.meta().name.clone()))).collect()
}

/// What `role` applied over `existing` may grant: labels and an aggregationRule it does not set stay (another field
/// manager may have set them), and the rules `existing` holds stay beside its own (granted until it is applied, and
/// an aggregated role's are the aggregation controller's).
fn applied_over(role: &ClusterRole, existing: Option<&ClusterRole>) -> ClusterRole {
    let Some(existing) = existing else { return role.clone() };
    let mut applied = role.clone();
    let mut labels = existing.metadata.labels.clone().unwrap_or_default();
    labels.extend(role.metadata.labels.clone().unwrap_or_default());
    applied.metadata.labels = Some(labels);
    applied.aggregation_rule = role.aggregation_rule.clone().or_else(|| existing.aggregation_rule.clone());
    applied.rules = Some(union(role.rules.clone().unwrap_or_default(), existing.rules.iter().flatten()));
    applied
}

/// `first`, then each of `then` it does not hold yet.
fn union<'a, T: Clone + PartialEq + 'a>(mut first: Vec<T>, then: impl IntoIterator<Item = &'a T>) -> Vec<T> {
    for item in then {
        if !first.contains(item) {
            first.push(item.clone());
        }
    }
    first
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn overlaid_roles_resolve_as_the_same_roles_read_anew(
        cluster in proptest::collection::vec(cluster_role(), 0..6).prop_map(distinct),
        content in proptest::collection::vec(cluster_role(), 0..3).prop_map(distinct),
        more in proptest::collection::vec(cluster_role(), 0..2).prop_map(distinct),
        cluster_roles in proptest::collection::vec(namespaced_role(), 0..4).prop_map(distinct),
        content_roles in proptest::collection::vec(namespaced_role(), 0..3).prop_map(distinct),
    ) {
        let overlaid = Roles::new(&cluster_roles, &cluster).overlay(&content_roles, &content).overlay(&[], &more);
        // The cluster after the content and then more is applied: each over the role of its name, last.
        let mut applied = cluster.clone();
        for role in content.iter().chain(&more) {
            let existing = applied.iter().find(|existing| existing.metadata.name == role.metadata.name).cloned();
            applied.retain(|existing| existing.metadata.name != role.metadata.name);
            applied.push(applied_over(role, existing.as_ref()));
        }
        let mut applied_roles = cluster_roles.clone();
        for role in &content_roles {
            let same = |existing: &Role| (&existing.metadata.namespace, &existing.metadata.name)
                == (&role.metadata.namespace, &role.metadata.name);
            let mut applied = role.clone();
            if let Some(existing) = applied_roles.iter().find(|existing| same(existing)) {
                applied.rules = Some(union(role.rules.clone().unwrap_or_default(), existing.rules.iter().flatten()));
            }
            applied_roles.retain(|existing| !same(existing));
            applied_roles.push(applied);
        }
        let anew = Roles::new(&applied_roles, &applied);
        for name in ROLE_NAMES {
            prop_assert_eq!(overlaid.cluster_role_rules(name), anew.cluster_role_rules(name), "{}", name);
            for namespace in ["a", "b"] {
                prop_assert_eq!(overlaid.role_rules(namespace, name), anew.role_rules(namespace, name), "{}/{}", namespace, name);
            }
        }
    }
}

/// Whether `selector` selects `labels`, written from Kubernetes' label selector semantics for this test alone.
fn reference_selects(selector: &serde_json::Value, labels: &std::collections::BTreeMap<String, String>) -> bool {
    let pairs = selector["matchLabels"].as_object().into_iter().flatten();
    let by_pairs = pairs.into_iter().all(|(key, value)| labels.get(key).map(String::as_str) == value.as_str());
    let by_expressions = selector["matchExpressions"].as_array().into_iter().flatten().all(|expression| {
        let value = labels.get(expression["key"].as_str().unwrap());
        let listed =
            |value: &String| expression["values"].as_array().unwrap().iter().any(|v| v.as_str() == Some(value));
        match expression["operator"].as_str().unwrap() {
            "In" => value.is_some_and(listed),
            "NotIn" => !value.is_some_and(listed),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            other => panic!("operator {other}"),
        }
    });
    by_pairs && by_expressions
}

type Held = std::collections::BTreeMap<String, std::collections::BTreeSet<Rule>>;

fn held_now(roles: &[ClusterRole]) -> Held {
    roles
        .iter()
        .map(|role| (role.metadata.name.clone().unwrap(), role.rules.iter().flatten().map(Rule::from).collect()))
        .collect()
}

/// One run of Kubernetes' aggregation controller for `role`: it sets the role's rules to those the roles its
/// selectors match hold now, other than itself. Answers whether they changed.
fn aggregate_once(role: &ClusterRole, roles: &[ClusterRole], held: &mut Held) -> bool {
    let Some(aggregation) = &role.aggregation_rule else { return false };
    let selectors = serde_json::to_value(aggregation).unwrap()["clusterRoleSelectors"].clone();
    let mut rules = std::collections::BTreeSet::new();
    for candidate in roles.iter().filter(|candidate| candidate.metadata.name != role.metadata.name) {
        let labels = candidate.metadata.labels.clone().unwrap_or_default();
        if selectors.as_array().into_iter().flatten().any(|selector| reference_selects(selector, &labels)) {
            rules.extend(held[candidate.metadata.name.as_ref().unwrap()].iter().cloned());
        }
    }
    let name = role.metadata.name.clone().unwrap();
    let changed = held[&name] != rules;
    held.insert(name, rules);
    changed
}

/// `roles` holding what the aggregation controller settles on, run role after role until nothing changes; `None`
/// if it has not settled after many rounds.
fn settled(roles: &[ClusterRole]) -> Option<Vec<ClusterRole>> {
    let mut held = held_now(roles);
    for _ in 0..64 {
        let mut changed = false;
        for role in roles {
            changed |= aggregate_once(role, roles, &mut held);
        }
        if !changed {
            let mut settled = roles.to_vec();
            for role in &mut settled {
                role.rules = Some(held[role.metadata.name.as_ref().unwrap()].iter().map(Into::into).collect());
            }
            return Some(settled);
        }
    }
    None
}

fn resolved(roles: &Roles, name: &str) -> std::collections::BTreeSet<Rule> {
    roles.cluster_role_rules(name).unwrap_or_default().iter().cloned().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Whatever order the aggregation controller runs in, a role never holds a rule its resolution lacks: what a
    /// binding to it is shown, and required, is every rule the authorizer may give through it.
    #[test]
    fn an_aggregated_role_never_holds_a_rule_its_resolution_lacks(
        roles in proptest::collection::vec(cluster_role(), 0..6).prop_map(distinct),
        runs in proptest::collection::vec(0..6usize, 0..24),
    ) {
        let resolution = Roles::new(&[], &roles);
        let mut held = held_now(&roles);
        let check = |held: &Held| -> Result<(), TestCaseError> {
            for (name, rules) in held {
                let resolved = resolved(&resolution, name);
                let lacking: Vec<&Rule> = rules.difference(&resolved).collect();
                prop_assert!(lacking.is_empty(), "{} holds {:?}, which its resolution lacks", name, lacking);
            }
            Ok(())
        };
        check(&held)?;
        for run in runs.into_iter().filter(|run| *run < roles.len()) {
            aggregate_once(&roles[run], &roles, &mut held);
            check(&held)?;
        }
    }

    /// Once the aggregation controller has settled, each role resolves to exactly what it holds, as the authorizer
    /// reads it: nothing more is taken to be held, or granted, than is.
    #[test]
    fn once_settled_a_role_resolves_to_what_it_holds(
        roles in proptest::collection::vec(cluster_role(), 0..6).prop_map(distinct),
    ) {
        let Some(settled) = settled(&roles) else { return Err(TestCaseError::reject("never settles")) };
        let resolution = Roles::new(&[], &settled);
        for (name, rules) in held_now(&settled) {
            prop_assert_eq!(resolved(&resolution, &name), rules, "{}", name);
        }
    }
}
