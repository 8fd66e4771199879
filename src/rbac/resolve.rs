//! The rules a user holds, from the RBAC objects of a cluster, as kube-apiserver's RBAC authorizer resolves them
//! (`RulesFor`): ClusterRoleBindings everywhere, RoleBindings in their namespace, RoleBindings to ClusterRoles, and
//! aggregated ClusterRoles as their aggregation controller fills them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject};

use super::rule::Rule;
use super::subject::UserInfo;
use crate::labels::selector_matches;

/// A binding whose role does not exist: it grants nothing, and is reported rather than ignored.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
#[error("{binding_kind} {binding} refers to {role_kind} {role}, which does not exist")]
pub struct MissingRole {
    pub binding_kind: &'static str,
    /// `namespace/name` for RoleBindings, `name` for ClusterRoleBindings.
    pub binding: String,
    pub role_kind: String,
    pub role: String,
}

/// Roles and ClusterRoles by name, with aggregated ClusterRoles resolved.
#[derive(Clone, Debug, Default)]
pub struct Roles {
    /// The rules of Roles as read, and of ClusterRoles with aggregation resolved, shared between a snapshot and
    /// every overlay made from it: an Install pass overlays its content's roles on the cluster's (about a thousand
    /// ClusterRoles, `admin`, `edit` and `view` aggregating hundreds of rules), and copying them for each pass was
    /// most of the controller's allocations.
    roles: Arc<HashMap<(String, String), Vec<Rule>>>,
    cluster_roles: Arc<HashMap<String, Vec<Rule>>>,
    /// What overlays added or replaced, read before the shared maps.
    added_roles: HashMap<(String, String), Vec<Rule>>,
    added_cluster_roles: HashMap<String, Vec<Rule>>,
    /// As read, to re-aggregate when roles are added; shared with the store they were read from, where there is
    /// one, rather than copied.
    raw_cluster_roles: Vec<Arc<ClusterRole>>,
}

impl Roles {
    pub fn new(roles: &[Role], cluster_roles: &[ClusterRole]) -> Self {
        Self::shared(roles, cluster_roles.iter().cloned().map(Arc::new).collect())
    }

    /// As [`Roles::new`], the ClusterRoles shared (a reflector store's, say) rather than copied.
    pub fn shared<R: std::borrow::Borrow<Role>>(roles: &[R], cluster_roles: Vec<Arc<ClusterRole>>) -> Self {
        let mut by_name = HashMap::new();
        insert_roles(&mut by_name, roles);
        Self {
            roles: Arc::new(by_name),
            cluster_roles: Arc::new(aggregate_cluster_roles(&cluster_roles)),
            raw_cluster_roles: cluster_roles,
            ..Self::default()
        }
    }

    /// These roles with `roles` and `cluster_roles` applied over any of the same name: what bindings to them may grant
    /// while and once content bringing them is applied (a role replaced is taken to keep its rules too, see
    /// [`applied_over`]). Equal to the roles read anew so applied; aggregation is resolved again
    /// only when an added ClusterRole aggregates, or an aggregating ClusterRole selects its labels or those of the one
    /// it replaces: otherwise no other ClusterRole's rules can change, and the cluster's stay shared.
    pub fn overlay(&self, roles: &[Role], cluster_roles: &[ClusterRole]) -> Self {
        let mut overlaid = self.clone();
        for role in roles {
            let key =
                (role.metadata.namespace.clone().unwrap_or_default(), role.metadata.name.clone().unwrap_or_default());
            let mut rules: Vec<Rule> = role.rules.iter().flatten().map(Rule::from).collect();
            // Until the content's Role is applied, a binding applied before it grants what the Role holds now.
            add_missing(&mut rules, self.role_rules(&key.0, &key.1).unwrap_or_default());
            overlaid.added_roles.insert(key, rules);
        }
        let mut aggregate_again = false;
        for role in cluster_roles {
            let replaced: Vec<Arc<ClusterRole>> =
                overlaid.raw_cluster_roles.iter().filter(|existing| same_name(existing, role)).cloned().collect();
            let role = &applied_over(role, replaced.last().map(AsRef::as_ref));
            overlaid.raw_cluster_roles.retain(|existing| !same_name(existing, role));
            overlaid.raw_cluster_roles.push(Arc::new(role.clone()));
            // An aggregating role's rules are others'; a selected one's, or the replaced one's, are part of others'.
            aggregate_again = aggregate_again
                || role.aggregation_rule.is_some()
                || std::iter::once(role)
                    .chain(replaced.iter().map(AsRef::as_ref))
                    .any(|candidate| selected(&overlaid.raw_cluster_roles, candidate));
            let name = role.metadata.name.clone().unwrap_or_default();
            overlaid.added_cluster_roles.insert(name, role.rules.iter().flatten().map(Rule::from).collect());
        }
        if aggregate_again {
            overlaid.cluster_roles = Arc::new(aggregate_cluster_roles(&overlaid.raw_cluster_roles));
            overlaid.added_cluster_roles.clear();
        }
        overlaid
    }

