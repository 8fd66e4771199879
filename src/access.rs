//! Access reviews: whether a person may do one thing, asked of the API server with a SubjectAccessReview in their
//! own identity (user, groups, uid, extra) as it authenticated them. The webhook asks it of approvers, of users who
//! name a CatalogSource and of users who change an Install's content; the Install controller asks it of an
//! Install's creator before lending them an OperatorGroup's ServiceAccount, with the checks that decide who may use
//! such an account (`operator_group_use_checks`, `account_namer_checks`).

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::Client;

use crate::api::v2alpha1::{PendingPermission, PermissionScope, Requester, ServiceAccountReference};
use crate::rbac::breakdown;
use crate::rbac::missing::rule_of;

/// One access check: a single verb on a single resource (or URL) in one place.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AccessCheck {
    /// `None` for cluster-wide.
    pub namespace: Option<String>,
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// Set for non-resource rules instead of the resource fields.
    pub path: Option<String>,
}

/// The access checks that together mean "holds every rule of `pending`": every combination of verb, group,
/// resource and name, in every namespace the rule applies in (or cluster-wide).
pub fn access_checks(pending: &[PendingPermission]) -> Vec<(usize, AccessCheck)> {
    let mut checks = Vec::new();
    for (index, permission) in pending.iter().enumerate() {
        let places: Vec<Option<String>> = match permission.scope {
            PermissionScope::Cluster => vec![None],
            PermissionScope::Namespaced => permission.namespaces.iter().cloned().map(Some).collect(),
        };
        for atom in breakdown(&rule_of(permission)) {
            for place in &places {
                let verb = atom.verbs.first().cloned().unwrap_or_default();
                if let Some(url) = atom.non_resource_urls.first() {
                    checks.push((
                        index,
                        AccessCheck {
                            namespace: None,
                            verb,
                            group: String::new(),
                            resource: String::new(),
                            subresource: String::new(),
                            name: String::new(),
                            path: Some(url.clone()),
                        },
                    ));
                    continue;
                }
                let full = atom.resources.first().cloned().unwrap_or_default();
                let (resource, subresource) = match full.split_once('/') {
                    Some((resource, subresource)) => (resource.to_owned(), subresource.to_owned()),
                    None => (full, String::new()),
                };
                checks.push((
                    index,
                    AccessCheck {
                        namespace: place.clone(),
                        verb,
                        group: atom.api_groups.first().cloned().unwrap_or_default(),
                        resource,
                        subresource,
                        name: atom.resource_names.first().cloned().unwrap_or_default(),
                        path: None,
                    },
                ));
            }
        }
    }
    checks
}

impl AccessCheck {
    /// A check of `verb` on one resource (`resource/subresource` allowed) of `group`, in `namespace` (None: cluster).
    pub fn resource(namespace: Option<&str>, verb: &str, group: &str, resource: &str, name: &str) -> Self {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Self {
            namespace: namespace.map(str::to_owned),
            verb: verb.to_owned(),
            group: group.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            name: name.to_owned(),
            path: None,
        }
    }
}

/// Whether `user` may do what `check` asks, answered by the API server's authorizer.
pub async fn allowed(client: &Client, user: &Requester, check: &AccessCheck) -> Result<bool, kube::Error> {
    let mut spec = SubjectAccessReviewSpec {
        user: Some(user.username.clone()),
        groups: Some(user.groups.clone()).filter(|groups| !groups.is_empty()),
        uid: user.uid.clone(),
        extra: Some(user.extra.clone()).filter(|extra| !extra.is_empty()),
        ..SubjectAccessReviewSpec::default()
    };
    match &check.path {
        Some(path) => {
            spec.non_resource_attributes =
                Some(NonResourceAttributes { path: Some(path.clone()), verb: Some(check.verb.clone()) })
        }
        None => {
            spec.resource_attributes = Some(ResourceAttributes {
                namespace: check.namespace.clone(),
                verb: Some(check.verb.clone()),
                group: Some(check.group.clone()),
                resource: Some(check.resource.clone()),
                subresource: Some(check.subresource.clone()).filter(|s| !s.is_empty()),
                name: Some(check.name.clone()).filter(|n| !n.is_empty()),
                ..ResourceAttributes::default()
            })
        }
    }
    let review = SubjectAccessReview { spec, ..SubjectAccessReview::default() };
    let answer = Api::<SubjectAccessReview>::all(client.clone()).create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|status| status.allowed))
}

