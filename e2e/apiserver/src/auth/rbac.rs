//! Kubernetes RBAC as kube-apiserver's authorizer and escalation checks run it, written from their code path (not
//! from the project's own RBAC engine, which the Install tests check against this): the rules of the bindings that
//! name a user, `RuleAllows` matching, the forbidden message, the reason an allowance gives, the rules a user holds
//! in a namespace, and `ConfirmNoEscalation`'s coverage with its "attempting to grant" message.

use serde_json::Value;

use crate::auth::authn::UserInfo;
use crate::storage::store::{ResourceId, Store};

const RBAC: &str = "rbac.authorization.k8s.io";

/// What a request asks to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub resource_request: bool,
    pub namespace: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    pub path: String,
}

/// One rule of a Role or ClusterRole.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}

impl Rule {
    pub fn from_json(value: &Value) -> Self {
        Self {
            verbs: strings(&value["verbs"]),
            api_groups: strings(&value["apiGroups"]),
            resources: strings(&value["resources"]),
            resource_names: strings(&value["resourceNames"]),
            non_resource_urls: strings(&value["nonResourceURLs"]),
        }
    }

    /// `rbacv1helpers.CompactString`: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get"]}`.
    pub fn compact_string(&self) -> String {
        let list = |items: &[String]| items.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(" ");
        let mut parts = Vec::new();
        if !self.api_groups.is_empty() {
            parts.push(format!("APIGroups:[{}]", list(&self.api_groups)));
        }
        if !self.resources.is_empty() {
            parts.push(format!("Resources:[{}]", list(&self.resources)));
        }
        if !self.non_resource_urls.is_empty() {
            parts.push(format!("NonResourceURLs:[{}]", list(&self.non_resource_urls)));
        }
        if !self.resource_names.is_empty() {
            parts.push(format!("ResourceNames:[{}]", list(&self.resource_names)));
        }
        parts.push(format!("Verbs:[{}]", list(&self.verbs)));
        format!("{{{}}}", parts.join(", "))
    }
}

fn has(list: &[String], wanted: &str) -> bool {
    list.iter().any(|item| item == "*" || item == wanted)
}

/// `ResourceMatches`: `*`, the resource with its subresource, or `*/<subresource>`.
fn resource_matches(rule: &Rule, resource: &str, subresource: &str) -> bool {
    let combined = if subresource.is_empty() { resource.to_owned() } else { format!("{resource}/{subresource}") };
    rule.resources
        .iter()
        .any(|r| r == "*" || *r == combined || (!subresource.is_empty() && *r == format!("*/{subresource}")))
}

fn url_matches(rule: &Rule, path: &str) -> bool {
    rule.non_resource_urls
        .iter()
        .any(|url| url == "*" || url == path || url.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix)))
}

/// `RuleAllows`.
pub fn rule_allows(rule: &Rule, attributes: &Attributes) -> bool {
    if attributes.resource_request {
        has(&rule.verbs, &attributes.verb)
            && has(&rule.api_groups, &attributes.api_group)
            && resource_matches(rule, &attributes.resource, &attributes.subresource)
            && (rule.resource_names.is_empty() || rule.resource_names.contains(&attributes.name))
    } else {
        has(&rule.verbs, &attributes.verb) && url_matches(rule, &attributes.path)
    }
}

fn subject_matches(subject: &Value, binding_namespace: &str, user: &UserInfo) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => name == user.username,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let namespace = subject["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(binding_namespace);
            UserInfo::service_account_of(&user.username) == Some((namespace, name))
        }
        _ => false,
    }
}

/// Where a set of rules came from, as the allowance reason names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub binding: String,
    pub role: String,
    pub subject: String,
}

impl Source {
    fn reason(&self) -> String {
        format!("RBAC: allowed by {} of {} to {}", self.binding, self.role, self.subject)
    }
}

fn subject_label(subject: &Value) -> String {
    let kind = subject["kind"].as_str().unwrap_or_default();
    let name = subject["name"].as_str().unwrap_or_default();
    match (kind, subject["namespace"].as_str().filter(|n| !n.is_empty())) {
        ("ServiceAccount", Some(namespace)) => format!("{kind} \"{name}/{namespace}\""),
        _ => format!("{kind} \"{name}\""),
    }
}

fn role_rules(store: &Store, role_ref: &Value, namespace: &str) -> Option<(Vec<Rule>, String)> {
    let name = role_ref["name"].as_str()?;
    let rules = |object: &Value| object["rules"].as_array().into_iter().flatten().map(Rule::from_json).collect();
    match role_ref["kind"].as_str()? {
        "ClusterRole" => Some((
            store.read(&ResourceId::new(RBAC, "clusterroles"), "", name, rules)?,
            format!("ClusterRole \"{name}\""),
        )),
        "Role" => {
            Some((store.read(&ResourceId::new(RBAC, "roles"), namespace, name, rules)?, format!("Role \"{name}\"")))
        }
        _ => None,
    }
}

