//! The reads and writes every controller makes, each under the controller's field manager: an object if it exists,
//! lists, creates, server-side apply of objects and of their status, merge patches, and deleting an object that may
//! be gone already. Writes can be made only while the object is still at the resourceVersion a decision was made on
//! (the precondition), so that a decision never lands on an object that changed meanwhile; a failed precondition is
//! its own error ([`ClientError::Changed`]), which the runner retries at once. Typed kinds and kinds known only at
//! run time (`DynamicObject`) go through the same [`Objects`].

use std::fmt::Debug;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceScope;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use crate::category::Categorized;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A write made only while the object was at the resourceVersion it was read at found it changed.
    #[error("the object changed since it was read")]
    Changed(#[source] kube::Error),
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("failed to encode the object")]
    Encode(#[source] serde_json::Error),
}

impl ClientError {
    /// The HTTP status the API server answered, if it answered one.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Changed(kube::Error::Api(status)) | Self::Api(kube::Error::Api(status)) => Some(status.code),
            _ => None,
        }
    }

    /// Whether the API server refused the request to the identity that made it.
    pub fn is_forbidden(&self) -> bool {
        self.code() == Some(403)
    }
}

impl Categorized for ClientError {
    fn category(&self) -> &'static str {
        match self {
            Self::Changed(_) => "ObjectChanged",
            Self::Api(_) if self.is_forbidden() => "Forbidden",
            Self::Api(_) => "ApiRequestFailed",
            Self::Encode(_) => "ObjectEncodeFailed",
        }
    }

    fn is_conflict(&self) -> bool {
        matches!(self, Self::Changed(_))
    }
}

/// A controller's client: one identity (the controller's own, or an account it impersonates) and one field manager
/// for everything it writes.
#[derive(Clone)]
pub struct ControllerClient {
    client: kube::Client,
    field_manager: &'static str,
}

impl ControllerClient {
    pub fn new(client: kube::Client, field_manager: &'static str) -> Self {
        Self { client, field_manager }
    }

    /// The underlying client, for what is not reading or writing objects (discovery, access reviews).
    pub fn kube(&self) -> &kube::Client {
        &self.client
    }

    /// Objects of a cluster-scoped kind; of a namespaced kind, in every namespace (to list only).
    pub fn all<K>(&self) -> Objects<K>
    where
        K: Resource<DynamicType = ()>,
    {
        self.objects(Api::all(self.client.clone()), ())
    }

    /// Objects of a namespaced kind in `namespace`.
    pub fn namespaced<K>(&self, namespace: &str) -> Objects<K>
    where
        K: Resource<DynamicType = ()>,
        K::Scope: NamespaceScope,
    {
        self.objects(Api::all(self.client.clone()).constrain(namespace), ())
    }

    /// Objects of a kind known at run time, in `namespace` when it is namespaced.
    pub fn dynamic(&self, resource: &ApiResource, namespace: Option<&str>) -> Objects<DynamicObject> {
        let api = match namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, resource),
            None => Api::all_with(self.client.clone(), resource),
        };
        self.objects(api, resource.clone())
    }

    fn objects<K: Resource>(&self, api: Api<K>, dyntype: K::DynamicType) -> Objects<K> {
        Objects { api, dyntype, field_manager: self.field_manager }
    }
}

/// The objects of one kind in one scope, read and written as their [`ControllerClient`] does.
pub struct Objects<K: Resource> {
    api: Api<K>,
    dyntype: K::DynamicType,
    field_manager: &'static str,
}