/// Whether `user` holds every rule of `rules`: the indexes of the rules they lack (empty when they hold all).
pub async fn lacking(
    client: &Client,
    user: &Requester,
    rules: &[PendingPermission],
) -> Result<Vec<usize>, kube::Error> {
    let mut lacking = Vec::new();
    for (index, check) in access_checks(rules) {
        if lacking.contains(&index) {
            continue;
        }
        if !allowed(client, user, &check).await? {
            lacking.push(index);
        }
    }
    Ok(lacking)
}

/// The access checks of which the creator of an Install must pass one for an OperatorGroup's account to lend it its
/// existing rights: `create subscriptions` in the account's namespace (what OLM v0 asked of whoever installed with
/// that account), or `impersonate` on the account itself (they could act as it anyway).
pub fn operator_group_use_checks(account: &ServiceAccountReference) -> [AccessCheck; 2] {
    [
        AccessCheck::resource(Some(&account.namespace), "create", "operators.coreos.com", "subscriptions", ""),
        AccessCheck::resource(Some(&account.namespace), "impersonate", "", "serviceaccounts", &account.name),
    ]
}

/// The access checks of which whoever named an OperatorGroup's account must pass one for it to lend its rights:
/// Kubernetes' own test of who may use an account, the power to run as it (`impersonate` on it, or `create pods` in
/// its namespace, which runs a pod as any account there).
pub fn account_namer_checks(account: &ServiceAccountReference) -> [AccessCheck; 2] {
    [
        AccessCheck::resource(Some(&account.namespace), "impersonate", "", "serviceaccounts", &account.name),
        AccessCheck::resource(Some(&account.namespace), "create", "", "pods", ""),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reference(namespace: &str, name: &str) -> ServiceAccountReference {
        ServiceAccountReference { namespace: namespace.into(), name: name.into() }
    }

    #[test]
    fn using_an_operator_group_account_takes_create_subscriptions_or_impersonating_it() {
        let [subscriptions, impersonate] = operator_group_use_checks(&reference("operators", "robot"));
        assert_eq!(
            (subscriptions.namespace.as_deref(), subscriptions.verb.as_str(), subscriptions.resource.as_str()),
            (Some("operators"), "create", "subscriptions")
        );
        assert_eq!(subscriptions.group, "operators.coreos.com");
        assert_eq!((impersonate.verb.as_str(), impersonate.name.as_str()), ("impersonate", "robot"));
        assert_eq!(impersonate.resource, "serviceaccounts");
    }

    #[test]
    fn naming_an_account_lends_it_only_for_who_may_run_as_it() {
        let [impersonate, pods] = account_namer_checks(&reference("operators", "robot"));
        assert_eq!(
            (impersonate.namespace.as_deref(), impersonate.verb.as_str(), impersonate.resource.as_str()),
            (Some("operators"), "impersonate", "serviceaccounts")
        );
        assert_eq!((impersonate.group.as_str(), impersonate.name.as_str()), ("", "robot"));
        assert_eq!(
            (pods.namespace.as_deref(), pods.verb.as_str(), pods.resource.as_str()),
            (Some("operators"), "create", "pods")
        );
        assert_eq!((pods.group.as_str(), pods.name.as_str()), ("", ""));
    }

    #[test]
    fn checks_cover_each_verb_resource_and_namespace() {
        let pending: Vec<PendingPermission> = serde_json::from_value(json!([
            {"scope": "Namespaced", "namespaces": ["a", "b"], "verbs": ["get", "create"], "apiGroups": [""], "resources": ["secrets", "pods/log"]},
            {"scope": "Cluster", "verbs": ["get"], "nonResourceURLs": ["/metrics"]},
        ]))
        .expect("pending");
        let checks = access_checks(&pending);
        assert_eq!(checks.len(), 2 * 2 * 2 + 1);
        assert!(checks.iter().any(|(_, c)| c.namespace.as_deref() == Some("b")
            && c.verb == "create"
            && c.resource == "pods"
            && c.subresource == "log"));
        assert!(checks.iter().any(|(i, c)| *i == 1 && c.path.as_deref() == Some("/metrics") && c.namespace.is_none()));
    }

    #[test]
    fn a_resource_check_splits_the_subresource() {
        let check = AccessCheck::resource(Some("ns"), "impersonate", "", "serviceaccounts/token", "robot");
        assert_eq!(
            (check.resource.as_str(), check.subresource.as_str(), check.name.as_str()),
            ("serviceaccounts", "token", "robot")
        );
        assert_eq!(check.namespace.as_deref(), Some("ns"));
    }
}
