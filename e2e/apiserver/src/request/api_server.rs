//! The API server's request semantics, independent of HTTP: which resource a request is about, and what create,
//! update, patch, get and list do, step by step as kube-apiserver's generic registry does them (decode and prune,
//! strategies, status separation, generation, managed fields, admission, validation, storage). Server-side apply
//! lives in `apply`, deletion in `deletion`, custom resource definitions in `crds`.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use serde_json::{json, Value};

use crate::admission;
use crate::crds::lifecycle as crds;
use crate::crds::schema;
use crate::merge::fieldset::Scope;
use crate::merge::managed::{self, Writer};
use crate::merge::patch::{self, PatchError};
use crate::merge::shape::Shape;
use crate::model::resources::{ResourceType, Resources};
use crate::model::services::{self, Reservation};
use crate::model::validation::{validate_metadata, validate_metadata_update, NameRule};
use crate::model::{builtin, defaults};
use crate::status::ApiError;
use crate::status::FieldError;
use crate::storage::store::{now, Filter, Store};

/// What a request is about.
#[derive(Clone, Debug)]
pub struct Target {
    pub resource: ResourceType,
    /// The namespace of the URL; empty for cluster-scoped resources and for lists across all namespaces.
    pub namespace: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Target {
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    /// kube-apiserver's default when a request does not say (kubectl asks for Strict).
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(text: Option<&str>) -> Result<Self, ApiError> {
        match text {
            Some("Strict") => Ok(Self::Strict),
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// The options of a write request.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// `fieldManager`, or the manager derived from the User-Agent.
    pub field_manager: String,
    pub field_manager_given: bool,
    pub field_validation: FieldValidation,
    pub force: bool,
    /// Who writes: RBAC escalation checks and admission see this user.
    pub user: crate::auth::authn::UserInfo,
}

impl WriteOptions {
    /// The options of the control plane's own writes: its controllers act as a member of `system:masters`.
    pub fn internal(manager: &str) -> Self {
        Self {
            field_manager: manager.to_owned(),
            field_manager_given: true,
            user: crate::auth::authn::UserInfo::new(&format!("system:{manager}"), &[crate::auth::authn::MASTERS]),
            ..Self::default()
        }
    }
}

/// The outcome of a write: the HTTP code, the object and any warnings.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    pub code: u16,
    pub object: Value,
    pub warnings: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or_default().trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// The emulated API server.
pub struct ApiServer {
    pub store: Store,
    /// Where the cluster's services listen, for webhooks and aggregated APIs (there is no cluster network).
    pub endpoints: crate::outbound::Endpoints,
    /// The client identity requests to aggregated API servers are made with.
    pub front_proxy: Option<crate::outbound::ClientIdentity>,
    pub authenticator: crate::auth::authn::Authenticator,
    pub audit: crate::audit::AuditLog,
    /// Service addresses and node ports handed to writes not yet stored.
    pub service_allocations: crate::model::services::Allocations,
    resources: RwLock<Resources>,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
}

fn generated_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    let suffix: String =
        random.as_bytes().iter().take(5).map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect();
    format!("{prefix}{suffix}")
}

/// The object without `metadata` (and without `status` where a status subresource exists): what bumps generation.
fn spec_part(object: &Value, has_status: bool) -> Value {
    let mut part = object.clone();
    if let Some(map) = part.as_object_mut() {
        map.remove("metadata");
        if has_status {
            map.remove("status");
        }
    }
    part
}

impl ApiServer {
    pub fn new(history_limit: usize, bookmark_interval: Duration) -> Self {
        Self {
            store: Store::new(history_limit),
            endpoints: crate::outbound::Endpoints::default(),
            front_proxy: None,
            authenticator: crate::auth::authn::Authenticator::default(),
            audit: crate::audit::AuditLog::default(),
            service_allocations: crate::model::services::Allocations::default(),
            resources: RwLock::new(Resources::default()),
            bookmark_interval,
        }
    }

    pub fn resources(&self) -> RwLockReadGuard<'_, Resources> {
        self.resources.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn resources_mut(&self) -> RwLockWriteGuard<'_, Resources> {
        self.resources.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The object as a client reading `target`'s version sees it.
    pub fn present(&self, resource: &ResourceType, object: Value) -> Value {
        let mut object = Self::request_form(resource, object);
        object["apiVersion"] = json!(resource.group_version());
        object["kind"] = json!(resource.kind);
        if let Some(schema) = &resource.schema {
            schema::apply_defaults(&mut object, schema);
        }
        object
    }