impl<K> Objects<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    /// The object named `name`, or None when there is none.
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, ClientError> {
        Ok(self.api.get_opt(name).await?)
    }

    /// The object named `name`; one that does not exist is the API server's 404.
    pub async fn get(&self, name: &str) -> Result<K, ClientError> {
        Ok(self.api.get(name).await?)
    }

    pub async fn list(&self) -> Result<Vec<K>, ClientError> {
        Ok(self.api.list(&ListParams::default()).await?.items)
    }

    /// The objects `params` select (labels, fields).
    pub async fn list_with(&self, params: &ListParams) -> Result<Vec<K>, ClientError> {
        Ok(self.api.list(params).await?.items)
    }

    /// Replaces the object `name` with `object` (whose resourceVersion is the precondition): every field becomes
    /// what the controller says, where an apply would leave others' fields in place (a tampered copy is put back).
    pub async fn replace(&self, name: &str, object: &K) -> Result<K, ClientError> {
        let params = PostParams { field_manager: Some(self.field_manager.into()), ..PostParams::default() };
        changed_if(Some(""), self.api.replace(name, &params, object).await)
    }

    /// Replaces the status of the object `name` with that of `object` (whose resourceVersion is the precondition).
    pub async fn replace_status(&self, name: &str, object: &K) -> Result<K, ClientError> {
        let params = PostParams { field_manager: Some(self.field_manager.into()), ..PostParams::default() };
        changed_if(Some(""), self.api.replace_status(name, &params, object).await)
    }

    /// Creates `object`; one that exists already is the API server's 409 (see [`ClientError::code`]). For objects
    /// that must not be taken over: a server-side apply would adopt an existing one.
    pub async fn create(&self, object: &K) -> Result<K, ClientError> {
        let params = PostParams { field_manager: Some(self.field_manager.into()), ..PostParams::default() };
        Ok(self.api.create(&params, object).await?)
    }

    /// Whether `object` could be created now: a dry-run create (nothing is written) that the API server accepts.
    /// One of the name that exists is `false`; any other refusal is the error.
    pub async fn could_create(&self, object: &K) -> Result<bool, ClientError> {
        let params = PostParams { dry_run: true, field_manager: Some(self.field_manager.into()) };
        match self.api.create(&params, object).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// Server-side applies `object` (named `name`), forced: the controller owns the fields it applies, and takes
    /// back those others changed. With a `precondition`, only while the object is at that resourceVersion.
    pub async fn apply(&self, name: &str, object: &Value, precondition: Option<&str>) -> Result<K, ClientError> {
        let body = with_precondition(object.clone(), precondition);
        let params = PatchParams::apply(self.field_manager).force();
        changed_if(precondition, self.api.patch(name, &params, &Patch::Apply(&body)).await)
    }

    /// Server-side applies the whole `status` of the object `name`, forced (status is the controller's alone). With
    /// a `precondition`, only while the object is at that resourceVersion.
    pub async fn apply_status(
        &self,
        name: &str,
        status: &impl Serialize,
        precondition: Option<&str>,
    ) -> Result<K, ClientError> {
        let status = serde_json::to_value(status).map_err(ClientError::Encode)?;
        let body =
            json!({"apiVersion": K::api_version(&self.dyntype), "kind": K::kind(&self.dyntype), "status": status});
        let body = with_precondition(body, precondition);
        let params = PatchParams::apply(self.field_manager).force();
        changed_if(precondition, self.api.patch_status(name, &params, &Patch::Apply(&body)).await)
    }

    /// Merge-patches the object `name`: for a field the controller changes without owning it (an approval it
    /// revokes, a mark it removes, a label it adds). With a `precondition`, only while the object is at that
    /// resourceVersion.
    pub async fn merge_patch(&self, name: &str, patch: &Value, precondition: Option<&str>) -> Result<K, ClientError> {
        let body = with_precondition(patch.clone(), precondition);
        let params = PatchParams { field_manager: Some(self.field_manager.into()), ..PatchParams::default() };
        changed_if(precondition, self.api.patch(name, &params, &Patch::Merge(&body)).await)
    }

    /// Deletes every object `params` select (labels), their dependents left to the garbage collector.
    pub async fn delete_collection(&self, params: &ListParams) -> Result<(), ClientError> {
        self.api.delete_collection(&DeleteParams::background(), params).await?;
        Ok(())
    }

    /// Deletes the object `name` only if it is still the one of `uid` (not one made again under the name), its
    /// dependents left to the garbage collector or, with `orphan`, kept (the collector removes their references to
    /// it); one already gone is fine.
    pub async fn delete_if_uid(&self, name: &str, uid: &str, orphan: bool) -> Result<(), ClientError> {
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions { uid: Some(uid.to_owned()), resource_version: None }),
            ..if orphan { DeleteParams::orphan() } else { DeleteParams::background() }
        };
        match self.api.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Deletes the object `name`, its dependents left to the garbage collector; one already gone is fine.
    pub async fn ensure_deleted(&self, name: &str) -> Result<(), ClientError> {
        match self.api.delete(name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

/// `body` written only while its object is at `precondition`: the API server compares a resourceVersion sent with a
/// write and answers 409 Conflict when the object moved on.
fn with_precondition(mut body: Value, precondition: Option<&str>) -> Value {
    if let (Some(version), Some(fields)) = (precondition, body.as_object_mut()) {
        let metadata = fields.entry("metadata").or_insert_with(|| json!({}));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".into(), Value::String(version.to_owned()));
        }
    }
    body
}

/// A 409 of a write with a precondition is the object having changed; any other answer is the write's own.
fn changed_if<K>(precondition: Option<&str>, result: Result<K, kube::Error>) -> Result<K, ClientError> {
    match result {
        Err(kube::Error::Api(status)) if precondition.is_some() && status.code == 409 => {
            Err(ClientError::Changed(kube::Error::Api(status)))
        }
        result => Ok(result?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_precondition_is_the_resource_version_the_write_carries() {
        let body = with_precondition(json!({"status": {"state": "Installed"}}), Some("42"));
        assert_eq!(body, json!({"metadata": {"resourceVersion": "42"}, "status": {"state": "Installed"}}));
        let body = with_precondition(json!({"metadata": {"annotations": {"a": null}}}), Some("7"));
        assert_eq!(body, json!({"metadata": {"annotations": {"a": null}, "resourceVersion": "7"}}));
        assert_eq!(with_precondition(json!({"spec": {}}), None), json!({"spec": {}}));
    }

    #[test]
    fn only_a_conflict_of_a_write_with_a_precondition_is_a_change() {
        let conflict = || {
            Err::<(), _>(kube::Error::Api(
                kube::core::Status::failure("the object has been modified", "Conflict").with_code(409).boxed(),
            ))
        };
        let changed = changed_if(Some("1"), conflict()).expect_err("conflict");
        assert!(changed.is_conflict());
        assert_eq!(changed.category(), "ObjectChanged");
        let plain = changed_if(None, conflict()).expect_err("conflict");
        assert!(!plain.is_conflict());
        assert_eq!(plain.code(), Some(409));
    }
}