    /// Every ClusterRole as read (or overlaid), before aggregation: what aggregation selectors are evaluated
    /// against.
    pub fn cluster_role_objects(&self) -> &[Arc<ClusterRole>] {
        &self.raw_cluster_roles
    }

    /// The rules of a Role, if it exists.
    pub fn role_rules(&self, namespace: &str, name: &str) -> Option<&[Rule]> {
        let key = (namespace.to_owned(), name.to_owned());
        self.added_roles.get(&key).or_else(|| self.roles.get(&key)).map(Vec::as_slice)
    }

    /// The rules of a ClusterRole after aggregation, if it exists.
    pub fn cluster_role_rules(&self, name: &str) -> Option<&[Rule]> {
        self.added_cluster_roles.get(name).or_else(|| self.cluster_roles.get(name)).map(Vec::as_slice)
    }

    /// The rules of the role a binding refers to; `namespace` is the binding's, for Roles.
    pub fn role_ref_rules(&self, role_ref: &RoleRef, namespace: &str) -> Option<&[Rule]> {
        match role_ref.kind.as_str() {
            "Role" => self.role_rules(namespace, &role_ref.name),
            "ClusterRole" => self.cluster_role_rules(&role_ref.name),
            _ => None,
        }
    }
}

/// The RBAC objects of a cluster, as read by the controller.
#[derive(Clone, Debug, Default)]
pub struct RbacSnapshot {
    pub roles: Roles,
    role_bindings: BTreeMap<String, Vec<Arc<RoleBinding>>>,
    cluster_role_bindings: Vec<Arc<ClusterRoleBinding>>,
}

impl RbacSnapshot {
    pub fn new(
        roles: &[Role],
        cluster_roles: &[ClusterRole],
        role_bindings: Vec<RoleBinding>,
        cluster_role_bindings: Vec<ClusterRoleBinding>,
    ) -> Self {
        let role_bindings: Vec<Arc<RoleBinding>> = role_bindings.into_iter().map(Arc::new).collect();
        Self::shared(
            roles,
            cluster_roles.iter().cloned().map(Arc::new).collect(),
            &role_bindings,
            cluster_role_bindings.into_iter().map(Arc::new).collect(),
        )
    }

    /// As [`RbacSnapshot::new`], the objects shared (a reflector store's, say) rather than copied: the snapshot
    /// holds the resolved rules, and the bindings and ClusterRoles themselves.
    pub fn shared<R: std::borrow::Borrow<Role>>(
        roles: &[R],
        cluster_roles: Vec<Arc<ClusterRole>>,
        role_bindings: &[Arc<RoleBinding>],
        cluster_role_bindings: Vec<Arc<ClusterRoleBinding>>,
    ) -> Self {
        let mut by_namespace: BTreeMap<String, Vec<Arc<RoleBinding>>> = BTreeMap::new();
        for binding in role_bindings {
            by_namespace
                .entry(binding.metadata.namespace.clone().unwrap_or_default())
                .or_default()
                .push(binding.clone());
        }
        Self { roles: Roles::shared(roles, cluster_roles), role_bindings: by_namespace, cluster_role_bindings }
    }

    /// The cluster-wide objects alone, shared (reflector stores', say) rather than copied: what every check of
    /// cluster-wide rules, and of local ones with [`RbacSnapshot::local_rules_for`], reads.
    pub fn cluster_wide(
        cluster_roles: Vec<Arc<ClusterRole>>,
        cluster_role_bindings: Vec<Arc<ClusterRoleBinding>>,
    ) -> Self {
        Self { roles: Roles::shared::<Role>(&[], cluster_roles), role_bindings: BTreeMap::new(), cluster_role_bindings }
    }