    pub fn get(&self, target: &Target) -> Result<Value, ApiError> {
        let id = target.resource.id();
        let object = self.store.get(&id, &target.namespace, target.name()).map_err(|e| ApiError::from_store(e, &id))?;
        Ok(self.present(&target.resource, object))
    }

    pub fn list(
        &self,
        target: &Target,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<Value, ApiError> {
        let id = target.resource.id();
        let page = self.store.list(&id, filter, limit, continue_token).map_err(|e| ApiError::from_store(e, &id))?;
        let builtin = target.resource.schema.is_none();
        let items: Vec<Value> = page
            .items
            .into_iter()
            .map(|item| {
                let mut item = self.present(&target.resource, item);
                if builtin {
                    // Typed lists of built-in kinds leave the type of their items implicit.
                    if let Some(map) = item.as_object_mut() {
                        map.remove("apiVersion");
                        map.remove("kind");
                    }
                }
                item
            })
            .collect();
        let mut metadata = json!({"resourceVersion": page.revision.to_string()});
        if let Some(token) = page.continue_token {
            metadata["continue"] = json!(token);
        }
        if let Some(remaining) = page.remaining {
            metadata["remainingItemCount"] = json!(remaining);
        }
        Ok(
            json!({"apiVersion": target.resource.group_version(), "kind": target.resource.list_kind, "metadata": metadata, "items": items}),
        )
    }

    pub fn shape_of(resource: &ResourceType) -> Shape {
        match &resource.schema {
            Some(schema) => Shape::Schema(schema.clone()),
            None => Shape::builtin(&resource.kind),
        }
    }

    pub(crate) fn check_namespace(&self, target: &Target, name: &str) -> Result<(), ApiError> {
        if !target.resource.namespaced {
            return Ok(());
        }
        let namespaces = crate::storage::store::ResourceId::new("", "namespaces");
        match self.store.get(&namespaces, "", &target.namespace) {
            Err(_) => Err(ApiError::not_found(&namespaces, &target.namespace)),
            Ok(namespace) if !namespace["metadata"]["deletionTimestamp"].is_null() => {
                let why = format!(
                    "unable to create new content in namespace {} because it is being terminated",
                    target.namespace
                );
                Err(ApiError::forbidden(&target.resource.id(), name, &why).with_details(json!({
                    "name": name, "kind": target.resource.plural,
                    "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {} is terminating", target.namespace), "field": "metadata.namespace"}]})))
            }
            Ok(_) => Ok(()),
        }
    }

    /// Decodes what was sent: type meta, namespace and pruning of unknown fields (reported per `fieldValidation`).
    pub(crate) fn decode(
        &self,
        target: &Target,
        mut body: Value,
        options: &WriteOptions,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let resource = &target.resource;
        if !body.is_object() {
            return Err(ApiError::bad_request("the body of the request must be a JSON object"));
        }
        for (field, expected) in [("apiVersion", resource.group_version()), ("kind", resource.kind.clone())] {
            match body[field].as_str() {
                None | Some("") => body[field] = json!(expected),
                Some(sent) if sent != expected => {
                    let what = if field == "kind" { "kind" } else { "API version" };
                    return Err(ApiError::bad_request(format!(
                        "the {what} in the data ({sent}) does not match the expected {what} ({expected})"
                    )));
                }
                Some(_) => {}
            }
        }
        if !body["metadata"].is_object() {
            body["metadata"] = json!({});
        }
        if resource.namespaced {
            match body["metadata"]["namespace"].as_str() {
                None | Some("") => body["metadata"]["namespace"] = json!(target.namespace),
                Some(sent) if sent != target.namespace => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                Some(_) => {}
            }
        } else if let Some(metadata) = body["metadata"].as_object_mut() {
            metadata.remove("namespace");
        }
        let mut unknown = Vec::new();
        let decoded = match &resource.schema {
            Some(schema) => {
                unknown = schema::prune(&mut body, schema);
                body
            }
            None => match builtin::decode(&resource.group, &resource.kind, &body) {
                Some(Ok(decoded)) => {
                    builtin::unknown_fields(&body, &decoded, "", &mut unknown);
                    decoded
                }
                Some(Err(why)) => {
                    return Err(ApiError::bad_request(format!(
                        "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
                        kind = resource.kind,
                        version = resource.version
                    )));
                }
                None => body,
            },
        };
        let mut warnings = Vec::new();
        if !unknown.is_empty() {
            match options.field_validation {
                FieldValidation::Strict => {
                    let listed: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
                    return Err(ApiError::bad_request(format!(
                        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                        listed.join(", "),
                        kind = resource.kind,
                        version = resource.version
                    )));
                }
                FieldValidation::Warn => warnings.extend(unknown.iter().map(|f| format!("unknown field \"{f}\""))),
                FieldValidation::Ignore => {}
            }
        }
        Ok((decoded, warnings))
    }

