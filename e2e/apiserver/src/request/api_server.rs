//! The API server: what it holds (storage, the resource types served, where the cluster's services listen, the
//! identities and authenticators, the audit log, the Service allocations of writes in flight, the OpenAPI v3
//! indexes of aggregated API servers), and reads: objects
//! as a client sees them (`present`), get and list. The writes are in `write` (create, update, patch), `apply`
//! and `deletion`, step by step in `decode`, `prepare`, `admit` and `commit`.

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::types::Target;
use crate::audit::AuditLog;
use crate::auth::authn::Authenticator;
use crate::crds::schema;
use crate::faults::Faults;
use crate::model::events;
use crate::model::resources::{ResourceType, Resources, Served};
use crate::model::services::Allocations;
use crate::outbound::{ClientIdentity, Endpoints};
use crate::status::ApiError;
use crate::storage::store::{Filter, Store};

/// The emulated API server.
pub struct ApiServer {
    pub store: Store,
    /// Where the cluster's services listen, for webhooks and aggregated APIs (there is no cluster network).
    pub endpoints: Endpoints,
    /// The client identity requests to aggregated API servers are made with.
    pub front_proxy: Option<ClientIdentity>,
    pub authenticator: Authenticator,
    pub audit: AuditLog,
    /// The fault-injection switch (off unless a test turns it on).
    pub faults: Faults,
    /// Service addresses and node ports handed to writes not yet stored.
    pub service_allocations: Allocations,
    /// The resource types served now.
    pub(crate) served: Served,
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// The OpenAPI v3 indexes aggregated API servers publish, as the aggregator last read them.
    pub aggregated_openapi: AggregatedOpenApi,
}

/// An aggregated API server's OpenAPI v3 index, as the aggregator read it for one APIService.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenApiIndex {
    /// The APIService's `spec` when it was read: an index read for another spec is read again.
    pub spec: Value,
    /// Each group-version path the server lists (`apis/<group>/<version>`) and its `serverRelativeURL`.
    pub paths: BTreeMap<String, String>,
    pub read_at: Instant,
}

/// The OpenAPI v3 indexes of aggregated API servers by APIService name: written by the aggregator's availability
/// pass, read by `/openapi/v3`.
#[derive(Default)]
pub struct AggregatedOpenApi(RwLock<BTreeMap<String, OpenApiIndex>>);

impl AggregatedOpenApi {
    pub fn get(&self, api_service: &str) -> Option<OpenApiIndex> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).get(api_service).cloned()
    }

    pub fn set(&self, api_service: &str, index: OpenApiIndex) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).insert(api_service.to_owned(), index);
    }

    pub fn remove(&self, api_service: &str) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).remove(api_service);
    }

    /// Forgets the indexes of APIServices not in `kept`.
    pub fn retain(&self, kept: &[String]) {
        self.0.write().unwrap_or_else(PoisonError::into_inner).retain(|name, _| kept.contains(name));
    }

    /// Every index, by APIService name.
    pub fn all(&self) -> BTreeMap<String, OpenApiIndex> {
        self.0.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl ApiServer {
    pub fn new(history_limit: usize, bookmark_interval: Duration) -> Self {
        Self {
            store: Store::new(history_limit),
            endpoints: Endpoints::default(),
            front_proxy: None,
            authenticator: Authenticator::default(),
            audit: AuditLog::default(),
            faults: Faults::default(),
            service_allocations: Allocations::default(),
            served: Served::default(),
            bookmark_interval,
            aggregated_openapi: AggregatedOpenApi::default(),
        }
    }

    /// The resource types served now.
    pub fn resources(&self) -> RwLockReadGuard<'_, Resources> {
        self.served.read()
    }

    /// The resource types served, to change them.
    pub(crate) fn resources_mut(&self) -> RwLockWriteGuard<'_, Resources> {
        self.served.write()
    }

    /// The object as a client reading `target`'s version sees it.
    pub fn present(&self, resource: &ResourceType, object: Value) -> Value {
        let mut object = request_form(resource, object);
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
}

/// The stored object `target` names, in the form of the API it is requested through.
pub(super) fn stored(api: &ApiServer, target: &Target) -> Result<Value, ApiError> {
    let id = target.resource.id();
    let object = api.store.get(&id, &target.namespace, target.name()).map_err(|e| ApiError::from_store(e, &id))?;
    Ok(request_form(&target.resource, object))
}

/// A stored object in the form of the API it is requested through (both conversions leave an object already in
/// the target form as it is).
fn request_form(resource: &ResourceType, object: Value) -> Value {
    if resource.stored_converted() {
        events::from_core(object)
    } else {
        object
    }
}

/// An object written through `resource` in the form it is stored in.
pub(super) fn storage_form(resource: &ResourceType, object: Value) -> Value {
    if resource.stored_converted() {
        events::to_core(object)
    } else {
        object
    }
}
