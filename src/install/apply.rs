//! Writing content as the ServiceAccount (docs/design.md, 'How content is applied'), with a client impersonating it
//! (`cluster`): server-side apply of untyped objects, reads of live state and pruning. The API server judges every
//! write with the account's RBAC, so nothing the content brings is written with the controller's own identity. The
//! pass's apply step ([`apply_content`]) applies, takes over and prunes with them.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::account::Account;
use super::conditions::Outcome;
use super::content;
use super::crd_schema::{self, VersionValidator};
use super::drift;
use super::follows::{self, ObjectKey};
use super::plan::{self, Existing};
use super::reconcile::{Context, Pass, ReconcileError, Step, Stop};
use super::resolve::Content;
use super::takeover::{self, TakenCsv, Takeover};
use crate::api::v2alpha1::{AppliedObject, InstallState, ServiceAccountReference};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient, Objects};
use crate::controller::conditions::Transition;
use crate::rbac::required::RBAC_GROUP;
use crate::rbac::KindIndex;

/// The field manager of everything the Install controller applies.
pub const FIELD_MANAGER: &str = "olmv2-install";

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{kind} ({api_version}) is not served by the cluster")]
    UnknownKind { api_version: String, kind: String },
    #[error("{object} is not a valid object: {reason}")]
    InvalidObject { object: String, reason: String },
    #[error("failed to apply {object} as {user}")]
    Apply {
        object: String,
        user: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to read {object}")]
    Read {
        object: String,
        #[source]
        source: ClientError,
    },
    /// The content names an object that exists and was not created by this Install: applying it would take it over
    /// (and deleting the Install would then remove it).
    #[error("{object} exists and was not created by this Install; content never takes over an existing object")]
    NotOwned { object: String },
    /// OLM's refusal of a CRD update that drops a stored version, word for word.
    #[error(
        "risk of data loss updating {crd:?}: new CRD removes version {version} that is listed as a stored version on \
         the existing CRD"
    )]
    UnsafeCrdUpgrade { crd: String, version: String },
    /// OLM's refusal of a CRD update whose new schema an existing custom resource fails.
    #[error("error validating existing CRs against new CRD's schema for {crd:?}: {violation}")]
    ExistingResourceInvalid { crd: String, violation: String },
    #[error("error validating existing CRs against new CRD's schema for {crd:?}: {source}")]
    NewSchemaInvalid {
        crd: String,
        #[source]
        source: crd_schema::SchemaError,
    },
    /// `listing` names what was listed and as whom.
    #[error("error validating existing CRs against new CRD's schema for {crd:?}: failed to list {listing}")]
    ListExisting {
        crd: String,
        listing: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to prune {object} as {user}")]
    Prune {
        object: String,
        user: String,
        #[source]
        source: ClientError,
    },
}

impl Categorized for ApplyError {
    fn category(&self) -> &'static str {
        match self {
            Self::UnknownKind { .. } => "ContentKindUnknown",
            Self::NotOwned { .. } => "ObjectNotOwned",
            Self::UnsafeCrdUpgrade { .. } | Self::ExistingResourceInvalid { .. } => "CRDUpgradeUnsafe",
            Self::NewSchemaInvalid { .. } => "CRDSchemaInvalid",
            Self::ListExisting { .. } => "CRDUpgradeUnverifiable",
            Self::InvalidObject { .. } => "ContentObjectInvalid",
            Self::Apply { source, .. } if source.is_forbidden() => "ApplyForbidden",
            Self::Apply { .. } => "ApplyFailed",
            Self::Read { .. } => "ReadFailed",
            Self::Prune { .. } => "PruneFailed",
        }
    }
}

/// The username Kubernetes gives a ServiceAccount.
pub fn service_account_user(account: &ServiceAccountReference) -> String {
    format!("system:serviceaccount:{}:{}", account.namespace, account.name)
}

