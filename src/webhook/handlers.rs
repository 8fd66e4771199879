//! The webhook's routes: each decodes an AdmissionReview, takes the pure decision of `approval`, `identity` or
//! `catalog_use`, asks the API server the access reviews that decision needs (in the requester's own identity), and
//! answers allowed, denied, or allowed with a JSON patch. Every failure to check denies: the webhook fails closed.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use kube::api::{Api, ListParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::DynamicObject;
use kube::Client;
use serde_json::Value;

use super::approval::{denial, judge, Verdict};
use super::catalog_use::{catalog_use_check, catalog_use_denial};
use super::csv_author::{account_namer_mutation, author_mutation};
use super::identity::{
    borrowable, content_change, marked, mutation, operator_creator_only, operator_source_change, owned_install,
    patch_operations, record_violation, ContentChange, Mutation,
};
use super::sources::source_denial;
use crate::access::operator_group_use_checks;
use crate::access::{allowed, lacking};
use crate::api::v2alpha1::{Install, Requester, OPERATOR_INSTALL_ANNOTATION};
use crate::policy::sources::{install_sources, operator_source};
use crate::rbac::RbacObjects;

/// What every route needs.
pub struct Checker {
    pub client: Client,
    /// The username the API server knows the controller by: its writes are the controller's own.
    pub controller_username: String,
    /// Where the controller's own accounts live; an account elsewhere is an OperatorGroup's.
    pub controller_namespace: String,
}

/// A decoded review: the request, the allowing response to start from, and the old and new objects as JSON.
struct Decoded {
    request: AdmissionRequest<DynamicObject>,
    response: AdmissionResponse,
    old: Option<Value>,
    new: Option<Value>,
}

/// Decodes a review; the error is the message of the answer to a review that is not one.
fn decode(review: AdmissionReview<DynamicObject>) -> Result<Decoded, String> {
    let request: AdmissionRequest<DynamicObject> = review.try_into().map_err(|error| format!("{error}"))?;
    let response = AdmissionResponse::from(&request);
    let as_value = |object: &Option<DynamicObject>| object.as_ref().and_then(|o| serde_json::to_value(o).ok());
    let (old, new) = (as_value(&request.old_object), as_value(&request.object));
    Ok(Decoded { request, response, old, new })
}

/// The requester as the API server authenticated them.
fn requester(user: &UserInfo) -> Requester {
    Requester {
        username: user.username.clone().unwrap_or_default(),
        uid: user.uid.clone(),
        groups: user.groups.clone().unwrap_or_default(),
        extra: user.extra.clone().unwrap_or_default().into_iter().collect(),
    }
}

fn forbid(response: AdmissionResponse, message: String) -> AdmissionResponse {
    let mut response = response.deny(message);
    response.result.code = 403;
    response.result.reason = "Forbidden".into();
    response
}