    /// The rules `user` holds cluster-wide: those of ClusterRoleBindings.
    pub fn cluster_rules_for(&self, user: &UserInfo) -> (Vec<Rule>, Vec<MissingRole>) {
        let mut rules = Vec::new();
        let mut missing = Vec::new();
        for binding in &self.cluster_role_bindings {
            if !binding.subjects.iter().flatten().any(|subject| applies_to(user, subject, "")) {
                continue;
            }
            match self.roles.role_ref_rules(&binding.role_ref, "").filter(|_| binding.role_ref.kind == "ClusterRole") {
                Some(found) => rules.extend_from_slice(found),
                None => missing.push(MissingRole {
                    binding_kind: "ClusterRoleBinding",
                    binding: binding.metadata.name.clone().unwrap_or_default(),
                    role_kind: binding.role_ref.kind.clone(),
                    role: binding.role_ref.name.clone(),
                }),
            }
        }
        (rules, missing)
    }

    /// The rules `user` holds in `namespace` through RoleBindings there, beyond its cluster-wide rules.
    pub fn namespace_rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<Rule>, Vec<MissingRole>) {
        let mut rules = Vec::new();
        let mut missing = Vec::new();
        for binding in self.role_bindings.get(namespace).into_iter().flatten() {
            if !binding.subjects.iter().flatten().any(|subject| applies_to(user, subject, namespace)) {
                continue;
            }
            match self.roles.role_ref_rules(&binding.role_ref, namespace) {
                Some(found) => rules.extend_from_slice(found),
                None => missing.push(MissingRole {
                    binding_kind: "RoleBinding",
                    binding: format!("{namespace}/{}", binding.metadata.name.clone().unwrap_or_default()),
                    role_kind: binding.role_ref.kind.clone(),
                    role: binding.role_ref.name.clone(),
                }),
            }
        }
        (rules, missing)
    }

    /// The rules the ServiceAccount `account` of `account_namespace` holds in `namespace` (what it is bound to
    /// cluster-wide, and in `namespace` by `bindings` to `roles`), and those it holds everywhere: the two a CSV's
    /// permissions are checked against.
    pub fn account_rules_in(
        &self,
        account_namespace: &str,
        account: &str,
        namespace: &str,
        roles: &[Role],
        bindings: &[RoleBinding],
    ) -> (Vec<Rule>, Vec<Rule>) {
        let user = UserInfo::service_account(account_namespace, account);
        let everywhere = self.cluster_rules_for(&user).0;
        let mut there = everywhere.clone();
        there.extend(self.local_rules_for(&user, namespace, roles, bindings));
        (there, everywhere)
    }

    /// The rules `user` holds in `namespace` through `bindings` there, with the Roles they refer to taken from
    /// `roles` (the namespace's) and the ClusterRoles from this snapshot: for a snapshot of the cluster-wide objects
    /// only, shared by many checks, and one namespace's objects read for one of them.
    pub fn local_rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
        roles: &[Role],
        bindings: &[RoleBinding],
    ) -> Vec<Rule> {
        let mut rules = Vec::new();
        for binding in bindings {
            if !binding.subjects.iter().flatten().any(|subject| applies_to(user, subject, namespace)) {
                continue;
            }
            let role_ref = &binding.role_ref;
            match role_ref.kind.as_str() {
                "Role" => {
                    let role = roles.iter().find(|role| {
                        role.metadata.name.as_deref() == Some(role_ref.name.as_str())
                            && role.metadata.namespace.as_deref() == Some(namespace)
                    });
                    rules.extend(role.into_iter().flat_map(|role| role.rules.iter().flatten()).map(Rule::from));
                }
                "ClusterRole" => {
                    rules.extend_from_slice(self.roles.cluster_role_rules(&role_ref.name).unwrap_or_default())
                }
                _ => {}
            }
        }
        rules
    }

    /// Every rule `user` holds in `namespace` (cluster-wide rules included), or cluster-wide only with `None`:
    /// what kube-apiserver's `RulesFor` returns.
    pub fn rules_for(&self, user: &UserInfo, namespace: Option<&str>) -> (Vec<Rule>, Vec<MissingRole>) {
        let (mut rules, mut missing) = self.cluster_rules_for(user);
        if let Some(namespace) = namespace {
            let (local, local_missing) = self.namespace_rules_for(user, namespace);
            rules.extend(local);
            missing.extend(local_missing);
        }
        (rules, missing)
    }
}

/// Whether a binding subject names the user, as kube-apiserver's `appliesToUser` decides: a ServiceAccount
/// subject without a namespace means the binding's own.
pub fn applies_to(user: &UserInfo, subject: &Subject, binding_namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.name == subject.name,
        "Group" => user.groups.contains(&subject.name),
        "ServiceAccount" => {
            let namespace = subject.namespace.as_deref().filter(|ns| !ns.is_empty()).unwrap_or(binding_namespace);
            !namespace.is_empty() && user.is_service_account(namespace, &subject.name)
        }
        _ => false,
    }
}

