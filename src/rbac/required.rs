//! The permissions the API server will demand of a ServiceAccount that applies some plain manifests (docs/design.md,
//! 'Required permissions'): the verbs of applying each object, and, for every Role, ClusterRole and binding among them,
//! the rules it grants, which Kubernetes' escalation prevention requires the applier to hold unless it may `escalate`
//! or `bind`.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleRef};
use serde_json::Value;

use crate::category::Categorized;

use super::kinds::{group_of, KindIndex};
use super::resolve::Roles;
use super::rule::Rule;

/// The RBAC API group.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Verbs applying an object needs: server-side apply creates or patches; the controller reads it back, updates it
/// and deletes it when a later version of the content drops it. `create` cannot be limited by name in RBAC, so it is
/// asked per resource and namespace; the others name the objects.
pub const CREATE_VERBS: &[&str] = &["create"];
pub const PER_OBJECT_VERBS: &[&str] = &["get", "patch", "update", "delete"];

/// Where a rule applies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Cluster,
    Namespace(String),
}

/// A rule and where it applies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ScopedRule {
    pub scope: Scope,
    pub rule: Rule,
}

/// The rules an RBAC object of the content grants, which the applier must hold unless it holds `exemption`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// `Kind namespace/name`, for messages.
    pub object: String,
    pub scope: Scope,
    /// The rules granted; `None` when a binding refers to a role that exists neither in the cluster nor in the
    /// content, which the API server lets only a holder of `exemption` create.
    pub rules: Option<Vec<Rule>>,
    /// `escalate` on the role, or `bind` on the role a binding refers to.
    pub exemption: Rule,
}

/// Everything applying the content demands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequiredPermissions {
    pub apply: Vec<ScopedRule>,
    pub grants: Vec<Grant>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequiredPermissionsError {
    #[error("object {index} of the content has no apiVersion or kind")]
    MissingType { index: usize },
    #[error("{kind} ({api_version}) {name:?} is a kind that neither the cluster nor a CustomResourceDefinition in the content defines")]
    UnknownKind { api_version: String, kind: String, name: String },
    #[error("{kind} at index {index} of the content has no metadata.name")]
    MissingName { kind: String, index: usize },
    #[error("{kind} {name:?} is namespaced but has no metadata.namespace")]
    MissingNamespace { kind: String, name: String },
    #[error("{kind} {name:?} is not a valid {kind}: {reason}")]
    InvalidRbacObject { kind: String, name: String, reason: String },
}

impl Categorized for RequiredPermissionsError {
    fn category(&self) -> &'static str {
        match self {
            Self::MissingType { .. } => "ContentObjectUntyped",
            Self::UnknownKind { .. } => "ContentKindUnknown",
            Self::MissingName { .. } => "ContentObjectUnnamed",
            Self::MissingNamespace { .. } => "ContentObjectWithoutNamespace",
            Self::InvalidRbacObject { .. } => "ContentRbacObjectInvalid",
        }
    }
}

/// An object of the content, located.
struct Located<'a> {
    object: &'a Value,
    kind: &'a str,
    api_version: &'a str,
    name: &'a str,
    scope: Scope,
    group: String,
    plural: String,
}

/// What applying `objects` (plain manifests, namespaces already mapped) demands. Kinds resolve through `kinds` and the
/// CRDs among the objects; roles that bindings refer to resolve in the content first, then in `cluster`.
pub fn required_permissions(
    objects: &[Value],
    kinds: &KindIndex,
    cluster: &Roles,
) -> Result<RequiredPermissions, RequiredPermissionsError> {
    let mut kinds = kinds.clone();
    kinds.add_crds(objects);
    let located = objects
        .iter()
        .enumerate()
        .map(|(index, object)| locate(index, object, &kinds))
        .collect::<Result<Vec<_>, _>>()?;

    let mut required = RequiredPermissions { apply: apply_rules(&located), grants: Vec::new() };
    let roles = content_roles(&located)?;
    let view = cluster.overlay(&roles.roles, &roles.cluster_roles);
    for item in located.iter().filter(|item| group_of(item.api_version) == RBAC_GROUP) {
        if let Some(grant) = grant_of(item, &view)? {
            required.grants.push(grant);
        }
    }
    Ok(required)
}

