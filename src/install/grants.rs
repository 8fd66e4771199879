//! The RBAC objects that hold exactly the approved rules for an Install's ServiceAccount (docs/design.md, 'How content
//! is applied'): a ClusterRole and ClusterRoleBinding for the cluster-wide rules, a Role and RoleBinding in each
//! namespace for the others. They are owned by the Install, so garbage collection removes them with it, and named after
//! their rules, so a retried grant after a crash writes the same objects again instead of new ones. The pass's grant
//! step ([`grant`]) applies them as the controller.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::account::Account;
use super::apply::failed;
use super::follows;
use super::gate::add_grants;
use super::measure::Measured;
use super::reconcile::{Context, Pass, ReconcileError, Step};
use super::resolve::Content;
use crate::api::v2alpha1::{PendingPermission, PendingPermissions, PermissionScope, ServiceAccountReference};
use crate::bundle::names::generated_name;
use crate::controller::conditions::Transition;

/// Annotation naming the Install an object was created or applied for (defined with the API: policies read it).
pub use crate::api::v2alpha1::INSTALL_ANNOTATION;

/// The Install the grants belong to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantOwner<'a> {
    pub install: &'a str,
    pub uid: &'a str,
    /// The component label of the Operator that owns the Install, if one does.
    pub component_label: Option<&'a str>,
    /// Whether the rules follow from a `create` approved before rather than from an approval (`follows`): such
    /// grants carry [`FOLLOWED_ANNOTATION`], and never count as approved for what the content's own Roles and
    /// bindings pass on.
    pub followed: bool,
}

/// On the grants whose rules followed from an approved `create` (`docs/security.md`, invariant 11).
pub const FOLLOWED_ANNOTATION: &str = "v2alpha1.operators.coreos.com/follows-create";

/// The Roles, ClusterRoles and bindings granting `permissions` to `account`, in the order to apply them (roles
/// before the bindings that name them).
pub fn grant_objects(
    owner: &GrantOwner<'_>,
    account: &ServiceAccountReference,
    permissions: &[PendingPermission],
) -> Vec<Value> {
    let mut cluster_rules = Vec::new();
    let mut namespace_rules: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for permission in permissions {
        let rule = policy_rule(permission);
        match permission.scope {
            PermissionScope::Cluster => cluster_rules.push(rule),
            PermissionScope::Namespaced => {
                for namespace in &permission.namespaces {
                    namespace_rules.entry(namespace).or_default().push(rule.clone());
                }
            }
        }
    }
    let subject = json!([{"kind": "ServiceAccount", "name": account.name, "namespace": account.namespace}]);
    let mut roles = Vec::new();
    let mut bindings = Vec::new();
    if !cluster_rules.is_empty() {
        let name = grant_name(owner, None, &cluster_rules);
        roles.push(object(owner, "ClusterRole", None, &name, json!({"rules": cluster_rules})));
        let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name});
        bindings.push(object(
            owner,
            "ClusterRoleBinding",
            None,
            &name,
            json!({"roleRef": role_ref, "subjects": subject}),
        ));
    }
    for (namespace, rules) in namespace_rules {
        let name = grant_name(owner, Some(namespace), &rules);
        roles.push(object(owner, "Role", Some(namespace), &name, json!({"rules": rules})));
        let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name});
        bindings.push(object(
            owner,
            "RoleBinding",
            Some(namespace),
            &name,
            json!({"roleRef": role_ref, "subjects": subject}),
        ));
    }
    roles.extend(bindings);
    roles
}

fn policy_rule(permission: &PendingPermission) -> Value {
    let mut rule = json!({"verbs": permission.verbs});
    if permission.non_resource_urls.is_empty() {
        rule["apiGroups"] = json!(permission.api_groups);
        rule["resources"] = json!(permission.resources);
        if !permission.resource_names.is_empty() {
            rule["resourceNames"] = json!(permission.resource_names);
        }
    } else {
        rule["nonResourceURLs"] = json!(permission.non_resource_urls);
    }
    rule
}