/// `role` as applying it over `existing` may leave it, for what it grants and how it aggregates: labels and an
/// aggregationRule that another field manager set stay unless the apply sets them (which of them this apply's manager
/// set before is not known here, so all are taken to stay: an aggregation shown or required that may not happen,
/// never one missed); and the rules it holds now stay with the content's: a binding applied before the role grants
/// them meanwhile, an aggregated role's rules are the aggregation controller's (an apply without them leaves them,
/// and round a cycle they never leave).
fn applied_over(role: &ClusterRole, existing: Option<&ClusterRole>) -> ClusterRole {
    let mut applied = role.clone();
    if let Some(existing) = existing {
        let mut labels = existing.metadata.labels.clone().unwrap_or_default();
        labels.extend(role.metadata.labels.clone().unwrap_or_default());
        applied.metadata.labels = (!labels.is_empty()).then_some(labels);
        if applied.aggregation_rule.is_none() {
            applied.aggregation_rule = existing.aggregation_rule.clone();
        }
        let mut rules = applied.rules.take().unwrap_or_default();
        add_missing(&mut rules, existing.rules.as_deref().unwrap_or_default());
        applied.rules = (!rules.is_empty() || role.rules.is_some()).then_some(rules);
    }
    applied
}

/// Adds to `rules` those of `more` it lacks.
fn add_missing<T: Clone + PartialEq>(rules: &mut Vec<T>, more: &[T]) {
    for rule in more {
        if !rules.contains(rule) {
            rules.push(rule.clone());
        }
    }
}

/// Whether two ClusterRoles have one name, as resolution keys them (no name is the empty one).
fn same_name(one: &ClusterRole, other: &ClusterRole) -> bool {
    one.metadata.name.as_deref().unwrap_or_default() == other.metadata.name.as_deref().unwrap_or_default()
}

fn insert_roles<R: std::borrow::Borrow<Role>>(into: &mut HashMap<(String, String), Vec<Rule>>, roles: &[R]) {
    for role in roles.iter().map(std::borrow::Borrow::borrow) {
        let key = (role.metadata.namespace.clone().unwrap_or_default(), role.metadata.name.clone().unwrap_or_default());
        into.insert(key, role.rules.iter().flatten().map(Rule::from).collect());
    }
}

/// Whether an aggregating ClusterRole of `all` selects `candidate`'s labels.
fn selected(all: &[Arc<ClusterRole>], candidate: &ClusterRole) -> bool {
    all.iter().any(|role| selects(role, candidate))
}

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// Whether `aggregated` carries an aggregationRule one of whose selectors matches `candidate`'s labels.
pub(super) fn selects(aggregated: &ClusterRole, candidate: &ClusterRole) -> bool {
    let labels = candidate.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
    aggregated
        .aggregation_rule
        .iter()
        .flat_map(|rule| rule.cluster_role_selectors.iter().flatten())
        .any(|selector| selector_matches(selector, labels))
}

/// The rules of every ClusterRole, each aggregated one resolved to what it may grant (see [`gathered`]).
fn aggregate_cluster_roles(cluster_roles: &[Arc<ClusterRole>]) -> HashMap<String, Vec<Rule>> {
    let by_name: HashMap<&str, &ClusterRole> =
        cluster_roles.iter().map(|role| (role.metadata.name.as_deref().unwrap_or_default(), role.as_ref())).collect();
    by_name
        .iter()
        .map(|(name, role)| {
            let rules = match role.aggregation_rule {
                None => role.rules.iter().flatten().map(Rule::from).collect(),
                Some(_) => gathered(role, &by_name, cluster_roles),
            };
            ((*name).to_owned(), rules)
        })
        .collect()
}