/// `Kind namespace/name` of an object, for messages.
pub fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("object");
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// `Kind namespace/name` of a recorded object.
pub fn describe_ref(object: &AppliedObject) -> String {
    match &object.namespace {
        Some(namespace) => format!("{} {namespace}/{}", object.kind, object.name),
        None => format!("{} {}", object.kind, object.name),
    }
}

fn objects_for(
    client: &ControllerClient,
    kinds: &KindIndex,
    reference: &AppliedObject,
) -> Result<Objects<DynamicObject>, ApplyError> {
    let info = kinds.resolve(&reference.api_version, &reference.kind).ok_or_else(|| ApplyError::UnknownKind {
        api_version: reference.api_version.clone(),
        kind: reference.kind.clone(),
    })?;
    let version = reference.api_version.rsplit('/').next().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(&info.group, version, &reference.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &info.plural);
    let namespace = reference.namespace.as_deref().filter(|_| info.namespaced);
    Ok(client.dynamic(&resource, namespace))
}

/// OLM's check of the custom resources stored today against the schemas a CRD update brings (`crd_schema`), listing
/// them as `user` (the Install's account, which applies the CRD: the controller reads no custom resources of its
/// own). An object failing refuses the update, unless the new CRD converts by webhook: then, as OLM, the update goes
/// on and the answer is the warning to record.
pub async fn check_existing_resources(
    client: &ControllerClient,
    user: &str,
    live: &Value,
    new: &Value,
) -> Result<Option<String>, ApplyError> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let (crd, group) = (text(&new["metadata"]["name"]), text(&new["spec"]["group"]));
    let (kind, plural) = (text(&new["spec"]["names"]["kind"]), text(&new["spec"]["names"]["plural"]));
    for check in crd_schema::versions_to_check(live, new) {
        let validator = VersionValidator::new(&check)
            .map_err(|source| ApplyError::NewSchemaInvalid { crd: crd.clone(), source })?;
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, &check.version, &kind), &plural);
        let objects = client.dynamic(&resource, None).list().await.map_err(|source| ApplyError::ListExisting {
            crd: crd.clone(),
            listing: format!("{plural}.{group}/{} as {user}", check.version),
            source,
        })?;
        for object in objects {
            let value = serde_json::to_value(&object)
                .map_err(|error| ApplyError::InvalidObject { object: crd.clone(), reason: error.to_string() })?;
            let Some(violation) = validator.violation(&group, &kind, &value) else { continue };
            if crd_schema::converts_by_webhook(new) {
                return Ok(Some(format!(
                    "Validation of existing CRs against the new CRD's schema failed, but a webhook conversion strategy \
                     was specified in the new CRD.\nThe new webhook will only start after the bundle is upgraded, so we \
                     must assume that it will successfully convert existing CRs to a format that would have passed \
                     validation.\n\nCRD: {crd:?}\nValidation Error: {violation}\n"
                )));
            }
            return Err(ApplyError::ExistingResourceInvalid { crd, violation });
        }
    }
    Ok(None)
}

/// Applies `object` with server-side apply, taking over fields others changed (repairing drift), and returns the
/// live object the server answered.
pub async fn apply(
    client: &ControllerClient,
    user: &str,
    kinds: &KindIndex,
    object: &Value,
) -> Result<Value, ApplyError> {
    let reference = super::content::applied_ref(object);
    let applied = objects_for(client, kinds, &reference)?
        .apply(&reference.name, object, None)
        .await
        .map_err(|source| ApplyError::Apply { object: describe(object), user: user.to_owned(), source })?;
    serde_json::to_value(applied)
        .map_err(|error| ApplyError::InvalidObject { object: describe(object), reason: error.to_string() })
}