/// Visits every rule `user` holds in `namespace` (cluster-wide ones included; only cluster-wide ones for `""`),
/// with its source, in the order kube-apiserver visits them: ClusterRoleBindings, then the namespace's
/// RoleBindings; stops when `visitor` answers false (as the authorizer stops at the first rule that allows).
fn visit_rules(store: &Store, user: &UserInfo, namespace: &str, mut visitor: impl FnMut(Rule, &Source) -> bool) {
    let mut visit = |binding: &Value, binding_label: String, binding_namespace: &str| -> bool {
        let Some(subject) =
            binding["subjects"].as_array().into_iter().flatten().find(|s| subject_matches(s, binding_namespace, user))
        else {
            return true;
        };
        let Some((rules, role)) = role_rules(store, &binding["roleRef"], binding_namespace) else { return true };
        let source = Source { binding: binding_label, role, subject: subject_label(subject) };
        rules.into_iter().all(|rule| visitor(rule, &source))
    };
    // Only the bindings that name the user are copied out of the store (the visit finds the same subject again):
    // kube-apiserver reads them from its informers' caches, and each request looks at every binding.
    let names_user = |binding: &Value, binding_namespace: &str| {
        binding["subjects"].as_array().into_iter().flatten().any(|s| subject_matches(s, binding_namespace, user))
    };
    let cluster_bindings = store.matching(&ResourceId::new(RBAC, "clusterrolebindings"), |_, _, b| names_user(b, ""));
    for binding in cluster_bindings {
        let label = format!("ClusterRoleBinding \"{}\"", binding["metadata"]["name"].as_str().unwrap_or_default());
        if !visit(&binding, label, "") {
            return;
        }
    }
    if !namespace.is_empty() {
        let bindings = store.matching(&ResourceId::new(RBAC, "rolebindings"), |binding_namespace, _, b| {
            binding_namespace == namespace && names_user(b, namespace)
        });
        for binding in bindings {
            let label =
                format!("RoleBinding \"{}/{namespace}\"", binding["metadata"]["name"].as_str().unwrap_or_default());
            if !visit(&binding, label, namespace) {
                return;
            }
        }
    }
}

/// Every rule `user` holds in `namespace`, with its source, in the order [`visit_rules`] visits them.
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> Vec<(Rule, Source)> {
    let mut found = Vec::new();
    visit_rules(store, user, namespace, |rule, source| {
        found.push((rule, source.clone()));
        true
    });
    found
}

/// The authorizer's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow(String),
    Deny,
}

pub fn authorize(store: &Store, user: &UserInfo, attributes: &Attributes) -> Decision {
    if user.is_superuser() {
        return Decision::Allow(String::new());
    }
    let mut decision = Decision::Deny;
    visit_rules(store, user, &attributes.namespace, |rule, source| {
        if rule_allows(&rule, attributes) {
            decision = Decision::Allow(source.reason());
            return false;
        }
        true
    });
    decision
}

/// kube-apiserver's forbidden message for a denied request.
pub fn forbidden_message(user: &UserInfo, attributes: &Attributes) -> String {
    let username = &user.username;
    if !attributes.resource_request {
        return format!("User {username:?} cannot {} path {:?}", attributes.verb, attributes.path);
    }
    let resource = if attributes.subresource.is_empty() {
        attributes.resource.clone()
    } else {
        format!("{}/{}", attributes.resource, attributes.subresource)
    };
    if attributes.namespace.is_empty() {
        format!(
            "User {username:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            attributes.verb, attributes.api_group
        )
    } else {
        format!(
            "User {username:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            attributes.verb, attributes.api_group, attributes.namespace
        )
    }
}

/// `BreakdownRule`: one rule per verb, group, resource and name (or URL).
fn breakdown(rule: &Rule) -> Vec<Rule> {
    let mut pieces = Vec::new();
    for verb in &rule.verbs {
        for group in &rule.api_groups {
            for resource in &rule.resources {
                if rule.resource_names.is_empty() {
                    pieces.push(Rule {
                        verbs: vec![verb.clone()],
                        api_groups: vec![group.clone()],
                        resources: vec![resource.clone()],
                        ..Rule::default()
                    });
                }
                for name in &rule.resource_names {
                    pieces.push(Rule {
                        verbs: vec![verb.clone()],
                        api_groups: vec![group.clone()],
                        resources: vec![resource.clone()],
                        resource_names: vec![name.clone()],
                        ..Rule::default()
                    });
                }
            }
        }
        for url in &rule.non_resource_urls {
            pieces.push(Rule { verbs: vec![verb.clone()], non_resource_urls: vec![url.clone()], ..Rule::default() });
        }
    }
    pieces
}

