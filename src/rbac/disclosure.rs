//! What an approver must see beside the missing rules: whom each binding of the content binds to which role, with
//! the rules that role grants, and which ClusterRoles of the content take part in aggregation.
//!
//! The pending rules say what the ServiceAccount lacks, not what the content does with it: a binding is created by
//! whoever holds the rules it grants, so "create rolebindings" plus the rules of a role reads the same whether the
//! content binds its own operator or user `mallory`. An aggregated ClusterRole grants rules it does not list, and a
//! ClusterRole whose labels an aggregationRule selects (`aggregate-to-admin`) adds its rules to a role, such as
//! `admin`, that many already hold. Both are shown as structured data in `status.pending`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject};
use serde_json::Value;

use super::kinds::group_of;
use super::required::{RequiredPermissionsError, RBAC_GROUP};
use super::resolve::{selects, Roles};
use super::rule::Rule;
use crate::api::v2alpha1::{
    AggregationType, BindingRule, PendingAggregation, PendingBinding, PendingRoleRef, PendingSubject,
};

/// A label key containing this asks to be aggregated into another ClusterRole (`rbac.authorization.k8s.io/
/// aggregate-to-admin`): shown even when no aggregationRule selects it yet, since one may later.
pub const AGGREGATE_TO: &str = "aggregate-to-";

/// The bindings and aggregations of some content, in the shape of `status.pending`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Disclosure {
    /// Every RoleBinding and ClusterRoleBinding, sorted by kind, namespace and name.
    pub bindings: Vec<PendingBinding>,
    /// Every ClusterRole that gathers or extends other roles' rules, sorted by name and type.
    pub aggregations: Vec<PendingAggregation>,
}

/// The bindings and aggregating ClusterRoles of `objects` (plain manifests, namespaces already mapped), resolved
/// against `cluster` with the content's own Roles and ClusterRoles overlaid, as the cluster will hold them once the
/// content is applied: a binding to a role of the content finds it, and aggregation sees the content's ClusterRoles.
/// Objects other than RBAC ones are ignored; an RBAC object that is not valid is an error, as in
/// [`required_permissions`](super::required_permissions).
pub fn disclose(objects: &[Value], cluster: &Roles) -> Result<Disclosure, RequiredPermissionsError> {
    let content = ContentRbac::read(objects)?;
    let view = cluster.overlay(&content.roles, &content.cluster_roles);

    let mut bindings: Vec<PendingBinding> = content.bindings.iter().map(|binding| binding.disclose(&view)).collect();
    bindings.sort();

    // Each of the content's ClusterRoles as applied over the cluster's: labels set by others stay.
    let all = view.cluster_role_objects();
    let applied = content.cluster_roles.iter().filter_map(|role| {
        all.iter().rev().find(|overlaid| overlaid.metadata.name == role.metadata.name).map(AsRef::as_ref)
    });
    let mut aggregations: Vec<PendingAggregation> = applied.flat_map(|role| aggregations_of(role, all)).collect();
    aggregations.sort_by(|a, b| (&a.cluster_role, a.aggregation_type).cmp(&(&b.cluster_role, b.aggregation_type)));
    Ok(Disclosure { bindings, aggregations })
}

/// The RBAC objects of the content, typed.
#[derive(Default)]
struct ContentRbac {
    roles: Vec<Role>,
    cluster_roles: Vec<ClusterRole>,
    bindings: Vec<Binding>,
}

/// A RoleBinding or ClusterRoleBinding, with what disclosing it needs.
struct Binding {
    kind: &'static str,
    /// The RoleBinding's namespace; `None` for a ClusterRoleBinding.
    namespace: Option<String>,
    name: String,
    role_ref: RoleRef,
    subjects: Vec<Subject>,
}

impl ContentRbac {
    fn read(objects: &[Value]) -> Result<Self, RequiredPermissionsError> {
        let mut content = Self::default();
        for (index, object) in objects.iter().enumerate() {
            if object["apiVersion"].as_str().map(group_of) != Some(RBAC_GROUP) {
                continue;
            }
            let kind = object["kind"].as_str().unwrap_or_default();
            if !matches!(kind, "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding") {
                continue;
            }
            let Some(name) = object["metadata"]["name"].as_str().filter(|name| !name.is_empty()) else {
                return Err(RequiredPermissionsError::MissingName { kind: kind.to_owned(), index });
            };
            let namespace = object["metadata"]["namespace"].as_str().filter(|ns| !ns.is_empty());
            let namespaced = matches!(kind, "Role" | "RoleBinding");
            if namespaced && namespace.is_none() {
                return Err(RequiredPermissionsError::MissingNamespace {
                    kind: kind.to_owned(),
                    name: name.to_owned(),
                });
            }
            match kind {
                "Role" => content.roles.push(typed(object, kind, name)?),
                "ClusterRole" => content.cluster_roles.push(typed(object, kind, name)?),
                "RoleBinding" => {
                    let binding: RoleBinding = typed(object, kind, name)?;
                    content.bindings.push(Binding {
                        kind: "RoleBinding",
                        namespace: namespace.map(str::to_owned),
                        name: name.to_owned(),
                        role_ref: role_ref(object, kind, name)?,
                        subjects: binding.subjects.unwrap_or_default(),
                    });
                }
                _ => {
                    let binding: ClusterRoleBinding = typed(object, kind, name)?;
                    content.bindings.push(Binding {
                        kind: "ClusterRoleBinding",
                        namespace: None,
                        name: name.to_owned(),
                        role_ref: role_ref(object, kind, name)?,
                        subjects: binding.subjects.unwrap_or_default(),
                    });
                }
            }
        }
        Ok(content)
    }
}

