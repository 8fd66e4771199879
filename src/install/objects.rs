//! Objects of any kind, read and written as one identity ([`ObjectClient`]): the Install's account for everything
//! its content brings (docs/design.md, 'How content is applied': the API server judges each write with the
//! account's RBAC), the controller for its grants and for what it must read whatever the account holds. Server-side
//! apply of untyped objects, reads of live state, dry-run creates, the CRD upgrade check and pruning, each failure
//! an [`ApplyError`] naming the object and the identity. The pass's steps decide what to read and write; this is
//! the only way they reach the content's objects.

use std::collections::BTreeSet;

use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::crd_schema::{self, VersionValidator};
use super::follows::{self, ObjectKey};
use super::takeover;
use crate::api::v2alpha1::{AppliedObject, ServiceAccountReference};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient, Objects};
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

/// The reference an object is recorded under in `status.applied`, and addressed by here.
pub fn applied_ref(object: &Value) -> AppliedObject {
    AppliedObject {
        api_version: object["apiVersion"].as_str().unwrap_or_default().to_owned(),
        kind: object["kind"].as_str().unwrap_or_default().to_owned(),
        namespace: object["metadata"]["namespace"].as_str().filter(|n| !n.is_empty()).map(str::to_owned),
        name: object["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
    }
}

/// A client of objects of every kind the cluster serves (`kinds`, with the content's CRDs), acting as one identity.
pub struct ObjectClient<'a> {
    client: &'a ControllerClient,
    /// Who acts, as failures name it.
    user: &'a str,
    kinds: &'a KindIndex,
}

impl<'a> ObjectClient<'a> {
    pub fn new(client: &'a ControllerClient, user: &'a str, kinds: &'a KindIndex) -> Self {
        Self { client, user, kinds }
    }

    fn objects_for(&self, reference: &AppliedObject) -> Result<Objects<DynamicObject>, ApplyError> {
        let info = self.kinds.resolve(&reference.api_version, &reference.kind).ok_or_else(|| {
            ApplyError::UnknownKind { api_version: reference.api_version.clone(), kind: reference.kind.clone() }
        })?;
        let version = reference.api_version.rsplit('/').next().unwrap_or_default();
        let gvk = GroupVersionKind::gvk(&info.group, version, &reference.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &info.plural);
        let namespace = reference.namespace.as_deref().filter(|_| info.namespaced);
        Ok(self.client.dynamic(&resource, namespace))
    }

    /// The live object, if it exists.
    pub async fn get(&self, reference: &AppliedObject) -> Result<Option<Value>, ApplyError> {
        let found = self
            .objects_for(reference)?
            .get_opt(&reference.name)
            .await
            .map_err(|source| ApplyError::Read { object: describe_ref(reference), source })?;
        found
            .map(serde_json::to_value)
            .transpose()
            .map_err(|error| ApplyError::InvalidObject { object: describe_ref(reference), reason: error.to_string() })
    }

    /// Applies `object` with server-side apply, taking over fields others changed (repairing drift), and returns the
    /// live object the server answered.
    pub async fn apply(&self, object: &Value) -> Result<Value, ApplyError> {
        let reference = applied_ref(object);
        let applied = self
            .objects_for(&reference)?
            .apply(&reference.name, object, None)
            .await
            .map_err(|source| ApplyError::Apply { object: describe(object), user: self.user.to_owned(), source })?;
        serde_json::to_value(applied)
            .map_err(|error| ApplyError::InvalidObject { object: describe(object), reason: error.to_string() })
    }

    /// Removes OLM v0's owner labels from an object an Install took over (`takeover`): it is the Install's now, and the
    /// taken-over CSV's finalizer, which deletes what those labels select, must not delete it with that CSV.
    pub async fn disown(&self, object: &Value) -> Result<(), ApplyError> {
        let reference = applied_ref(object);
        let labels: serde_json::Map<String, Value> =
            takeover::OWNER_LABELS.iter().map(|label| ((*label).to_owned(), Value::Null)).collect();
        self.objects_for(&reference)?
            .merge_patch(&reference.name, &serde_json::json!({"metadata": {"labels": labels}}), None)
            .await
            .map_err(|source| ApplyError::Apply { object: describe(object), user: self.user.to_owned(), source })?;
        Ok(())
    }

