//! What a hand-applied CSV's author must be allowed to do before the loop does it for them. OLM v0 makes a CSV's
//! Deployments, per-API ClusterRoles and copied RBAC with its own rights, so anyone who may write CSVs could run any
//! pod or widen anyone's RBAC. Here each of those writes is first asked of the CSV's author (recorded by the webhook)
//! with the rules kube-apiserver applies when a person makes the same objects by hand: `create` on each kind, and
//! for RBAC, either holding every rule granted or holding `escalate` on the role kind (and `bind`, when a binding
//! grants them). `checks` decides what to ask (pure); `review` asks the API server.

use kube::Client;

use crate::access::{allowed, lacking, AccessCheck};
use crate::api::v2alpha1::{PendingPermission, PermissionScope, Requester};
use crate::rbac::Rule;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Objects the loop would make on the author's behalf, in one namespace or cluster-wide.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OnBehalf {
    /// The namespace of the objects, or `None` for cluster-scoped ones.
    pub namespace: Option<String>,
    /// `(group, resource)` of each kind made: making one by hand needs `create` on it.
    pub creates: Vec<(String, String)>,
    /// The rules the roles made grant, and the role kind holding them (`roles` or `clusterroles`).
    pub grants: Option<(String, Vec<Rule>)>,
    /// Whether bindings to those roles are made too (`bind` on the role kind, when the rules are not held).
    pub binds: bool,
    /// `(verb, group, resource)` of each other write: changing an object that exists needs `update` or `patch`.
    pub changes: Vec<(String, String, String)>,
}

impl OnBehalf {
    /// ClusterRoles granting `rules` (and nothing binding them).
    pub fn cluster_roles(rules: Vec<Rule>) -> Self {
        Self {
            namespace: None,
            creates: vec![(RBAC_GROUP.into(), "clusterroles".into())],
            grants: Some(("clusterroles".into(), rules)),
            binds: false,
            changes: Vec::new(),
        }
    }

    /// The same writes, and `verb` on `resource` of `group` too (an object there changed).
    pub fn changing(mut self, verb: &str, group: &str, resource: &str) -> Self {
        self.changes.push((verb.into(), group.into(), resource.into()));
        self
    }

    /// Roles granting `rules` in `namespace` and the RoleBindings binding them.
    pub fn bound_roles(namespace: &str, rules: Vec<Rule>) -> Self {
        Self {
            namespace: Some(namespace.into()),
            creates: vec![(RBAC_GROUP.into(), "roles".into()), (RBAC_GROUP.into(), "rolebindings".into())],
            grants: Some(("roles".into(), rules)),
            binds: true,
            changes: Vec::new(),
        }
    }

    /// ClusterRoles granting `rules` everywhere and the ClusterRoleBindings binding them.
    pub fn bound_cluster_roles(rules: Vec<Rule>) -> Self {
        Self {
            namespace: None,
            creates: vec![
                (RBAC_GROUP.into(), "clusterroles".into()),
                (RBAC_GROUP.into(), "clusterrolebindings".into()),
            ],
            grants: Some(("clusterroles".into(), rules)),
            binds: true,
            changes: Vec::new(),
        }
    }
}

/// The access checks that together mean "the author could make these objects by hand": every `required` one, and
/// either every rule of `grants` held or every `escalation` check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checks {
    pub required: Vec<AccessCheck>,
    pub grants: Vec<PendingPermission>,
    pub escalation: Vec<AccessCheck>,
}

pub fn checks(on_behalf: &OnBehalf) -> Checks {
    let namespace = on_behalf.namespace.as_deref();
    let required = on_behalf
        .creates
        .iter()
        .map(|(group, resource)| AccessCheck::resource(namespace, "create", group, resource, ""))
        .chain(
            on_behalf
                .changes
                .iter()
                .map(|(verb, group, resource)| AccessCheck::resource(namespace, verb, group, resource, "")),
        )
        .collect();
    let Some((role_kind, rules)) = &on_behalf.grants else {
        return Checks { required, ..Checks::default() };
    };
    let scope = match namespace {
        Some(_) => PermissionScope::Namespaced,
        None => PermissionScope::Cluster,
    };
    let grants = rules
        .iter()
        .map(|rule| PendingPermission {
            scope,
            namespaces: namespace.map(|namespace| vec![namespace.to_owned()]).unwrap_or_default(),
            verbs: rule.verbs.clone(),
            api_groups: rule.api_groups.clone(),
            resources: rule.resources.clone(),
            resource_names: rule.resource_names.clone(),
            non_resource_urls: rule.non_resource_urls.clone(),
        })
        .collect();
    let mut escalation = vec![AccessCheck::resource(namespace, "escalate", RBAC_GROUP, role_kind, "")];
    if on_behalf.binds {
        escalation.push(AccessCheck::resource(namespace, "bind", RBAC_GROUP, role_kind, ""));
    }
    Checks { required, grants, escalation }
}

/// What one check asks, for a refusal message: `create clusterroles.rbac.authorization.k8s.io cluster-wide`.
pub fn describe(check: &AccessCheck) -> String {
    let resource = match (check.group.as_str(), check.subresource.as_str()) {
        ("", "") => check.resource.clone(),
        ("", sub) => format!("{}/{sub}", check.resource),
        (group, "") => format!("{}.{group}", check.resource),
        (group, sub) => format!("{}.{group}/{sub}", check.resource),
    };
    let named = if check.name.is_empty() { String::new() } else { format!(" {}", check.name) };
    let place = match &check.namespace {
        Some(namespace) => format!("in namespace {namespace}"),
        None => "cluster-wide".to_owned(),
    };
    format!("{} {resource}{named} {place}", check.verb)
}

