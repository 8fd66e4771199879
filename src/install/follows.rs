//! Per-object verbs that follow from an approved `create` (docs/security.md, invariant 11). A registry+v1 bundle
//! converted as OLM converts it names its RBAC objects and its CSV after its version, so every new version asks for
//! `get`, `patch`, `update` and `delete` on new names. Where this Install's own grants already hold `create` of that
//! resource in that place, and no object of the new name exists, the account could create that very object anyway:
//! the verbs on it give nothing more, and they are granted without a person. An object of the name that exists (made
//! by anyone, the Install included: its rules were approved before or were lost) keeps its rules pending; the apply
//! never takes such an object over either.
//!
//! Only this Install's grants count for `create`: an OperatorGroup account's own rights were lent, not approved for
//! this Install, and they bring nothing more here. Never for Secrets (`get` on a new one can read a token the API
//! server puts in it), nor while the content's own Roles and bindings need anything the account lacks (a Role could
//! hand the same verbs to anyone its bindings name: that is for a person to see).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::gate::covered_by;
use crate::api::v2alpha1::{PendingPermission, PermissionScope};
use crate::rbac::missing::{rule_of, to_pending};
use crate::rbac::required::{CREATE_VERBS, PER_OBJECT_VERBS, RBAC_GROUP};
use crate::rbac::{breakdown, KindIndex, RbacObjects, Rule, Scope};

/// An object as RBAC names it: where, which resource, which name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub scope: Scope,
    pub group: String,
    pub resource: String,
    pub name: String,
}

/// The missing rules, split: those a person approves, and those that follow from a `create` granted before.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub to_approve: Vec<PendingPermission>,
    pub follows: Vec<PendingPermission>,
}

/// The object of the content an [`ObjectKey`] names, if its kind is known.
pub fn key_of(object: &Value, kinds: &KindIndex) -> Option<ObjectKey> {
    let info = kinds.resolve(object["apiVersion"].as_str()?, object["kind"].as_str()?)?;
    let scope = if info.namespaced {
        Scope::Namespace(object["metadata"]["namespace"].as_str()?.to_owned())
    } else {
        Scope::Cluster
    };
    let name = object["metadata"]["name"].as_str()?.to_owned();
    Some(ObjectKey { scope, group: info.group.clone(), resource: info.plural.clone(), name })
}

/// The RBAC objects that exist, from the lists the pass read anyway. (A binding cannot be created, even in a dry
/// run, before the role it names: its existence is read here instead.)
pub fn existing_rbac(rbac: &RbacObjects) -> BTreeSet<ObjectKey> {
    let keyed = |resource: &str, metadata: &ObjectMeta| {
        let scope = metadata.namespace.clone().map_or(Scope::Cluster, Scope::Namespace);
        let name = metadata.name.clone().unwrap_or_default();
        ObjectKey { scope, group: RBAC_GROUP.to_owned(), resource: resource.to_owned(), name }
    };
    let roles = rbac.roles.iter().map(|o| keyed("roles", &o.metadata));
    let cluster_roles = rbac.cluster_roles.iter().map(|o| keyed("clusterroles", &o.metadata));
    let bindings = rbac.role_bindings.iter().map(|o| keyed("rolebindings", &o.metadata));
    let cluster_bindings = rbac.cluster_role_bindings.iter().map(|o| keyed("clusterrolebindings", &o.metadata));
    roles.chain(cluster_roles).chain(bindings).chain(cluster_bindings).collect()
}

/// `resource.group namespace/name`, for events.
pub fn describe(key: &ObjectKey) -> String {
    let resource = if key.group.is_empty() { key.resource.clone() } else { format!("{}.{}", key.resource, key.group) };
    match &key.scope {
        Scope::Cluster => format!("{resource} {}", key.name),
        Scope::Namespace(namespace) => format!("{resource} {namespace}/{}", key.name),
    }
}

/// Each rule of `permissions` in each place it applies, broken down to one verb, resource and name.
fn atoms(permissions: &[PendingPermission]) -> Vec<(Scope, Rule)> {
    let mut all = Vec::new();
    for permission in permissions {
        let places = match permission.scope {
            PermissionScope::Cluster => vec![Scope::Cluster],
            PermissionScope::Namespaced => permission.namespaces.iter().cloned().map(Scope::Namespace).collect(),
        };
        let broken = breakdown(&rule_of(permission));
        for place in places {
            all.extend(broken.iter().map(|atom| (place.clone(), atom.clone())));
        }
    }
    all
}