/// The rules an aggregated ClusterRole grants now or will once Kubernetes' aggregation controller has run on what the
/// cluster holds now: the rules every role reachable from it through selectors holds now, its own included, each rule
/// once, in the order met (depth first, roles in `all`'s order). (That controller reads roles from its cache: a rule
/// removed a moment ago may still be copied, and round a cycle kept; this sees the cluster as the controller's own
/// cache does once it has caught up.)
///
/// The controller sets an aggregated role's rules to those the roles it selects hold as it runs, aggregated ones
/// included. So the role ends with the rules of every plain role it reaches; until it runs, the authorizer grants
/// what the role holds now, and what it copies from an aggregated role not yet filled anew; and in a cycle of
/// aggregated roles a rule, once held, never leaves (each copies it back from the other, kubernetes#69652), though
/// the plain role it came from be gone. Once the controller has settled, every role reachable from an aggregated one
/// holds only rules it holds too, so this is exactly what the role holds, as the authorizer reads it.
fn gathered(root: &ClusterRole, by_name: &HashMap<&str, &ClusterRole>, all: &[Arc<ClusterRole>]) -> Vec<Rule> {
    let mut rules: Vec<Rule> = Vec::new();
    let mut seen_rules: HashSet<Rule> = HashSet::new();
    let mut visited: HashSet<&str> = HashSet::from([root.metadata.name.as_deref().unwrap_or_default()]);
    let mut stack: Vec<&ClusterRole> = vec![root];
    while let Some(role) = stack.pop() {
        for rule in role.rules.iter().flatten().map(Rule::from) {
            if seen_rules.insert(rule.clone()) {
                rules.push(rule);
            }
        }
        // Pushed in reverse, so that the first selected is met first.
        let selected: Vec<&ClusterRole> = all
            .iter()
            .map(AsRef::as_ref)
            .filter(|candidate| selects(role, candidate))
            .filter_map(|candidate| by_name.get(candidate.metadata.name.as_deref().unwrap_or_default()).copied())
            .collect();
        for next in selected.into_iter().rev() {
            if visited.insert(next.metadata.name.as_deref().unwrap_or_default()) {
                stack.push(next);
            }
        }
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("object")
    }

    #[test]
    fn a_rule_held_round_a_cycle_counts_though_the_role_it_came_from_is_gone() {
        // The aggregation controller filled a and b from a Secret reader, since deleted: each copies the rule back
        // from the other, so a binding to either grants it for good.
        let secrets = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]);
        let cluster_roles: Vec<ClusterRole> = vec![
            object(json!({"metadata": {"name": "a", "labels": {"ring": "a"}}, "rules": secrets,
                          "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"ring": "b"}}]}})),
            object(json!({"metadata": {"name": "b", "labels": {"ring": "b"}}, "rules": secrets,
                          "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"ring": "a"}}]}})),
            object(json!({"metadata": {"name": "outside", "labels": {"ring": "b"}},
                          "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"ring": "c"}}]}})),
        ];
        let roles = Roles::new(&[], &cluster_roles);
        for name in ["a", "b"] {
            assert_eq!(roles.cluster_role_rules(name), Some(&[Rule::resource(&["get"], &[""], &["secrets"])][..]));
        }
        assert_eq!(roles.cluster_role_rules("outside"), Some(&[][..]), "it selects nothing");
    }

    #[test]
    fn local_rules_from_a_cluster_snapshot_are_those_of_a_full_snapshot() {
        let roles: Vec<Role> = vec![
            object(json!({"metadata": {"name": "reader", "namespace": "ns"},
                          "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})),
            object(json!({"metadata": {"name": "reader", "namespace": "other"},
                          "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]})),
        ];
        let cluster_roles: Vec<ClusterRole> = vec![
            object(json!({"metadata": {"name": "viewer", "labels": {"agg": "true"}},
                          "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})),
            object(json!({"metadata": {"name": "gathered"},
                          "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "true"}}]}})),
        ];
        let bindings: Vec<RoleBinding> = vec![
            object(json!({"metadata": {"name": "a", "namespace": "ns"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                          "subjects": [{"kind": "ServiceAccount", "name": "robot"}]})),
            object(json!({"metadata": {"name": "b", "namespace": "ns"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gathered"},
                          "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "ns"}]})),
            object(json!({"metadata": {"name": "c", "namespace": "ns"},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                          "subjects": [{"kind": "ServiceAccount", "name": "someone-else"}]})),
        ];
        let user = UserInfo::service_account("ns", "robot");
        let full = RbacSnapshot::new(&roles, &cluster_roles, bindings.clone(), Vec::new());
        let cluster_only = RbacSnapshot::new(&[], &cluster_roles, Vec::new(), Vec::new());
        let local = cluster_only.local_rules_for(&user, "ns", &roles, &bindings);
        assert_eq!(local, full.namespace_rules_for(&user, "ns").0);
        assert_eq!(
            local,
            [Rule::resource(&["get"], &[""], &["secrets"]), Rule::resource(&["list"], &[""], &["configmaps"])],
            "the namespace's Role, and the aggregated ClusterRole"
        );
    }
}