/// `ruleCovers` of one broken-down rule by one owner rule.
fn covers_one(owner: &Rule, requested: &Rule) -> bool {
    let contains =
        |have: &[String], want: &[String]| have.iter().any(|h| h == "*") || want.iter().all(|w| have.contains(w));
    let resources = owner.resources.iter().any(|r| r == "*")
        || requested.resources.iter().all(|wanted| {
            owner.resources.contains(wanted)
                || wanted
                    .split_once('/')
                    .is_some_and(|(_, sub)| owner.resources.iter().any(|r| *r == format!("*/{sub}")))
        });
    let urls = requested.non_resource_urls.iter().all(|wanted| {
        owner
            .non_resource_urls
            .iter()
            .any(|have| have == wanted || have.strip_suffix('*').is_some_and(|prefix| wanted.starts_with(prefix)))
    });
    let names = owner.resource_names.is_empty()
        || (!requested.resource_names.is_empty()
            && requested.resource_names.iter().all(|n| owner.resource_names.contains(n)));
    contains(&owner.verbs, &requested.verbs)
        && contains(&owner.api_groups, &requested.api_groups)
        && resources
        && urls
        && names
}

/// The rules of `requested` that `owned` does not cover, broken down, compacted and sorted as kube-apiserver lists
/// them.
pub fn uncovered(owned: &[Rule], requested: &[Rule]) -> Vec<Rule> {
    let mut missing: Vec<Rule> =
        requested.iter().flat_map(breakdown).filter(|piece| !owned.iter().any(|o| covers_one(o, piece))).collect();
    // CompactRules: simple resource rules differing only in verb merge into one.
    let mut compacted: Vec<Rule> = Vec::new();
    for rule in missing.drain(..) {
        let same = compacted.iter_mut().find(|c| {
            c.non_resource_urls.is_empty()
                && rule.non_resource_urls.is_empty()
                && c.api_groups == rule.api_groups
                && c.resources == rule.resources
                && c.resource_names == rule.resource_names
        });
        match same {
            Some(existing) => {
                if !existing.verbs.contains(&rule.verbs[0]) {
                    existing.verbs.extend(rule.verbs);
                }
            }
            None => compacted.push(rule),
        }
    }
    compacted.sort_by_key(Rule::compact_string);
    compacted
}

/// The message of a refused escalation.
pub fn escalation_message(user: &UserInfo, missing: &[Rule]) -> String {
    let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    let listed: Vec<String> = missing.iter().map(Rule::compact_string).collect();
    format!(
        "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        user.username,
        groups.join(" "),
        listed.join("\n")
    )
}

fn object_rules(object: &Value) -> Vec<Rule> {
    object["rules"].as_array().into_iter().flatten().map(Rule::from_json).collect()
}

/// `ConfirmNoEscalation` and `BindingAuthorized`: a Role or ClusterRole may be written by a user who holds `escalate`
/// on it or every rule it grants; a binding by a user who holds `bind` on its role or every rule of that role.
/// Returns kube-apiserver's reason for refusing, `None` when allowed.
pub fn escalation_refusal(store: &Store, user: &UserInfo, resource: &str, object: &Value) -> Option<String> {
    if user.is_superuser() {
        return None;
    }
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let allowed = |verb: &str, resource: &str, name: &str| {
        let attributes = Attributes {
            verb: verb.into(),
            resource_request: true,
            namespace: namespace.into(),
            api_group: RBAC.into(),
            resource: resource.into(),
            name: name.into(),
            ..Attributes::default()
        };
        matches!(authorize(store, user, &attributes), Decision::Allow(_))
    };
    let held = || -> Vec<Rule> { rules_for(store, user, namespace).into_iter().map(|(rule, _)| rule).collect() };
    match resource {
        "roles" | "clusterroles" => {
            if allowed("escalate", resource, name) {
                return None;
            }
            let missing = uncovered(&held(), &object_rules(object));
            (!missing.is_empty()).then(|| escalation_message(user, &missing))
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_ref = &object["roleRef"];
            let role_name = role_ref["name"].as_str().unwrap_or_default();
            let role_resource = if role_ref["kind"] == "Role" { "roles" } else { "clusterroles" };
            if allowed("bind", role_resource, role_name) {
                return None;
            }
            let role_namespace = if role_resource == "roles" { namespace } else { "" };
            let Ok(role) = store.get(&ResourceId::new(RBAC, role_resource), role_namespace, role_name) else {
                return Some(format!("{role_resource}.{RBAC} \"{role_name}\" not found"));
            };
            let missing = uncovered(&held(), &object_rules(&role));
            (!missing.is_empty()).then(|| escalation_message(user, &missing))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
