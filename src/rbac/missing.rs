//! Missing permissions: what applying some content demands minus what the applier holds, compacted into the very
//! structure of an Install's `status.pending.permissions`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::compact::compact;
use super::held::HeldRules;
use super::required::{RequiredPermissions, Scope};
use super::resolve::{MissingRole, RbacSnapshot};
use super::rule::{breakdown, Rule};
use super::subject::UserInfo;
use crate::api::v2alpha1::{PendingPermission, PermissionScope};

/// What the applier lacks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MissingPermissions {
    /// The rules to approve, compacted and sorted.
    pub permissions: Vec<PendingPermission>,
    /// Bindings of the applier whose roles do not exist: they grant nothing, so their rules count as missing.
    pub missing_roles: Vec<MissingRole>,
}

/// The rules `user` holds in each scope that `required` touches.
struct HeldByScope {
    cluster: HeldRules,
    namespaces: HashMap<String, HeldRules>,
}

impl HeldByScope {
    fn new(snapshot: &RbacSnapshot, user: &UserInfo, required: &RequiredPermissions) -> (Self, Vec<MissingRole>) {
        let (cluster_rules, mut missing_roles) = snapshot.cluster_rules_for(user);
        let namespaces: BTreeSet<&str> = required
            .apply
            .iter()
            .map(|scoped| &scoped.scope)
            .chain(required.grants.iter().map(|grant| &grant.scope))
            .filter_map(|scope| match scope {
                Scope::Namespace(namespace) => Some(namespace.as_str()),
                Scope::Cluster => None,
            })
            .collect();
        let mut by_namespace = HashMap::new();
        for namespace in namespaces {
            let (local, local_missing) = snapshot.namespace_rules_for(user, namespace);
            missing_roles.extend(local_missing);
            let mut rules = cluster_rules.clone();
            rules.extend(local);
            by_namespace.insert(namespace.to_owned(), HeldRules::new(rules));
        }
        missing_roles.sort();
        missing_roles.dedup();
        (Self { cluster: HeldRules::new(cluster_rules), namespaces: by_namespace }, missing_roles)
    }

    fn at(&self, scope: &Scope) -> &HeldRules {
        match scope {
            Scope::Cluster => &self.cluster,
            Scope::Namespace(namespace) => self.namespaces.get(namespace).unwrap_or(&self.cluster),
        }
    }
}

/// What `user` lacks to apply content demanding `required`, judged on the RBAC objects of `snapshot`.
pub fn missing_permissions(
    required: &RequiredPermissions,
    snapshot: &RbacSnapshot,
    user: &UserInfo,
) -> MissingPermissions {
    let (held, missing_roles) = HeldByScope::new(snapshot, user, required);
    let mut uncovered: BTreeMap<Scope, Vec<Rule>> = BTreeMap::new();
    let mut record = |scope: &Scope, rule: &Rule| {
        let at = held.at(scope);
        let atoms: Vec<Rule> = breakdown(rule).into_iter().filter(|atom| !at.covers_atom(atom)).collect();
        if !atoms.is_empty() {
            uncovered.entry(scope.clone()).or_default().extend(atoms);
        }
    };
    for scoped in &required.apply {
        record(&scoped.scope, &scoped.rule);
    }
    for grant in &required.grants {
        let exempt = breakdown(&grant.exemption).iter().all(|atom| held.at(&grant.scope).covers_atom(atom));
        if exempt {
            continue;
        }
        match &grant.rules {
            Some(rules) => rules.iter().for_each(|rule| record(&grant.scope, rule)),
            None => record(&grant.scope, &grant.exemption),
        }
    }
    MissingPermissions { permissions: to_pending(uncovered), missing_roles }
}

/// Compacts each scope's rules and lists a namespaced rule once with every namespace it is missing in.
pub fn to_pending(uncovered: BTreeMap<Scope, Vec<Rule>>) -> Vec<PendingPermission> {
    let mut cluster = Vec::new();
    let mut namespaces_of: BTreeMap<Rule, BTreeSet<String>> = BTreeMap::new();
    for (scope, rules) in uncovered {
        let compacted = compact(&rules);
        match scope {
            Scope::Cluster => cluster.extend(compacted),
            Scope::Namespace(namespace) => {
                for rule in compacted {
                    namespaces_of.entry(rule).or_default().insert(namespace.clone());
                }
            }
        }
    }
    let pending = |scope: PermissionScope, namespaces: Vec<String>, rule: Rule| PendingPermission {
        scope,
        namespaces,
        verbs: rule.verbs,
        api_groups: rule.api_groups,
        resources: rule.resources,
        resource_names: rule.resource_names,
        non_resource_urls: rule.non_resource_urls,
    };
    let mut permissions: Vec<PendingPermission> =
        cluster.into_iter().map(|rule| pending(PermissionScope::Cluster, Vec::new(), rule)).collect();
    permissions.extend(
        namespaces_of
            .into_iter()
            .map(|(rule, namespaces)| pending(PermissionScope::Namespaced, namespaces.into_iter().collect(), rule)),
    );
    permissions.sort();
    permissions
}

/// A pending permission as the rule it grants.
pub fn rule_of(permission: &PendingPermission) -> Rule {
    Rule {
        verbs: permission.verbs.clone(),
        api_groups: permission.api_groups.clone(),
        resources: permission.resources.clone(),
        resource_names: permission.resource_names.clone(),
        non_resource_urls: permission.non_resource_urls.clone(),
    }
}

/// A pending rule as a person reads it: `[namespaces] verbs on resources (names)`.
pub fn describe_permission(permission: &PendingPermission) -> String {
    let place = match permission.scope {
        PermissionScope::Cluster => "cluster-wide".to_owned(),
        PermissionScope::Namespaced => format!("in {}", permission.namespaces.join(",")),
    };
    let what = if permission.non_resource_urls.is_empty() {
        let groups: Vec<String> =
            permission.api_groups.iter().map(|g| if g.is_empty() { "core".to_owned() } else { g.clone() }).collect();
        let mut text = format!("{} ({})", permission.resources.join(","), groups.join(","));
        if !permission.resource_names.is_empty() {
            text.push_str(&format!(" named {}", permission.resource_names.join(",")));
        }
        text
    } else {
        format!("URLs {}", permission.non_resource_urls.join(","))
    };
    format!("{} {what} {place}", permission.verbs.join(","))
}