    /// Everything between a decoded object and storage.
    pub(crate) fn prepare(
        &self,
        target: &Target,
        operation: Operation,
        old: Option<&Value>,
        mut object: Value,
        options: &WriteOptions,
        track: bool,
    ) -> Result<Value, ApiError> {
        let resource = &target.resource;
        let status_write = target.subresource.as_deref() == Some("status");
        if operation == Operation::Create && object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            // Named first, so that defaults derived from the name (a namespace's name label) see it.
            if let Some(prefix) = object["metadata"]["generateName"].as_str().filter(|p| !p.is_empty()) {
                object["metadata"]["name"] = json!(generated_name(prefix));
            }
        }
        // Defaults, as decoding applies them in kube-apiserver: before admission, validation and field tracking.
        match &resource.schema {
            Some(schema) => schema::apply_defaults(&mut object, schema),
            None => defaults::apply(&resource.group, &resource.kind, &mut object),
        }
        if resource.group.is_empty() && resource.kind == "Secret" {
            builtin::fold_string_data(&mut object);
        }
        match (operation, old) {
            (Operation::Create, _) => {
                builtin::prepare_for_create(&resource.group, &resource.kind, &mut object);
                if resource.has_status() && resource.schema.is_some() {
                    if let Some(map) = object.as_object_mut() {
                        map.remove("status");
                    }
                }
                let metadata = &mut object["metadata"];
                if let Some(map) = metadata.as_object_mut() {
                    for server_set in [
                        "uid",
                        "creationTimestamp",
                        "deletionTimestamp",
                        "deletionGracePeriodSeconds",
                        "generation",
                        "selfLink",
                    ] {
                        map.remove(server_set);
                    }
                }
                if resource.schema.is_some() || builtin::tracks_generation(&resource.group, &resource.plural) {
                    metadata["generation"] = json!(1);
                }
            }
            (Operation::Update, Some(old)) => {
                if status_write {
                    let status = object.get("status").cloned();
                    let managed_fields = object["metadata"].get("managedFields").cloned();
                    let resource_version = object["metadata"]["resourceVersion"].clone();
                    object = old.clone();
                    match status {
                        Some(status) => object["status"] = status,
                        None => {
                            if let Some(map) = object.as_object_mut() {
                                map.remove("status");
                            }
                        }
                    }
                    object["metadata"]["resourceVersion"] = resource_version;
                    match managed_fields {
                        Some(fields) => object["metadata"]["managedFields"] = fields,
                        None => {
                            if let Some(map) = object["metadata"].as_object_mut() {
                                map.remove("managedFields");
                            }
                        }
                    }
                } else if resource.has_status() {
                    match old.get("status") {
                        Some(status) => object["status"] = status.clone(),
                        None => {
                            if let Some(map) = object.as_object_mut() {
                                map.remove("status");
                            }
                        }
                    }
                }
                if resource.kind == "Namespace"
                    && resource.group.is_empty()
                    && target.subresource.as_deref() != Some("finalize")
                {
                    object["spec"] = old["spec"].clone();
                }
                for kept in
                    ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"]
                {
                    match old["metadata"].get(kept) {
                        Some(value) => object["metadata"][kept] = value.clone(),
                        None => {
                            if let Some(map) = object["metadata"].as_object_mut() {
                                map.remove(kept);
                            }
                        }
                    }
                }
                let tracked =
                    resource.schema.is_some() || builtin::tracks_generation(&resource.group, &resource.plural);
                if tracked && spec_part(&object, resource.has_status()) != spec_part(old, resource.has_status()) {
                    let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                    object["metadata"]["generation"] = json!(generation);
                }
            }
            (Operation::Update, None) => return Err(ApiError::internal("update without a stored object")),
        }
        if track {
            let parts = WriterParts::of(target);
            let writer = parts.writer(&options.field_manager);
            managed::track_update(old, &mut object, &writer);
        }
        Ok(object)
    }

    /// Admission of a prepared object, in kube-apiserver's order: mutating webhooks, the storage's own preparation
    /// (a Service's cluster IPs and node ports), validation (and RBAC escalation checks), validating webhooks. What
    /// the storage allocated stays reserved until the returned reservation is dropped, once the object is stored or
    /// refused.
    pub(crate) async fn admit(
        &self,
        target: &Target,
        old: Option<&Value>,
        object: Value,
        options: &WriteOptions,
    ) -> Result<(Value, Reservation<'_>), ApiError> {
        let operation = if old.is_some() { admission::Operation::Update } else { admission::Operation::Create };
        let request = admission::Request { operation, target, object: Some(&object), old, options };
        let mut object = admission::mutate(self, &request).await?.unwrap_or(object);
        let reservation = services::begin_write(self, target, old, &mut object)?;
        self.validate(target, old, &object)?;
        let resource = &target.resource;
        if resource.group == "rbac.authorization.k8s.io" {
            if let Some(why) =
                crate::auth::rbac::escalation_refusal(&self.store, &options.user, &resource.plural, &object)
            {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                return Err(ApiError::forbidden(&resource.id(), name, &why));
            }
        }
        admission::validate(self, &admission::Request { operation, target, object: Some(&object), old, options })
            .await?;
        Ok((object, reservation))
    }

    fn validate(&self, target: &Target, old: Option<&Value>, object: &Value) -> Result<(), ApiError> {
        let resource = &target.resource;
        let mut errors: Vec<FieldError> =
            validate_metadata(&object["metadata"], NameRule::of(&resource.group, &resource.plural));
        if let Some(old) = old {
            errors.extend(validate_metadata_update(&object["metadata"], &old["metadata"]));
        }
        match &resource.schema {
            Some(schema) => {
                let mut body = object.clone();
                if let Some(map) = body.as_object_mut() {
                    map.remove("metadata");
                    map.remove("apiVersion");
                    map.remove("kind");
                }
                let mut without_meta = schema.clone();
                if let Some(properties) = without_meta["properties"].as_object_mut() {
                    properties.remove("metadata");
                    properties.remove("apiVersion");
                    properties.remove("kind");
                }
                errors.extend(schema::validate(&body, &without_meta, ""));
                if let Some(name_schema) = schema["properties"]["metadata"]["properties"].get("name") {
                    errors.extend(schema::validate(&object["metadata"]["name"], name_schema, "metadata.name"));
                }
            }
            None => errors.extend(builtin::validate(&resource.group, &resource.kind, object, old)),
        }
        if resource.group == "apiextensions.k8s.io" && resource.kind == "CustomResourceDefinition" {
            errors.extend(crate::crds::structural::validate_crd(object));
            if let Some(old) = old {
                errors.extend(crds::validate_update(object, old));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            let name = object["metadata"]["name"].as_str().or(target.name.as_deref()).unwrap_or_default();
            Err(ApiError::invalid(&resource.kind, &resource.group, name, &errors))
        }
    }

    pub async fn create(&self, target: &Target, body: Value, options: &WriteOptions) -> Result<Written, ApiError> {
        if target.subresource.is_some() {
            return Err(ApiError::method_not_allowed(
                "POST",
                &format!("{}/{}", target.resource.plural, target.subresource.as_deref().unwrap_or_default()),
            ));
        }
        let (decoded, warnings) = self.decode(target, body, options)?;
        let name = decoded["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        if target.name.as_deref().is_some_and(|url_name| url_name != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                target.name()
            )));
        }
        self.check_namespace(target, &name)?;
        crds::check_crd_accepts_writes(self, &target.resource)?;
        let object = self.prepare(target, Operation::Create, None, decoded, options, true)?;
        let (object, _reservation) = self.admit(target, None, object, options).await?;
        let object = Self::storage_form(&target.resource, object);
        let object = if options.dry_run {
            object
        } else {
            let id = target.resource.id();
            let stored = self.store.create(&id, object).map_err(|e| ApiError::from_store(e, &id))?;
            crds::after_write(self, &target.resource, &stored)
        };
        Ok(Written { code: 201, object: self.present(&target.resource, object), warnings })
    }

    fn stored(&self, target: &Target) -> Result<Value, ApiError> {
        let id = target.resource.id();
        let object = self.store.get(&id, &target.namespace, target.name()).map_err(|e| ApiError::from_store(e, &id))?;
        Ok(Self::request_form(&target.resource, object))
    }

    /// A stored object in the form of the API it is requested through (both conversions leave an object already in
    /// the target form as it is).
    fn request_form(resource: &ResourceType, object: Value) -> Value {
        if resource.stored_converted() {
            crate::model::events::from_core(object)
        } else {
            object
        }
    }

    /// An object written through `resource` in the form it is stored in.
    pub(crate) fn storage_form(resource: &ResourceType, object: Value) -> Value {
        if resource.stored_converted() {
            crate::model::events::to_core(object)
        } else {
            object
        }
    }

    /// Writes an updated object (and deletes it once it is being deleted and has no finalizers left).
    pub(crate) fn commit_update(
        &self,
        target: &Target,
        object: Value,
        options: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let object = Self::storage_form(&target.resource, object);
        if options.dry_run {
            return Ok(object);
        }
        let id = target.resource.id();
        let stored = self.store.update(&id, object).map_err(|e| ApiError::from_store(e, &id))?;
        let stored = crds::after_write(self, &target.resource, &stored);
        crate::request::deletion::finish_if_released(self, &target.resource, &stored);
        Ok(stored)
    }

    pub async fn update(&self, target: &Target, body: Value, options: &WriteOptions) -> Result<Written, ApiError> {
        let name = body["metadata"]["name"].as_str().unwrap_or_default();
        if name != target.name() {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({name}) does not match the name on the URL ({})",
                target.name()
            )));
        }
        let old = self.stored(target)?;
        let (decoded, warnings) = self.decode(target, body, options)?;
        let object = self.prepare(target, Operation::Update, Some(&old), decoded, options, true)?;
        let (object, _reservation) = self.admit(target, Some(&old), object, options).await?;
        let stored = self.commit_update(target, object, options)?;
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
                crate::request::apply::apply(self, target, body, options).await
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
        let old = self.stored(target)?;
        let current = self.present(&target.resource, old.clone());
        let patched = match patch_type {
            PatchType::Json => patch::json_patch(&current, &patch),
            PatchType::Merge => patch::merge_patch(&current, &patch),
            PatchType::Strategic => {
                if target.resource.schema.is_some() {
                    return Err(ApiError::unsupported_media_type("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"));
                }
                patch::strategic_merge_patch(&current, &patch, &Self::shape_of(&target.resource))
            }
            PatchType::Apply => unreachable_apply(),
        }
        .map_err(|e| match e {
            PatchError::Malformed(why) => ApiError::bad_request(why),
            PatchError::Inapplicable(why) => ApiError::new(422, "Invalid", why),
        })?;
        let (decoded, warnings) = self.decode(target, patched, options)?;
        let mut decoded = decoded;
        if decoded["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"] {
            // A patch is unconditional unless it names a different resourceVersion itself.
            decoded["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        }
        let object = self.prepare(target, Operation::Update, Some(&old), decoded, options, true)?;
        let (object, _reservation) = self.admit(target, Some(&old), object, options).await?;
        let stored = self.commit_update(target, object, options)?;
        Ok(Written { code: 200, object: self.present(&target.resource, stored), warnings })
    }
}

/// What a managed-fields entry of a write to `target` records, apart from its manager.
pub(crate) struct WriterParts {
    shape: Shape,
    api_version: String,
    time: String,
    scope: Scope,
    subresource: &'static str,
}

impl WriterParts {
    /// Which fields a write to `target` may own, and the subresource its entry names.
    pub(crate) fn of(target: &Target) -> Self {
        let resource = &target.resource;
        let (scope, subresource) = match (target.subresource.as_deref() == Some("status"), resource.has_status()) {
            (true, _) => (Scope::Status, "status"),
            (false, true) => (Scope::MainResource, ""),
            (false, false) => (Scope::All, ""),
        };
        Self {
            shape: ApiServer::shape_of(resource),
            api_version: resource.group_version(),
            time: now(),
            scope,
            subresource,
        }
    }

    pub(crate) fn writer<'a>(&'a self, manager: &'a str) -> Writer<'a> {
        Writer {
            manager,
            api_version: &self.api_version,
            subresource: self.subresource,
            time: &self.time,
            shape: &self.shape,
            scope: self.scope,
        }
    }
}

fn unreachable_apply() -> Result<Value, PatchError> {
    Err(PatchError::Malformed("apply patches are handled apart".into()))
}