/// The object a per-object atom names, when `granted` holds `create` of its resource where it lives.
fn creatable(scope: &Scope, atom: &Rule, granted: &[PendingPermission]) -> Option<ObjectKey> {
    let per_object = atom.verbs.len() == 1 && PER_OBJECT_VERBS.contains(&atom.verbs[0].as_str());
    let ([group], [resource], [name]) =
        (atom.api_groups.as_slice(), atom.resources.as_slice(), atom.resource_names.as_slice())
    else {
        return None;
    };
    // A Secret is filled in after it is created (a ServiceAccount token, for any account the Secret names): `get`
    // on one gives what `create` never did.
    if !per_object || resource.contains('/') || (group.is_empty() && resource == "secrets") {
        return None;
    }
    let create = PendingPermission {
        scope: match scope {
            Scope::Cluster => PermissionScope::Cluster,
            Scope::Namespace(_) => PermissionScope::Namespaced,
        },
        namespaces: match scope {
            Scope::Cluster => Vec::new(),
            Scope::Namespace(namespace) => vec![namespace.clone()],
        },
        verbs: CREATE_VERBS.iter().map(|verb| (*verb).to_owned()).collect(),
        api_groups: vec![group.clone()],
        resources: vec![resource.clone()],
        resource_names: Vec::new(),
        non_resource_urls: Vec::new(),
    };
    covered_by(granted, &[create]).then(|| ObjectKey {
        scope: scope.clone(),
        group: group.clone(),
        resource: resource.clone(),
        name: name.clone(),
    })
}

/// The objects named by missing per-object verbs whose `create` this Install's grants hold: the only ones the
/// controller has to look for in the cluster. None while anything the content's own RBAC objects grant is missing
/// (`missing_for_rbac`): a Role of the content may grant the very verbs on the very names the account lacks, to
/// whomever its bindings name, and that is for a person to see (`status.pending.bindings`) and approve.
pub fn candidates(
    missing: &[PendingPermission],
    granted: &[PendingPermission],
    missing_for_rbac: &[PendingPermission],
) -> BTreeSet<ObjectKey> {
    if !missing_for_rbac.is_empty() {
        return BTreeSet::new();
    }
    atoms(missing).iter().filter_map(|(scope, atom)| creatable(scope, atom, granted)).collect()
}