/// Removes OLM v0's owner labels from an object an Install took over (`takeover`): it is the Install's now, and the
/// taken-over CSV's finalizer, which deletes what those labels select, must not delete it with that CSV.
pub async fn disown(
    client: &ControllerClient,
    user: &str,
    kinds: &KindIndex,
    object: &Value,
) -> Result<(), ApplyError> {
    let reference = super::content::applied_ref(object);
    let labels: serde_json::Map<String, Value> =
        takeover::OWNER_LABELS.iter().map(|label| ((*label).to_owned(), Value::Null)).collect();
    objects_for(client, kinds, &reference)?
        .merge_patch(&reference.name, &serde_json::json!({"metadata": {"labels": labels}}), None)
        .await
        .map_err(|source| ApplyError::Apply { object: describe(object), user: user.to_owned(), source })?;
    Ok(())
}

/// The objects of `objects` among `candidates` that do not exist (`follows`). RBAC objects are looked up in
/// `existing_rbac`, the controller's watch of them, and one missing there is read live by `controller` (a watch may
/// be moments behind a Role just made: it is never taken for absent on the watch's word); any other by a dry-run
/// create as the account (`client`), which holds `create` but maybe not `get` on them. Refused for any other reason
/// than the name being taken, an object is not counted as absent (its rules stay for a person), and the refusal is
/// logged.
pub async fn absent(
    client: &ControllerClient,
    controller: &ControllerClient,
    kinds: &KindIndex,
    objects: &[Value],
    candidates: &BTreeSet<ObjectKey>,
    existing_rbac: &BTreeSet<ObjectKey>,
) -> Result<BTreeSet<ObjectKey>, ApplyError> {
    let mut absent = BTreeSet::new();
    for object in objects {
        let Some(key) = follows::key_of(object, kinds).filter(|key| candidates.contains(key)) else { continue };
        if key.group == RBAC_GROUP {
            if !existing_rbac.contains(&key)
                && get(controller, kinds, &super::content::applied_ref(object)).await?.is_none()
            {
                absent.insert(key);
            }
            continue;
        }
        let reference = super::content::applied_ref(object);
        let typed: DynamicObject = serde_json::from_value(object.clone())
            .map_err(|error| ApplyError::InvalidObject { object: describe(object), reason: error.to_string() })?;
        match objects_for(client, kinds, &reference)?.could_create(&typed).await {
            Ok(true) => {
                absent.insert(key);
            }
            Ok(false) => {}
            Err(error) => tracing::info!(object = %describe(object), %error, "a dry-run create was refused"),
        }
    }
    Ok(absent)
}

/// The live object, if it exists.
pub async fn get(
    client: &ControllerClient,
    kinds: &KindIndex,
    reference: &AppliedObject,
) -> Result<Option<Value>, ApplyError> {
    let found = objects_for(client, kinds, reference)?
        .get_opt(&reference.name)
        .await
        .map_err(|source| ApplyError::Read { object: describe_ref(reference), source })?;
    found
        .map(serde_json::to_value)
        .transpose()
        .map_err(|error| ApplyError::InvalidObject { object: describe_ref(reference), reason: error.to_string() })
}

/// Deletes an object the content no longer has; one already gone is fine. Kinds no longer served are skipped:
/// their objects went with their definition.
pub async fn prune(
    client: &ControllerClient,
    user: &str,
    kinds: &KindIndex,
    reference: &AppliedObject,
) -> Result<(), ApplyError> {
    let objects = match objects_for(client, kinds, reference) {
        Ok(objects) => objects,
        Err(ApplyError::UnknownKind { .. }) => return Ok(()),
        Err(error) => return Err(error),
    };
    objects.ensure_deleted(&reference.name).await.map_err(|source| ApplyError::Prune {
        object: describe_ref(reference),
        user: user.to_owned(),
        source,
    })
}