fn locate<'a>(index: usize, object: &'a Value, kinds: &KindIndex) -> Result<Located<'a>, RequiredPermissionsError> {
    let (Some(api_version), Some(kind)) = (object["apiVersion"].as_str(), object["kind"].as_str()) else {
        return Err(RequiredPermissionsError::MissingType { index });
    };
    let name = object["metadata"]["name"].as_str().filter(|name| !name.is_empty());
    let Some(name) = name else {
        return Err(RequiredPermissionsError::MissingName { kind: kind.to_owned(), index });
    };
    let info = kinds.resolve(api_version, kind).ok_or_else(|| RequiredPermissionsError::UnknownKind {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
    })?;
    let scope = if info.namespaced {
        match object["metadata"]["namespace"].as_str().filter(|ns| !ns.is_empty()) {
            Some(namespace) => Scope::Namespace(namespace.to_owned()),
            None => {
                return Err(RequiredPermissionsError::MissingNamespace { kind: kind.to_owned(), name: name.to_owned() })
            }
        }
    } else {
        Scope::Cluster
    };
    Ok(Located { object, kind, api_version, name, scope, group: info.group.clone(), plural: info.plural.clone() })
}

/// `create` per resource and scope, and the per-object verbs on the named objects.
fn apply_rules(located: &[Located<'_>]) -> Vec<ScopedRule> {
    let mut names: BTreeMap<(Scope, String, String), Vec<&str>> = BTreeMap::new();
    for item in located {
        names.entry((item.scope.clone(), item.group.clone(), item.plural.clone())).or_default().push(item.name);
    }
    let mut rules = Vec::new();
    for ((scope, group, plural), mut object_names) in names {
        object_names.sort_unstable();
        object_names.dedup();
        rules.push(ScopedRule { scope: scope.clone(), rule: Rule::resource(CREATE_VERBS, &[&group], &[&plural]) });
        rules.push(ScopedRule {
            scope,
            rule: Rule::resource(PER_OBJECT_VERBS, &[&group], &[&plural]).named(&object_names),
        });
    }
    rules
}

struct ContentRoles {
    roles: Vec<Role>,
    cluster_roles: Vec<ClusterRole>,
}

fn content_roles(located: &[Located<'_>]) -> Result<ContentRoles, RequiredPermissionsError> {
    let mut roles = ContentRoles { roles: Vec::new(), cluster_roles: Vec::new() };
    for item in located.iter().filter(|item| group_of(item.api_version) == RBAC_GROUP) {
        match item.kind {
            "Role" => roles.roles.push(typed(item)?),
            "ClusterRole" => roles.cluster_roles.push(typed(item)?),
            _ => {}
        }
    }
    Ok(roles)
}

fn typed<T: serde::de::DeserializeOwned>(item: &Located<'_>) -> Result<T, RequiredPermissionsError> {
    serde_json::from_value(item.object.clone()).map_err(|error| RequiredPermissionsError::InvalidRbacObject {
        kind: item.kind.to_owned(),
        name: item.name.to_owned(),
        reason: error.to_string(),
    })
}

fn grant_of(item: &Located<'_>, view: &Roles) -> Result<Option<Grant>, RequiredPermissionsError> {
    let object = match &item.scope {
        Scope::Cluster => format!("{} {}", item.kind, item.name),
        Scope::Namespace(namespace) => format!("{} {namespace}/{}", item.kind, item.name),
    };
    let namespace = match &item.scope {
        Scope::Cluster => "",
        Scope::Namespace(namespace) => namespace.as_str(),
    };
    let grant = match item.kind {
        "Role" => {
            let role: Role = typed(item)?;
            Grant {
                object,
                scope: item.scope.clone(),
                rules: Some(role.rules.iter().flatten().map(Rule::from).collect()),
                exemption: Rule::resource(&["escalate"], &[RBAC_GROUP], &["roles"]).named(&[item.name]),
            }
        }
        "ClusterRole" => {
            let role: ClusterRole = typed(item)?;
            let mut rules: Vec<Rule> = role.rules.iter().flatten().map(Rule::from).collect();
            // An aggregation rule can gather anything, so the API server demands full authority to set one.
            if role.aggregation_rule.is_some() {
                rules.extend(Rule::full_authority());
            }
            Grant {
                object,
                scope: Scope::Cluster,
                rules: Some(rules),
                exemption: Rule::resource(&["escalate"], &[RBAC_GROUP], &["clusterroles"]).named(&[item.name]),
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let role_ref: RoleRef = serde_json::from_value(item.object["roleRef"].clone()).map_err(|error| {
                RequiredPermissionsError::InvalidRbacObject {
                    kind: item.kind.to_owned(),
                    name: item.name.to_owned(),
                    reason: format!("roleRef: {error}"),
                }
            })?;
            let resource = if role_ref.kind == "Role" { "roles" } else { "clusterroles" };
            let usable = item.kind == "RoleBinding" || role_ref.kind == "ClusterRole";
            Grant {
                object,
                scope: item.scope.clone(),
                rules: usable.then(|| view.role_ref_rules(&role_ref, namespace).map(<[Rule]>::to_vec)).flatten(),
                exemption: Rule::resource(&["bind"], &[RBAC_GROUP], &[resource]).named(&[&role_ref.name]),
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(grant))
}