    /// Deletes an object the content no longer has; one already gone is fine. Kinds no longer served are skipped:
    /// their objects went with their definition.
    pub async fn prune(&self, reference: &AppliedObject) -> Result<(), ApplyError> {
        let objects = match self.objects_for(reference) {
            Ok(objects) => objects,
            Err(ApplyError::UnknownKind { .. }) => return Ok(()),
            Err(error) => return Err(error),
        };
        objects.ensure_deleted(&reference.name).await.map_err(|source| ApplyError::Prune {
            object: describe_ref(reference),
            user: self.user.to_owned(),
            source,
        })
    }

    /// The objects of `objects` among `candidates` that do not exist (`follows`). RBAC objects are looked up in
    /// `existing_rbac`, the controller's watch of them, and one missing there is read live by `controller` (a watch may
    /// be moments behind a Role just made: it is never taken for absent on the watch's word); any other by a dry-run
    /// create as this client's identity (the account), which holds `create` but maybe not `get` on them. Refused for any other reason
    /// than the name being taken, an object is not counted as absent (its rules stay for a person), and the refusal is
    /// logged.
    pub async fn absent(
        &self,
        controller: &ObjectClient<'_>,
        objects: &[Value],
        candidates: &BTreeSet<ObjectKey>,
        existing_rbac: &BTreeSet<ObjectKey>,
    ) -> Result<BTreeSet<ObjectKey>, ApplyError> {
        let mut absent = BTreeSet::new();
        for object in objects {
            let Some(key) = follows::key_of(object, self.kinds).filter(|key| candidates.contains(key)) else {
                continue;
            };
            if key.group == RBAC_GROUP {
                if !existing_rbac.contains(&key) && controller.get(&applied_ref(object)).await?.is_none() {
                    absent.insert(key);
                }
                continue;
            }
            let reference = applied_ref(object);
            let typed: DynamicObject = serde_json::from_value(object.clone())
                .map_err(|error| ApplyError::InvalidObject { object: describe(object), reason: error.to_string() })?;
            match self.objects_for(&reference)?.could_create(&typed).await {
                Ok(true) => {
                    absent.insert(key);
                }
                Ok(false) => {}
                Err(error) => tracing::info!(object = %describe(object), %error, "a dry-run create was refused"),
            }
        }
        Ok(absent)
    }

    /// OLM's check of the custom resources stored today against the schemas a CRD update brings (`crd_schema`),
    /// listing them as this client's identity (the Install's account, which applies the CRD: the controller reads no
    /// custom resources of its own). An object failing refuses the update, unless the new CRD converts by webhook:
    /// then, as OLM, the update goes on and the answer is the warning to record.
    pub async fn check_existing_resources(&self, live: &Value, new: &Value) -> Result<Option<String>, ApplyError> {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        let (crd, group) = (text(&new["metadata"]["name"]), text(&new["spec"]["group"]));
        let (kind, plural) = (text(&new["spec"]["names"]["kind"]), text(&new["spec"]["names"]["plural"]));
        for check in crd_schema::versions_to_check(live, new) {
            let validator = VersionValidator::new(&check)
                .map_err(|source| ApplyError::NewSchemaInvalid { crd: crd.clone(), source })?;
            let resource =
                ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, &check.version, &kind), &plural);
            let objects =
                self.client.dynamic(&resource, None).list().await.map_err(|source| ApplyError::ListExisting {
                    crd: crd.clone(),
                    listing: format!("{plural}.{group}/{} as {}", check.version, self.user),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn service_accounts_have_kubernetes_usernames() {
        let account = ServiceAccountReference { name: "plumbus".into(), namespace: "olm".into() };
        assert_eq!(service_account_user(&account), "system:serviceaccount:olm:plumbus");
    }

    #[test]
    fn objects_are_described_with_their_namespace_when_they_have_one() {
        assert_eq!(describe(&json!({"kind": "Role", "metadata": {"name": "r", "namespace": "n"}})), "Role n/r");
        assert_eq!(describe(&json!({"kind": "ClusterRole", "metadata": {"name": "r"}})), "ClusterRole r");
        let reference =
            applied_ref(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": ""}}));
        assert_eq!(reference.namespace, None, "an empty namespace is none");
        assert_eq!(describe_ref(&reference), "Secret s");
    }
}