/// Named after the Install's uid as well as its rules: an Install created again under the same name never writes
/// over (and so never takes over) the grants an orphaned predecessor left.
fn grant_name(owner: &GrantOwner<'_>, namespace: Option<&str>, rules: &[Value]) -> String {
    let mut hashed = json!({"install": owner.install, "uid": owner.uid, "namespace": namespace, "rules": rules});
    // Apart from approved grants of the same rules; the names of approved grants stay what they always were.
    if owner.followed {
        hashed["followed"] = json!(true);
    }
    generated_name(&format!("olmv2-install-{}", owner.install), &hashed)
}

fn object(owner: &GrantOwner<'_>, kind: &str, namespace: Option<&str>, name: &str, body: Value) -> Value {
    let mut object = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {
            "name": name,
            "annotations": {INSTALL_ANNOTATION: owner.install},
            "ownerReferences": [{
                "apiVersion": "operators.coreos.com/v2alpha1",
                "kind": "Install",
                "name": owner.install,
                "uid": owner.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
    });
    if let Some(namespace) = namespace {
        object["metadata"]["namespace"] = json!(namespace);
    }
    if owner.followed {
        object["metadata"]["annotations"][FOLLOWED_ANNOTATION] = json!("true");
    }
    if let Some(label) = owner.component_label {
        object["metadata"]["labels"] = json!({label: ""});
    }
    if let (Some(target), Some(fields)) = (object.as_object_mut(), body.as_object()) {
        target.extend(fields.clone());
    }
    object
}

/// The pass's step after the gate let rules through: grants `grant` to the account, what followed from a `create` apart and marked so (told in an event), as the
/// controller; the status records it as granted and the content as let through.
pub async fn grant(
    ctx: &Context,
    pass: &mut Pass<'_>,
    account: &Account,
    content: &Content,
    measured: &Measured,
    grant: &[PendingPermission],
) -> Result<Step<()>, ReconcileError> {
    if !measured.split.follows.is_empty() {
        let note = format!(
            "granting get, patch, update and delete on objects this Install creates, following from the create it \
             was granted: {}",
            measured.absent.iter().map(follows::describe).collect::<Vec<_>>().join(", ")
        );
        tracing::info!(install = %pass.name, "{note}");
        let transition = Transition { warning: false, reason: "GrantFollowsCreate".into(), note };
        ctx.cluster.events.publish(pass.install, &[transition]).await;
    }
    let controller = ctx.cluster.objects(&content.kinds);
    let (followed, approved): (Vec<_>, Vec<_>) =
        grant.iter().cloned().partition(|rule| measured.split.follows.contains(rule));
    for (rules, followed) in [(approved, false), (followed, true)] {
        let owner =
            GrantOwner { install: &pass.name, uid: &pass.uid, component_label: pass.label.as_deref(), followed };
        for object in grant_objects(&owner, &account.reference, &rules) {
            match controller.apply(&object).await {
                Ok(live) => ctx.cluster.wrote(&live),
                Err(error) => return Ok(Step::Break(failed(&error, ctx.basics.retry))),
            }
        }
    }
    pass.status.pending = Some(PendingPermissions::default());
    pass.status.granted = add_grants(&pass.status.granted, grant);
    pass.status.approved_content = content.resolved.clone();
    Ok(Step::Continue(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permission(
        scope: PermissionScope,
        namespaces: &[&str],
        verbs: &[&str],
        resources: &[&str],
    ) -> PendingPermission {
        PendingPermission {
            scope,
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            api_groups: vec![String::new()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            resource_names: vec![],
            non_resource_urls: vec![],
        }
    }

    fn owner() -> GrantOwner<'static> {
        GrantOwner {
            install: "plumbus",
            uid: "uid-1",
            component_label: Some("v2alpha1.operators.coreos.com/plumbus"),
            followed: false,
        }
    }

    fn account() -> ServiceAccountReference {
        ServiceAccountReference { name: "plumbus".into(), namespace: "olmv2-system".into() }
    }

    #[test]
    fn nothing_to_grant_creates_nothing() {
        assert!(grant_objects(&owner(), &account(), &[]).is_empty());
    }

    #[test]
    fn cluster_and_namespaced_rules_get_their_own_roles_and_bindings() {
        let permissions = vec![
            permission(PermissionScope::Cluster, &[], &["get"], &["namespaces"]),
            permission(PermissionScope::Namespaced, &["a", "b"], &["create"], &["secrets"]),
        ];
        let objects = grant_objects(&owner(), &account(), &permissions);
        let kinds: Vec<(&str, Option<&str>)> =
            objects.iter().map(|o| (o["kind"].as_str().unwrap(), o["metadata"]["namespace"].as_str())).collect();
        assert_eq!(
            kinds,
            vec![
                ("ClusterRole", None),
                ("Role", Some("a")),
                ("Role", Some("b")),
                ("ClusterRoleBinding", None),
                ("RoleBinding", Some("a")),
                ("RoleBinding", Some("b")),
            ]
        );
        assert_eq!(objects[0]["rules"], json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["namespaces"]}]));
        assert_eq!(objects[1]["rules"], json!([{"verbs": ["create"], "apiGroups": [""], "resources": ["secrets"]}]));
        assert_eq!(
            objects[3]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "plumbus", "namespace": "olmv2-system"}])
        );
        assert_eq!(objects[3]["roleRef"]["name"], objects[0]["metadata"]["name"]);
        assert_eq!(objects[4]["roleRef"]["name"], objects[1]["metadata"]["name"]);
        assert_eq!(objects[4]["roleRef"]["kind"], "Role");
    }

    #[test]
    fn grants_are_owned_by_the_install_and_labelled_for_its_operator() {
        let permissions = vec![permission(PermissionScope::Cluster, &[], &["get"], &["nodes"])];
        for object in grant_objects(&owner(), &account(), &permissions) {
            assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], "uid-1");
            assert_eq!(object["metadata"]["ownerReferences"][0]["kind"], "Install");
            assert_eq!(object["metadata"]["labels"]["v2alpha1.operators.coreos.com/plumbus"], "");
            assert_eq!(object["metadata"]["annotations"][INSTALL_ANNOTATION], "plumbus");
        }
    }

    #[test]
    fn names_are_stable_and_differ_with_the_rules() {
        let first = vec![permission(PermissionScope::Cluster, &[], &["get"], &["nodes"])];
        let second = vec![permission(PermissionScope::Cluster, &[], &["list"], &["nodes"])];
        let name = |p: &[PendingPermission]| grant_objects(&owner(), &account(), p)[0]["metadata"]["name"].clone();
        assert_eq!(name(&first), name(&first));
        assert_ne!(name(&first), name(&second));
        let again = GrantOwner { uid: "uid-2", ..owner() };
        assert_ne!(
            grant_objects(&again, &account(), &first)[0]["metadata"]["name"],
            name(&first),
            "an Install of the same name created again gets grants of its own"
        );
        assert!(name(&first).as_str().unwrap().len() <= 63);
    }

    #[test]
    fn non_resource_urls_become_url_rules() {
        let mut url = permission(PermissionScope::Cluster, &[], &["get"], &[]);
        url.api_groups.clear();
        url.non_resource_urls = vec!["/metrics".into()];
        let objects = grant_objects(&owner(), &account(), &[url]);
        assert_eq!(objects[0]["rules"], json!([{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]));
    }

    #[test]
    fn an_install_without_operator_carries_no_component_label() {
        let owner = GrantOwner { component_label: None, ..owner() };
        let objects =
            grant_objects(&owner, &account(), &[permission(PermissionScope::Cluster, &[], &["get"], &["nodes"])]);
        assert!(objects[0]["metadata"].get("labels").is_none());
    }

    #[test]
    fn grants_that_followed_are_marked_and_named_apart() {
        let rules = [PendingPermission {
            scope: PermissionScope::Namespaced,
            namespaces: vec!["operators".into()],
            verbs: vec!["get".into()],
            api_groups: vec![String::new()],
            resources: vec!["configmaps".into()],
            resource_names: vec!["b".into()],
            non_resource_urls: vec![],
        }];
        let account = ServiceAccountReference { namespace: "olmv2-system".into(), name: "a".into() };
        let approved = grant_objects(&owner(), &account, &rules);
        let followed = grant_objects(&GrantOwner { followed: true, ..owner() }, &account, &rules);
        assert!(approved.iter().all(|o| o["metadata"]["annotations"].get(FOLLOWED_ANNOTATION).is_none()));
        assert!(followed.iter().all(|o| o["metadata"]["annotations"][FOLLOWED_ANNOTATION] == "true"));
        assert_ne!(approved[0]["metadata"]["name"], followed[0]["metadata"]["name"]);
    }
}