fn typed<T: serde::de::DeserializeOwned>(
    object: &Value,
    kind: &str,
    name: &str,
) -> Result<T, RequiredPermissionsError> {
    serde_json::from_value(object.clone()).map_err(|error| RequiredPermissionsError::InvalidRbacObject {
        kind: kind.to_owned(),
        name: name.to_owned(),
        reason: error.to_string(),
    })
}

/// The binding's roleRef, read on its own: the typed binding would take a missing one for an empty one, which the API
/// server refuses.
fn role_ref(object: &Value, kind: &str, name: &str) -> Result<RoleRef, RequiredPermissionsError> {
    serde_json::from_value(object["roleRef"].clone()).map_err(|error| RequiredPermissionsError::InvalidRbacObject {
        kind: kind.to_owned(),
        name: name.to_owned(),
        reason: format!("roleRef: {error}"),
    })
}

impl Binding {
    fn disclose(&self, roles: &Roles) -> PendingBinding {
        // A ClusterRoleBinding can only refer to a ClusterRole; the API server refuses any other, and it grants nothing.
        let usable = self.kind == "RoleBinding" || self.role_ref.kind == "ClusterRole";
        let rules = usable
            .then(|| roles.role_ref_rules(&self.role_ref, self.namespace.as_deref().unwrap_or_default()))
            .flatten();
        let mut subjects: Vec<PendingSubject> = self.subjects.iter().map(|subject| self.subject(subject)).collect();
        subjects.sort();
        subjects.dedup();
        PendingBinding {
            kind: self.kind.to_owned(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            role_ref: PendingRoleRef { kind: self.role_ref.kind.clone(), name: self.role_ref.name.clone() },
            subjects,
            role_found: rules.is_some(),
            rules: rules.map(binding_rules).unwrap_or_default(),
        }
    }

    /// The subject as the API server reads it: a ServiceAccount without a namespace is the RoleBinding's own.
    fn subject(&self, subject: &Subject) -> PendingSubject {
        let named = subject.namespace.clone().filter(|ns| !ns.is_empty());
        let namespace = match subject.kind.as_str() {
            "ServiceAccount" => named.or_else(|| self.namespace.clone()),
            _ => named,
        };
        PendingSubject { kind: subject.kind.clone(), namespace, name: subject.name.clone() }
    }
}

fn binding_rules(rules: &[Rule]) -> Vec<BindingRule> {
    let unique: BTreeSet<&Rule> = rules.iter().collect();
    unique
        .into_iter()
        .map(|rule| BindingRule {
            verbs: rule.verbs.clone(),
            api_groups: rule.api_groups.clone(),
            resources: rule.resources.clone(),
            resource_names: rule.resource_names.clone(),
            non_resource_urls: rule.non_resource_urls.clone(),
        })
        .collect()
}

/// How `role`, a ClusterRole of the content, takes part in aggregation among `all` (the cluster's ClusterRoles with
/// the content's overlaid): none, one or both of Gathers and Extends.
fn aggregations_of(role: &ClusterRole, all: &[Arc<ClusterRole>]) -> Vec<PendingAggregation> {
    let name = role.metadata.name.clone().unwrap_or_default();
    let mut found = Vec::new();
    if let Some(rule) = &role.aggregation_rule {
        found.push(PendingAggregation {
            aggregation_type: AggregationType::Gathers,
            cluster_role: name.clone(),
            selectors: rule.cluster_role_selectors.clone().unwrap_or_default(),
            aggregated_roles: reachable(role, all, selects),
            aggregates_into: Vec::new(),
            labels: BTreeMap::new(),
        });
    }
    let labels = role.metadata.labels.clone().unwrap_or_default();
    let aggregates_into = reachable(role, all, |current, candidate| selects(candidate, current));
    if !aggregates_into.is_empty() || labels.keys().any(|key| key.contains(AGGREGATE_TO)) {
        found.push(PendingAggregation {
            aggregation_type: AggregationType::Extends,
            cluster_role: name,
            selectors: Vec::new(),
            aggregated_roles: Vec::new(),
            aggregates_into,
            labels,
        });
    }
    found
}

/// The names of the ClusterRoles reachable from `start` by `step(current, next)`, other than `start`, sorted. The
/// aggregation controller fills an aggregated role's rules from roles that may be aggregated themselves, so rules
/// travel along chains (`view` into `edit` into `admin`); a role is never its own source, and cycles end.
fn reachable(
    start: &ClusterRole,
    all: &[Arc<ClusterRole>],
    step: impl Fn(&ClusterRole, &ClusterRole) -> bool,
) -> Vec<String> {
    let name_of = |role: &ClusterRole| role.metadata.name.clone().unwrap_or_default();
    let start_name = name_of(start);
    let mut found: BTreeSet<String> = BTreeSet::new();
    let mut frontier = vec![start];
    while let Some(current) = frontier.pop() {
        let current_name = name_of(current);
        for candidate in all {
            let candidate_name = name_of(candidate);
            if candidate_name == current_name || candidate_name == start_name || found.contains(&candidate_name) {
                continue;
            }
            if step(current, candidate) {
                found.insert(candidate_name);
                frontier.push(candidate.as_ref());
            }
        }
    }
    found.into_iter().collect()
}

#[cfg(test)]
#[path = "disclosure_tests.rs"]
mod tests;
