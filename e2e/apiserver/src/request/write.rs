//! The writes of the API server: create, update and patch (server-side apply is `apply`'s), each decoded,
//! prepared, admitted and committed by the steps of the same names.

use serde_json::Value;

use super::admit::{admit, check_namespace};
use super::api_server::{stored, ApiServer};
use super::apply::apply;
use super::commit::{commit_create, commit_generated, commit_update};
use super::decode::decode;
use super::prepare::{prepare, shape_of};
use super::types::{Operation, PatchType, Target, WriteOptions, Written};
use crate::crds::lifecycle;
use crate::merge::patch::{self, PatchError};
use crate::status::ApiError;

impl ApiServer {
    pub async fn create(&self, target: &Target, body: Value, options: &WriteOptions) -> Result<Written, ApiError> {
        if target.subresource.is_some() {
            return Err(ApiError::method_not_allowed(
                "POST",
                &format!("{}/{}", target.resource.plural, target.subresource.as_deref().unwrap_or_default()),
            ));
        }
        let (decoded, warnings) = decode(target, body, options)?;
        let name = decoded["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        if target.name.as_deref().is_some_and(|url_name| url_name != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                target.name()
            )));
        }
        check_namespace(self, target, &name)?;
        lifecycle::check_crd_accepts_writes(&self.store, &target.resource)?;
        let object = prepare(target, Operation::Create, None, decoded, options, true)?;
        let (object, _reservation) = admit(self, target, None, object, options).await?;
        let object = if name.is_empty() {
            commit_generated(self, target, object, options)?
        } else {
            commit_create(self, target, object, options)?
        };
        Ok(Written { code: 201, object: self.present(&target.resource, object), warnings })
    }

    pub async fn update(&self, target: &Target, body: Value, options: &WriteOptions) -> Result<Written, ApiError> {
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        if name != target.name() {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                target.name()
            )));
        }
        let old = stored(self, target)?;
        let (decoded, warnings) = decode(target, body, options)?;
        let object = prepare(target, Operation::Update, Some(&old), decoded, options, true)?;
        let (object, _reservation) = admit(self, target, Some(&old), object, options).await?;
        let stored = commit_update(self, target, object, options)?;
        Ok(Written { code: 200, object: self.present(&target.resource, stored), warnings })
    }

    /// Patches as kube-apiserver's `GuaranteedUpdate` does: a patch that loses a race with another write (the
    /// webhooks it waits for leave room for one) is applied again to the new object, admission included; one that
    /// names a resourceVersion keeps failing while that version is not current.
    pub async fn patch(
        &self,
        target: &Target,
        patch_type: PatchType,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        const ATTEMPTS: usize = 8;
        let mut attempt = 1;
        loop {
            let result = if patch_type == PatchType::Apply {
                apply(self, target, body, options).await
            } else {
                self.patch_once(target, patch_type, body, options).await
            };
            match result {
                Err(error) if error.is_stale_write() && attempt < ATTEMPTS => attempt += 1,
                other => return other,
            }
        }
    }

    async fn patch_once(
        &self,
        target: &Target,
        patch_type: PatchType,
        body: &[u8],
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let patch: Value =
            serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        let old = stored(self, target)?;
        let current = self.present(&target.resource, old.clone());
        let patched = match patch_type {
            PatchType::Json => patch::json_patch(&current, &patch),
            PatchType::Merge => patch::merge_patch(&current, &patch),
            PatchType::Strategic => {
                if target.resource.schema.is_some() {
                    return Err(ApiError::unsupported_media_type("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"));
                }
                patch::strategic_merge_patch(&current, &patch, &shape_of(&target.resource))
            }
            PatchType::Apply => unreachable_apply(),
        }
        .map_err(|e| match e {
            PatchError::Malformed(why) => ApiError::bad_request(why),
            PatchError::Inapplicable(why) => ApiError::new(422, "Invalid", why),
        })?;
        let (decoded, warnings) = decode(target, patched, options)?;
        let mut decoded = decoded;
        if decoded["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"] {
            // A patch is unconditional unless it names a different resourceVersion itself.
            decoded["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        }
        let object = prepare(target, Operation::Update, Some(&old), decoded, options, true)?;
        let (object, _reservation) = admit(self, target, Some(&old), object, options).await?;
        let stored = commit_update(self, target, object, options)?;
        Ok(Written { code: 200, object: self.present(&target.resource, stored), warnings })
    }
}

fn unreachable_apply() -> Result<Value, PatchError> {
    Err(PatchError::Malformed("apply patches are handled apart".into()))
}