/// Whether a live Deployment is available at its current generation.
pub fn deployment_available(live: &Value) -> bool {
    let generation = live["metadata"]["generation"].as_i64().unwrap_or(0);
    let observed = live["status"]["observedGeneration"].as_i64().unwrap_or(-1);
    let available = live["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|condition| condition["type"] == "Available" && condition["status"] == "True");
    observed >= generation && available
}

/// What the apply found: the content's Deployments as they are, and the objects someone changed.
pub struct Applied {
    pub deployments: Vec<Value>,
    pub diverged: Vec<String>,
}

/// The pass's apply step: applies the content as the account (unless a settled Install finds everything as applied), never over an object
/// someone else made, nor a CRD losing a stored version; takes over what OLM v0 made for the operator's CSV, and
/// prunes what the content no longer has.
pub async fn apply_content(
    ctx: &Context,
    pass: &mut Pass<'_>,
    account: &Account,
    content: &Content,
    taken: Option<&(Takeover, TakenCsv)>,
    same_content: bool,
) -> Result<Step<Applied>, ReconcileError> {
    let (client, kinds, objects) = (&account.client, &content.kinds, &content.objects);
    let retry = ctx.options.retry;
    let settled = matches!(pass.previous.state, Some(InstallState::Installed | InstallState::Applying));
    let (diverged, relabel) = if same_content && settled {
        compare_with_live(client, kinds, objects, pass.label.as_deref()).await?
    } else {
        (Vec::new(), false)
    };
    let mut deployments = Vec::new();
    if same_content && settled && diverged.is_empty() && !relabel {
        for object in objects.iter().filter(|object| object["kind"] == "Deployment") {
            deployments.extend(get(client, kinds, &content::applied_ref(object)).await?);
        }
        return Ok(Step::Continue(Applied { deployments, diverged }));
    }
    let content_crds = takeover::owned_crds(objects);
    let mut to_disown = Vec::new();
    for object in objects {
        match admit_existing(ctx, pass, account, kinds, taken, &content_crds, object).await? {
            Step::Continue(true) => to_disown.push(object.clone()),
            Step::Continue(false) => {}
            Step::Break(stop) => return Ok(Step::Break(stop)),
        }
        match apply(client, &account.user, kinds, object).await {
            Ok(live) => {
                ctx.cluster.wrote(&live);
                deployments.extend((live["kind"] == "Deployment").then_some(live));
            }
            Err(error) => return Ok(Step::Break(failed(&error, retry))),
        }
    }
    if let Err(error) = disown_and_prune(pass, account, kinds, objects, &to_disown).await {
        return Ok(Step::Break(failed(&error, retry)));
    }
    Ok(Step::Continue(Applied { deployments, diverged }))
}

/// A settled Install given the same content again: the objects someone changed since (`diverged`, drift to
/// repair), and whether some only lack the component `label` (`relabel`). An Operator that came to own the Install
/// (an adopted Subscription's) labels its objects: applied again, but not drift, which is someone changing what the
/// Install applied.
async fn compare_with_live(
    client: &ControllerClient,
    kinds: &KindIndex,
    objects: &[Value],
    label: Option<&str>,
) -> Result<(Vec<String>, bool), ApplyError> {
    let (mut diverged, mut relabel) = (Vec::new(), false);
    for object in objects {
        match get(client, kinds, &content::applied_ref(object)).await? {
            Some(live) if drift::holds(object, &live) => {}
            Some(live) if drift::holds(&drift::without_label(object, label), &live) => relabel = true,
            _ => diverged.push(describe(object)),
        }
    }
    Ok((diverged, relabel))
}

/// An object about to be applied, checked against what exists under its name when the Install did not apply it
/// before, or when it is a CRD: someone else's object, or a CRD dropping a stored version, ends the pass, as does a
/// CRD whose existing resources fail its new schema. Goes on with whether the object is taken over from OLM v0 and
/// so to be disowned once applied.
async fn admit_existing(
    ctx: &Context,
    pass: &Pass<'_>,
    account: &Account,
    kinds: &KindIndex,
    taken: Option<&(Takeover, TakenCsv)>,
    content_crds: &BTreeSet<String>,
    object: &Value,
) -> Result<Step<bool>, ReconcileError> {
    let retry = ctx.options.retry;
    let reference = content::applied_ref(object);
    let owned_before = pass.previous.applied.contains(&reference);
    if owned_before && object["kind"] != "CustomResourceDefinition" {
        return Ok(Step::Continue(false));
    }
    let Some(live) = get(&account.client, kinds, &reference).await? else { return Ok(Step::Continue(false)) };
    let taken_over =
        taken.is_some_and(|(takeover, csv)| takeover::made_for_csv(&live, takeover, csv, content_crds, &pass.name));
    let created = content::created_by(&live, &pass.name, &pass.uid);
    match plan::existing(object, &live, owned_before, created, taken_over) {
        Existing::NotOwned => Ok(Step::Break(failed(&ApplyError::NotOwned { object: describe(object) }, retry))),
        Existing::DropsStoredVersion(version) => {
            let error = ApplyError::UnsafeCrdUpgrade { crd: reference.name.clone(), version };
            Ok(Step::Break(failed(&error, retry)))
        }
        Existing::Apply { disown: take, check_crd } => {
            // (Also when a pass that failed halfway applied it already.)
            if check_crd {
                if let Err(error) = check_crd_resources(ctx, pass, account, &live, object).await {
                    return Ok(Step::Break(failed(&error, retry)));
                }
            }
            Ok(Step::Continue(take))
        }
    }
}

/// What follows a complete apply: OLM v0's owner labels removed from the objects taken over (so the taken-over
/// CSV's finalizer spares them), then what the content no longer has pruned. The first failure is the answer.
async fn disown_and_prune(
    pass: &Pass<'_>,
    account: &Account,
    kinds: &KindIndex,
    objects: &[Value],
    to_disown: &[Value],
) -> Result<(), ApplyError> {
    for object in to_disown {
        disown(&account.client, &account.user, kinds, object).await?;
    }
    if !to_disown.is_empty() {
        tracing::info!(install = %pass.name, objects = to_disown.len(), "took over objects OLM v0 made for a CSV");
    }
    for stale in content::to_prune(&pass.previous.applied, objects) {
        prune(&account.client, &account.user, kinds, &stale).await?;
    }
    Ok(())
}

/// A CRD replacing `live`: its existing resources read against the new schema, a warning told as an event.
async fn check_crd_resources(
    ctx: &Context,
    pass: &Pass<'_>,
    account: &Account,
    live: &Value,
    object: &Value,
) -> Result<(), ApplyError> {
    if let Some(warning) = check_existing_resources(&account.client, &account.user, live, object).await? {
        tracing::warn!(install = %pass.name, "{warning}");
        let transition = Transition { warning: true, reason: "CRDValidation".into(), note: warning };
        ctx.cluster.events.publish(pass.install, &[transition]).await;
    }
    Ok(())
}

/// How a failed grant or apply ends the pass: reported, to try again after `retry`.
pub fn failed(error: &ApplyError, retry: Duration) -> Stop {
    let outcome = Outcome::ApplyFailed { reason: error.category(), message: crate::category::report(error) };
    Stop::new(outcome, retry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployments_are_available_only_at_their_generation() {
        let mut live = json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "conditions": [{"type": "Available", "status": "True"}]}});
        assert!(deployment_available(&live));
        live["status"]["observedGeneration"] = json!(1);
        assert!(!deployment_available(&live));
        assert!(!deployment_available(&json!({"metadata": {"generation": 1}})));
    }

    #[test]
    fn service_accounts_have_kubernetes_usernames() {
        let account = ServiceAccountReference { name: "plumbus".into(), namespace: "olm".into() };
        assert_eq!(service_account_user(&account), "system:serviceaccount:olm:plumbus");
    }

    #[test]
    fn objects_are_described_with_their_namespace_when_they_have_one() {
        assert_eq!(describe(&json!({"kind": "Role", "metadata": {"name": "r", "namespace": "n"}})), "Role n/r");
        assert_eq!(describe(&json!({"kind": "ClusterRole", "metadata": {"name": "r"}})), "ClusterRole r");
    }
}