/// A rule in a refusal message: `[*] on plumbuses in group example.com`.
fn describe_rule(permission: &PendingPermission) -> String {
    if !permission.non_resource_urls.is_empty() {
        return format!("{:?} on {:?}", permission.verbs, permission.non_resource_urls);
    }
    let named = if permission.resource_names.is_empty() {
        String::new()
    } else {
        format!(" named {:?}", permission.resource_names)
    };
    format!("{:?} on {:?}{named} in group {:?}", permission.verbs, permission.resources, permission.api_groups)
}

/// Asks the API server whether `author` passes `checks`: `Ok(Err(why))` when not, `why` naming the first thing they
/// may not do.
pub async fn review(client: &Client, author: &Requester, checks: &Checks) -> Result<Result<(), String>, kube::Error> {
    for check in &checks.required {
        if !allowed(client, author, check).await? {
            return Ok(Err(format!("may not {}", describe(check))));
        }
    }
    if checks.grants.is_empty() {
        return Ok(Ok(()));
    }
    let mut may_escalate = true;
    for check in &checks.escalation {
        if !allowed(client, author, check).await? {
            may_escalate = false;
            break;
        }
    }
    if may_escalate {
        return Ok(Ok(()));
    }
    let lacked = lacking(client, author, &checks.grants).await?;
    Ok(match lacked.first().and_then(|index| checks.grants.get(*index)) {
        None => Ok(()),
        Some(rule) => {
            let escalation: Vec<String> = checks.escalation.iter().map(describe).collect();
            let place = match rule.namespaces.first() {
                Some(namespace) => format!("in namespace {namespace}"),
                None => "cluster-wide".to_owned(),
            };
            Err(format!("does not hold {} {place}, and may not {}", describe_rule(rule), escalation.join(" and ")))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<Rule> {
        vec![
            Rule::resource(&["*"], &["example.com"], &["plumbuses"]),
            Rule::resource(&["get"], &["apiextensions.k8s.io"], &["customresourcedefinitions"])
                .named(&["plumbuses.example.com"]),
        ]
    }

    #[test]
    fn cluster_roles_need_create_and_the_rules_or_escalate() {
        let checks = checks(&OnBehalf::cluster_roles(rules()));
        assert_eq!(
            checks.required.iter().map(describe).collect::<Vec<_>>(),
            ["create clusterroles.rbac.authorization.k8s.io cluster-wide"]
        );
        assert_eq!(
            checks.escalation.iter().map(describe).collect::<Vec<_>>(),
            ["escalate clusterroles.rbac.authorization.k8s.io cluster-wide"]
        );
        assert_eq!(checks.grants.len(), 2);
        assert!(checks
            .grants
            .iter()
            .all(|grant| grant.scope == PermissionScope::Cluster && grant.namespaces.is_empty()));
        assert_eq!(checks.grants[1].resource_names, ["plumbuses.example.com"]);
        assert_eq!(checks.grants[0].verbs, ["*"]);
    }

    #[test]
    fn bound_roles_are_checked_in_their_namespace_with_bind() {
        let checks = checks(&OnBehalf::bound_roles("target", rules()));
        assert_eq!(
            checks.required.iter().map(describe).collect::<Vec<_>>(),
            [
                "create roles.rbac.authorization.k8s.io in namespace target",
                "create rolebindings.rbac.authorization.k8s.io in namespace target"
            ]
        );
        assert_eq!(
            checks.escalation.iter().map(describe).collect::<Vec<_>>(),
            [
                "escalate roles.rbac.authorization.k8s.io in namespace target",
                "bind roles.rbac.authorization.k8s.io in namespace target"
            ]
        );
        assert!(checks
            .grants
            .iter()
            .all(|grant| grant.scope == PermissionScope::Namespaced && grant.namespaces == ["target"]));
    }

    #[test]
    fn bound_cluster_roles_need_both_kinds_and_bind_cluster_wide() {
        let checks = checks(&OnBehalf::bound_cluster_roles(rules()));
        assert_eq!(checks.required.len(), 2);
        assert!(checks.required.iter().chain(&checks.escalation).all(|check| check.namespace.is_none()));
        assert_eq!(checks.escalation[1].verb, "bind");
        assert_eq!(checks.escalation[1].resource, "clusterroles");
    }

    #[test]
    fn objects_granting_nothing_need_only_create() {
        let on_behalf = OnBehalf {
            namespace: Some("ns".into()),
            creates: vec![("apps".into(), "deployments".into())],
            grants: None,
            binds: false,
            changes: Vec::new(),
        };
        let checks = checks(&on_behalf);
        assert_eq!(
            checks.required.iter().map(describe).collect::<Vec<_>>(),
            ["create deployments.apps in namespace ns"]
        );
        assert!(checks.grants.is_empty() && checks.escalation.is_empty());
    }

    #[test]
    fn changing_an_object_there_is_asked_after_creating() {
        let checks = checks(&OnBehalf::cluster_roles(rules()).changing("patch", RBAC_GROUP, "clusterroles"));
        assert_eq!(
            checks.required.iter().map(describe).collect::<Vec<_>>(),
            [
                "create clusterroles.rbac.authorization.k8s.io cluster-wide",
                "patch clusterroles.rbac.authorization.k8s.io cluster-wide"
            ]
        );
    }

    #[test]
    fn descriptions_name_core_resources_subresources_and_names() {
        assert_eq!(
            describe(&AccessCheck::resource(Some("a"), "get", "", "pods/log", "p")),
            "get pods/log p in namespace a"
        );
        let rule = checks(&OnBehalf::cluster_roles(rules())).grants[1].clone();
        assert_eq!(
            describe_rule(&rule),
            r#"["get"] on ["customresourcedefinitions"] named ["plumbuses.example.com"] in group ["apiextensions.k8s.io"]"#
        );
    }
}