/// Whether `user` could make `change` with what they hold: every granted rule, and the use of the OperatorGroup
/// account when the Install runs as one; while no account is assigned, only the creator could.
async fn holds(client: &Client, user: &Requester, change: &ContentChange) -> Result<bool, kube::Error> {
    if let Some(creator) = &change.creator_only {
        return Ok(!creator.is_empty() && *creator == user.username);
    }
    if !lacking(client, user, &change.granted).await?.is_empty() {
        return Ok(false);
    }
    if let Some(account) = &change.operator_group_account {
        for check in operator_group_use_checks(account) {
            if allowed(client, user, &check).await? {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    Ok(true)
}

/// What changing the content of `install` could borrow, the grants its uid owns read from the cluster: the status
/// may not list a grant yet (a pass that failed after granting).
async fn borrowable_now(checker: &Checker, install: &Value) -> Result<ContentChange, kube::Error> {
    borrowable_from(&checker.client, &checker.controller_namespace, install).await
}

async fn borrowable_from(
    client: &Client,
    controller_namespace: &str,
    install: &Value,
) -> Result<ContentChange, kube::Error> {
    let mut change = borrowable(install, controller_namespace);
    let uid = install["metadata"]["uid"].as_str().unwrap_or_default();
    let params = ListParams::default();
    let objects = RbacObjects {
        roles: shared(Api::<Role>::all(client.clone()).list(&params).await?.items),
        cluster_roles: shared(Api::<ClusterRole>::all(client.clone()).list(&params).await?.items),
        ..RbacObjects::default()
    };
    change.granted.extend(objects.owned_by(uid).granted_rules());
    change.granted.sort();
    change.granted.dedup();
    Ok(change)
}

fn shared<T>(items: Vec<T>) -> Vec<std::sync::Arc<T>> {
    items.into_iter().map(std::sync::Arc::new).collect()
}

/// Whether `user` could change the content of `install` themselves: they hold every rule its account was granted
/// (and may use the OperatorGroup account it runs as). The InstallPlan loop asks it of a Subscription's author before
/// moving the Subscription's Install to new content unmarked, as this webhook asks it of a person who does so.
pub async fn may_change_content(
    client: &Client,
    controller_namespace: &str,
    user: &Requester,
    install: &Install,
) -> Result<bool, kube::Error> {
    // Never judged on an empty object: one with no grants and no account would look borrowable by anyone.
    let install = serde_json::to_value(install).map_err(kube::Error::SerdeError)?;
    let change = borrowable_from(client, controller_namespace, &install).await?;
    holds(client, user, &change).await
}

/// The untrusted content change an update of an Install makes, if it makes one.
async fn untrusted_change(checker: &Checker, user: &Requester, decoded: &Decoded) -> Result<bool, kube::Error> {
    if user.username == checker.controller_username {
        return Ok(false);
    }
    let (Some(old), Some(new)) = (&decoded.old, &decoded.new) else { return Ok(false) };
    if content_change(Some(old), new, &checker.controller_namespace).is_none() {
        return Ok(false);
    }
    let change = borrowable_now(checker, old).await?;
    Ok(!holds(&checker.client, user, &change).await?)
}

/// Whether an update of an Operator changes its source in a way its updater could not have made to its Install.
async fn untrusted_source_change(checker: &Checker, user: &Requester, decoded: &Decoded) -> Result<bool, kube::Error> {
    if user.username == checker.controller_username {
        return Ok(false);
    }
    let (Some(old), Some(new)) = (&decoded.old, &decoded.new) else { return Ok(false) };
    if !operator_source_change(Some(old), new) {
        return Ok(false);
    }
    let installs = Api::<Install>::all(checker.client.clone());
    let own = old["metadata"]["annotations"][OPERATOR_INSTALL_ANNOTATION].as_str().unwrap_or(&decoded.request.name);
    let install = installs.get_opt(own).await?.map(|i| serde_json::to_value(i).unwrap_or_default());
    // Without its own Install (not created yet, or not its own), what the next Install borrows is the Operator's
    // creator's standing.
    let change = match install.filter(|install| owned_install(old, install)) {
        Some(install) => borrowable_now(checker, &install).await?,
        None => operator_creator_only(old),
    };
    if !holds(&checker.client, user, &change).await? {
        return Ok(true);
    }
    // The Installs of its dependencies move with the source too: the updater must hold what each was granted.
    let label = crate::api::component::component_label_key(&decoded.request.name);
    for dependency in installs.list(&ListParams::default().labels(&label)).await?.items {
        let dependency = serde_json::to_value(dependency).map_err(kube::Error::SerdeError)?;
        let not_its_own = dependency["metadata"]["name"] != own;
        if not_its_own
            && owned_install(old, &dependency)
            && !holds(&checker.client, user, &borrowable_now(checker, &dependency).await?).await?
        {
            return Ok(true);
        }
    }
    Ok(false)
}

fn mutate(checker: &Checker, decoded: Decoded, untrusted: bool, unapprove: bool) -> AdmissionReview<DynamicObject> {
    let Decoded { request, response, old, new } = decoded;
    let Some(new) = new else { return response.into_review() };
    let user = requester(&request.user_info);
    let mut wanted = mutation(&user, &checker.controller_username, old.as_ref(), &new, untrusted);
    wanted.unapprove &= unapprove;
    let operations = patch_operations(&new, &wanted);
    if operations.is_empty() {
        return response.into_review();
    }
    if untrusted {
        tracing::info!(install = %request.name, user = %user.username, "content changed by a user not holding its grants: marked for approval");
    }
    with_records(response, operations)
}

/// The allowing `response` with the JSON patch `operations`; denied when the patch cannot be written (fail closed).
fn with_records(response: AdmissionResponse, operations: Vec<Value>) -> AdmissionReview<DynamicObject> {
    let patched = serde_json::from_value::<json_patch::Patch>(Value::Array(operations))
        .map_err(|error| error.to_string())
        .and_then(|patch| response.clone().with_patch(patch).map_err(|error| error.to_string()));
    match patched {
        Ok(response) => response.into_review(),
        Err(message) => forbid(response, format!("the webhook could not write its records: {message}")).into_review(),
    }
}

/// Which resource a mutating review is for.
#[derive(Clone, Copy)]
enum Mutated {
    Install,
    Operator,
}

/// Records the creator, keeps the records on update, and marks a change of the content (an Install's) or of the
/// source (an Operator's) made by a user who could not have made it with what they hold.
async fn mutate_reviewed(
    checker: &Checker,
    review: AdmissionReview<DynamicObject>,
    kind: Mutated,
) -> AdmissionReview<DynamicObject> {
    let decoded = match decode(review) {
        Ok(decoded) => decoded,
        Err(message) => return AdmissionResponse::invalid(message).into_review(),
    };
    let user = requester(&decoded.request.user_info);
    let untrusted = match kind {
        Mutated::Install => untrusted_change(checker, &user, &decoded).await,
        Mutated::Operator => untrusted_source_change(checker, &user, &decoded).await,
    };
    match untrusted {
        // An Operator has no approval of its own: its mark makes its Install's next content wait.
        Ok(untrusted) => mutate(checker, decoded, untrusted, matches!(kind, Mutated::Install)),
        Err(error) => {
            tracing::warn!(%error, "access review failed");
            let message = format!("the change could not be checked: {error}");
            forbid(decoded.response, message).into_review()
        }
    }
}

pub async fn mutate_install(
    State(checker): State<Arc<Checker>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    Json(mutate_reviewed(&checker, review, Mutated::Install).await)
}

/// Records who authored a ClusterServiceVersion's or a Subscription's content (`csv_author`); never refuses.
pub async fn mutate_csv(
    State(checker): State<Arc<Checker>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    Json(record(&checker, review, author_mutation))
}

/// Records who named an OperatorGroup's account (`csv_author`); never refuses.
pub async fn mutate_operator_group(
    State(checker): State<Arc<Checker>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    Json(record(&checker, review, account_namer_mutation))
}

/// The review of a write whose only mutation is a record `decide` makes of who did it.
fn record(
    checker: &Checker,
    review: AdmissionReview<DynamicObject>,
    decide: fn(&Requester, &str, Option<&Value>, &Value) -> Mutation,
) -> AdmissionReview<DynamicObject> {
    let Decoded { request, response, old, new } = match decode(review) {
        Ok(decoded) => decoded,
        Err(message) => return AdmissionResponse::invalid(message).into_review(),
    };
    let Some(new) = new else { return response.into_review() };
    let user = requester(&request.user_info);
    let operations = patch_operations(&new, &decide(&user, &checker.controller_username, old.as_ref(), &new));
    if operations.is_empty() {
        return response.into_review();
    }
    with_records(response, operations)
}

pub async fn mutate_operator(
    State(checker): State<Arc<Checker>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    Json(mutate_reviewed(&checker, review, Mutated::Operator).await)
}

pub async fn review_install(
    State(checker): State<Arc<Checker>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let decoded = match decode(review) {
        Ok(decoded) => decoded,
        Err(message) => return Json(AdmissionResponse::invalid(message).into_review()),
    };
    let user = requester(&decoded.request.user_info);
    let status_write = decoded.request.sub_resource.as_deref() == Some("status");
    if let (false, Some(new)) = (status_write, &decoded.new) {
        if let Some(message) =
            record_violation(&user, &checker.controller_username, "Install", decoded.old.as_ref(), new)
        {
            return Json(forbid(decoded.response, message).into_review());
        }
        // Who may install from where (InstallPolicy sources): asked of people, not of the controller writing an
        // Operator's Install (the Operator's source was checked when its requester wrote it).
        if user.username != checker.controller_username {
            let sources = install_sources(decoded.old.as_ref(), new);
            if let Some(message) = source_denial(&checker.client, &user, &sources).await {
                tracing::info!(install = %decoded.request.name, user = %user.username, "source refused by policy");
                return Json(forbid(decoded.response, message).into_review());
            }
        }
        // A content change stands unmarked only for someone who could have made it with what they hold.
        if !marked(new) {
            match untrusted_change(&checker, &user, &decoded).await {
                Ok(false) => {}
                Ok(true) => {
                    let message = format!(
                        "Install {}: {} may change its content only with the content-change mark the controller's mutating webhook writes",
                        decoded.request.name, user.username
                    );
                    return Json(forbid(decoded.response, message).into_review());
                }
                Err(error) => {
                    let message = format!("the change of the content could not be checked: {error}");
                    return Json(forbid(decoded.response, message).into_review());
                }
            }
        }
    }
    let Decoded { request, response, old, new } = decoded;
    let username = user.username.clone();
    let verdict =
        judge(request.sub_resource.as_deref(), &username, &checker.controller_username, old.as_ref(), new.as_ref());
    let response = match verdict {
        Verdict::Allow => response,
        Verdict::Deny(message) => forbid(response, message),
        Verdict::RequireHeld(pending) => match lacking(&checker.client, &user, &pending).await {
            Ok(lacking) if lacking.is_empty() => {
                tracing::info!(install = %request.name, user = %username, rules = pending.len(), "approval allowed");
                response
            }
            Ok(lacking) => {
                let rules: Vec<_> = lacking.iter().filter_map(|index| pending.get(*index)).collect();
                tracing::info!(install = %request.name, user = %username, lacking = rules.len(), "approval denied");
                forbid(response, denial(&username, &request.name, &rules))
            }
            Err(error) => {
                tracing::warn!(%error, "access review failed");
                forbid(response, format!("the approval could not be checked: {error}"))
            }
        },
    };
    Json(response.into_review())
}

pub async fn review_operator(
    State(checker): State<Arc<Checker>>,
    Json(review): Json<AdmissionReview<DynamicObject>>,
) -> Json<AdmissionReview<DynamicObject>> {
    let Decoded { request, response, old, new } = match decode(review) {
        Ok(decoded) => decoded,
        Err(message) => return Json(AdmissionResponse::invalid(message).into_review()),
    };
    let user = requester(&request.user_info);
    if let (Some(new), false) = (&new, request.sub_resource.as_deref() == Some("status")) {
        if let Some(message) = record_violation(&user, &checker.controller_username, "Operator", old.as_ref(), new) {
            return Json(forbid(response, message).into_review());
        }
        if user.username != checker.controller_username {
            let sources: Vec<_> = operator_source(old.as_ref(), new).into_iter().collect();
            if let Some(message) = source_denial(&checker.client, &user, &sources).await {
                tracing::info!(operator = %request.name, user = %user.username, "source refused by policy");
                return Json(forbid(response, message).into_review());
            }
        }
    }
    // Making an Operator a Subscription again deletes it: only who may delete it asks for that, and only of one
    // that exists (a new Operator has nothing to hand back).
    if old.is_none() && revert_check(None, new.as_ref(), &request.name).is_some() {
        let message = format!("Operator {}: only an existing Operator can be made a Subscription again", request.name);
        return Json(forbid(response, message).into_review());
    }
    if let Some(check) = revert_check(old.as_ref(), new.as_ref(), &request.name) {
        match allowed(&checker.client, &user, &check).await {
            Ok(true) => {}
            Ok(false) => {
                let message = format!(
                    "user {:?} may not make Operator {} a Subscription again: it needs the verb delete on it",
                    user.username, request.name
                );
                return Json(forbid(response, message).into_review());
            }
            Err(error) => {
                let message = format!("the revert of Operator {} could not be checked: {error}", request.name);
                return Json(forbid(response, message).into_review());
            }
        }
    }
    let Some(check) = catalog_use_check(old.as_ref(), new.as_ref()) else {
        return Json(response.into_review());
    };
    let response = match allowed(&checker.client, &user, &check).await {
        Ok(true) => response,
        Ok(false) => {
            tracing::info!(operator = %request.name, user = %user.username, catalog = %check.name, "catalog use denied");
            forbid(response, catalog_use_denial(&user.username, &check))
        }
        Err(error) => {
            tracing::warn!(%error, "access review failed");
            forbid(response, format!("the use of the CatalogSource could not be checked: {error}"))
        }
    };
    Json(response.into_review())
}

/// The access a write of an Operator needs when it asks for it to be made a Subscription again (the annotation
/// `operators.coreos.com/revert-to-subscription` set): `delete` on the Operator, which the revert deletes.
pub fn revert_check(old: Option<&Value>, new: Option<&Value>, name: &str) -> Option<crate::access::AccessCheck> {
    let key = crate::api::v2alpha1::REVERT_ANNOTATION;
    let asked = |object: Option<&Value>| object.is_some_and(|o| o["metadata"]["annotations"][key] == "true");
    (asked(new) && !asked(old))
        .then(|| crate::access::AccessCheck::resource(None, "delete", "operators.coreos.com", "operators", name))
}

#[cfg(test)]
mod revert_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn asking_for_a_revert_needs_delete_on_the_operator() {
        let plain = json!({"metadata": {"name": "plumbus"}});
        let asked = json!({"metadata": {"name": "plumbus", "annotations": {"operators.coreos.com/revert-to-subscription": "true"}}});
        let check = revert_check(Some(&plain), Some(&asked), "plumbus").expect("checked");
        assert_eq!(
            (check.verb.as_str(), check.resource.as_str(), check.name.as_str()),
            ("delete", "operators", "plumbus")
        );
        assert!(revert_check(None, Some(&asked), "plumbus").is_some(), "on create too");
        assert!(revert_check(Some(&asked), Some(&asked), "plumbus").is_none(), "asked before");
        assert!(revert_check(Some(&plain), Some(&plain), "plumbus").is_none());
    }
}