/// Splits `missing`: the per-object verbs on an object of `absent` (found not to exist) whose `create` `granted`
/// holds follow; everything else is for a person to approve.
pub fn split(missing: &[PendingPermission], granted: &[PendingPermission], absent: &BTreeSet<ObjectKey>) -> Split {
    let mut to_approve: BTreeMap<Scope, Vec<Rule>> = BTreeMap::new();
    let mut follows: BTreeMap<Scope, Vec<Rule>> = BTreeMap::new();
    for (scope, atom) in atoms(missing) {
        let follows_from_create = creatable(&scope, &atom, granted).is_some_and(|key| absent.contains(&key));
        let part = if follows_from_create { &mut follows } else { &mut to_approve };
        part.entry(scope).or_default().push(atom);
    }
    Split { to_approve: to_pending(to_approve), follows: to_pending(follows) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn namespaced(
        verbs: &[&str],
        group: &str,
        resource: &str,
        names: &[&str],
        namespaces: &[&str],
    ) -> PendingPermission {
        PendingPermission {
            scope: PermissionScope::Namespaced,
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            api_groups: vec![group.to_owned()],
            resources: vec![resource.to_owned()],
            resource_names: names.iter().map(|n| (*n).to_owned()).collect(),
            non_resource_urls: vec![],
        }
    }

    fn cluster(verbs: &[&str], group: &str, resource: &str, names: &[&str]) -> PendingPermission {
        PendingPermission {
            scope: PermissionScope::Cluster,
            namespaces: vec![],
            ..namespaced(verbs, group, resource, names, &[])
        }
    }

    fn key(namespace: Option<&str>, group: &str, resource: &str, name: &str) -> ObjectKey {
        ObjectKey {
            scope: namespace.map_or(Scope::Cluster, |n| Scope::Namespace(n.to_owned())),
            group: group.to_owned(),
            resource: resource.to_owned(),
            name: name.to_owned(),
        }
    }

    const RBAC: &str = "rbac.authorization.k8s.io";
    const OLM: &str = "operators.coreos.com";

    /// What an upgrade of a converted bundle misses: the per-object verbs on its new Role and CSV.
    fn upgrade_missing() -> Vec<PendingPermission> {
        // Sorted, as missing permissions are.
        vec![
            namespaced(&["delete", "get", "patch", "update"], OLM, "clusterserviceversions", &["plumbus.v2"], &["ops"]),
            namespaced(&["delete", "get", "patch", "update"], RBAC, "roles", &["plumbus.v2-x"], &["ops"]),
        ]
    }

    fn granted_creates() -> Vec<PendingPermission> {
        vec![
            namespaced(&["create"], RBAC, "roles", &[], &["ops"]),
            namespaced(&["create"], OLM, "clusterserviceversions", &[], &["ops"]),
            namespaced(&["delete", "get", "patch", "update"], RBAC, "roles", &["plumbus.v1-x"], &["ops"]),
        ]
    }

    #[test]
    fn verbs_on_absent_objects_whose_create_was_granted_follow() {
        let missing = upgrade_missing();
        let granted = granted_creates();
        let found = candidates(&missing, &granted, &[]);
        assert_eq!(
            found,
            BTreeSet::from([
                key(Some("ops"), RBAC, "roles", "plumbus.v2-x"),
                key(Some("ops"), OLM, "clusterserviceversions", "plumbus.v2"),
            ])
        );
        let split = split(&missing, &granted, &found);
        assert!(split.to_approve.is_empty(), "{:?}", split.to_approve);
        assert_eq!(split.follows, missing, "exactly the missing rules, compacted as before");
    }

    #[test]
    fn an_object_that_exists_keeps_its_rules_for_a_person() {
        let missing = upgrade_missing();
        let absent = BTreeSet::from([key(Some("ops"), RBAC, "roles", "plumbus.v2-x")]);
        let split = split(&missing, &granted_creates(), &absent);
        assert_eq!(split.follows, vec![missing[1].clone()]);
        assert_eq!(split.to_approve, vec![missing[0].clone()], "the CSV of the name exists: a person decides");
    }

    #[test]
    fn without_a_granted_create_in_that_place_nothing_follows() {
        let missing = upgrade_missing();
        let elsewhere = vec![
            namespaced(&["create"], RBAC, "roles", &[], &["other"]),
            namespaced(&["create"], RBAC, "rolebindings", &[], &["ops"]),
            namespaced(&["create"], OLM, "clusterserviceversions", &["plumbus.v2"], &["ops"]),
        ];
        assert!(candidates(&missing, &elsewhere, &[]).is_empty());
        let everything_absent = BTreeSet::from([
            key(Some("ops"), RBAC, "roles", "plumbus.v2-x"),
            key(Some("ops"), OLM, "clusterserviceversions", "plumbus.v2"),
        ]);
        let split = split(&missing, &elsewhere, &everything_absent);
        assert!(split.follows.is_empty());
        assert_eq!(split.to_approve, missing);
    }

    #[test]
    fn a_cluster_wide_create_covers_every_namespace_and_cluster_objects_follow_too() {
        let missing = vec![
            namespaced(&["get"], RBAC, "roles", &["a"], &["ops", "dev"]),
            cluster(&["get", "patch"], RBAC, "clusterroles", &["plumbus.v2-y"]),
        ];
        let granted = vec![cluster(&["create"], RBAC, "roles", &[]), cluster(&["create"], RBAC, "clusterroles", &[])];
        let found = candidates(&missing, &granted, &[]);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found.contains(&key(None, RBAC, "clusterroles", "plumbus.v2-y")));
        let only_ops =
            BTreeSet::from([key(Some("ops"), RBAC, "roles", "a"), key(None, RBAC, "clusterroles", "plumbus.v2-y")]);
        let split = split(&missing, &granted, &only_ops);
        assert_eq!(split.to_approve, vec![namespaced(&["get"], RBAC, "roles", &["a"], &["dev"])]);
        let mut expected = vec![
            cluster(&["get", "patch"], RBAC, "clusterroles", &["plumbus.v2-y"]),
            namespaced(&["get"], RBAC, "roles", &["a"], &["ops"]),
        ];
        expected.sort();
        assert_eq!(split.follows, expected);
    }

    #[test]
    fn nothing_follows_while_the_contents_own_rbac_needs_a_person() {
        let missing = upgrade_missing();
        let granted = granted_creates();
        // A Role of the content granting `update` on the new CSV to whomever its binding names.
        let for_rbac = vec![namespaced(&["update"], OLM, "clusterserviceversions", &["plumbus.v2"], &["ops"])];
        assert!(candidates(&missing, &granted, &for_rbac).is_empty());
        assert_eq!(candidates(&missing, &granted, &[]).len(), 2);
    }

    #[test]
    fn verbs_on_a_new_secret_never_follow() {
        let granted = vec![namespaced(&["create"], "", "secrets", &[], &["ops"])];
        let missing = vec![namespaced(&["get"], "", "secrets", &["token"], &["ops"])];
        assert!(candidates(&missing, &granted, &[]).is_empty());
        let absent = BTreeSet::from([key(Some("ops"), "", "secrets", "token")]);
        assert_eq!(split(&missing, &granted, &absent).to_approve, missing);
    }

    #[test]
    fn only_per_object_verbs_on_one_named_object_follow() {
        let granted = vec![cluster(&["create"], "*", "*", &[])];
        let missing = vec![
            // Not per-object verbs, even with a name.
            namespaced(&["escalate", "bind", "list"], RBAC, "roles", &["plumbus.v2-x"], &["ops"]),
            // No name: every object of the resource.
            namespaced(&["get"], "", "secrets", &[], &["ops"]),
            // A subresource is not the object.
            namespaced(&["update"], "apps", "deployments/scale", &["plumbus"], &["ops"]),
            // create itself is never granted here.
            namespaced(&["create"], "", "configmaps", &[], &["ops"]),
        ];
        assert!(candidates(&missing, &granted, &[]).is_empty());
        let all_absent = BTreeSet::from([
            key(Some("ops"), RBAC, "roles", "plumbus.v2-x"),
            key(Some("ops"), "apps", "deployments/scale", "plumbus"),
        ]);
        let split = split(&missing, &granted, &all_absent);
        assert!(split.follows.is_empty());
        assert_eq!(split.to_approve.len(), missing.len());
    }

    #[test]
    fn non_resource_rules_never_follow() {
        let granted = vec![cluster(&["create"], "*", "*", &[])];
        let missing = vec![PendingPermission {
            scope: PermissionScope::Cluster,
            namespaces: vec![],
            verbs: vec!["get".into()],
            api_groups: vec![],
            resources: vec![],
            resource_names: vec![],
            non_resource_urls: vec!["/metrics".into()],
        }];
        assert!(candidates(&missing, &granted, &[]).is_empty());
        assert_eq!(split(&missing, &granted, &BTreeSet::new()).to_approve, missing);
    }

    #[test]
    fn existing_rbac_objects_are_keyed_by_resource_and_place() {
        let rbac: RbacObjects = RbacObjects {
            roles: vec![std::sync::Arc::new(serde_json::from_value(json!({"metadata": {"name": "r", "namespace": "ops"}})).unwrap())],
            cluster_roles: vec![std::sync::Arc::new(serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap())],
            role_bindings: vec![std::sync::Arc::new(serde_json::from_value(
                json!({"metadata": {"name": "b", "namespace": "ops"}, "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "r"}}),
            )
            .unwrap())],
            cluster_role_bindings: vec![std::sync::Arc::new(serde_json::from_value(
                json!({"metadata": {"name": "cb"}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "c"}}),
            )
            .unwrap())],
        };
        assert_eq!(
            existing_rbac(&rbac),
            BTreeSet::from([
                key(Some("ops"), RBAC, "roles", "r"),
                key(None, RBAC, "clusterroles", "c"),
                key(Some("ops"), RBAC, "rolebindings", "b"),
                key(None, RBAC, "clusterrolebindings", "cb"),
            ])
        );
    }

    #[test]
    fn content_objects_are_keyed_as_rbac_names_them() {
        let kinds = KindIndex::kubernetes();
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "plumbus.v2-x", "namespace": "ops"}});
        assert_eq!(key_of(&role, &kinds), Some(key(Some("ops"), RBAC, "roles", "plumbus.v2-x")));
        assert_eq!(describe(&key_of(&role, &kinds).unwrap()), "roles.rbac.authorization.k8s.io ops/plumbus.v2-x");
        let role =
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "c"}});
        assert_eq!(key_of(&role, &kinds), Some(key(None, RBAC, "clusterroles", "c")));
        let unknown = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        assert_eq!(key_of(&unknown, &kinds), None);
        let unplaced = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        assert_eq!(key_of(&unplaced, &kinds), None, "a namespaced object without a namespace names nothing");
    }
}
