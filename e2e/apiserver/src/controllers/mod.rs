//! The controllers a cluster runs beside kube-apiserver that the project depends on: the namespace controller
//! (deletes a terminating namespace's content, then finalizes it), what kube-controller-manager puts in every
//! namespace (the `default` ServiceAccount, and the `kube-root-ca.crt` ConfigMap its root CA publisher keeps), the CRD finalizer (deletes the custom resources of a deleted definition) and the garbage
//! collector (ownerReferences, with background, foreground and orphan propagation).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::crds::lifecycle::{crd_resource, CLEANUP_FINALIZER};
use crate::model::resources::ResourceType;
use crate::request::api_server::ApiServer;
use crate::request::deletion::{self, DeleteOptions, Propagation};
use crate::request::types::{Target, WriteOptions};
use crate::storage::store::ResourceId;

/// Runs the controllers until the server is dropped: a pass after each burst of changes, and every second.
pub async fn run(api: Arc<ApiServer>, root_ca: String) {
    let mut changes = api.store.subscribe();
    loop {
        reconcile(&api, &root_ca).await;
        let wait = tokio::time::timeout(Duration::from_secs(1), changes.recv()).await;
        if let Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) = wait {
            return;
        }
        // Coalesce a burst of writes into one pass.
        tokio::time::sleep(Duration::from_millis(5)).await;
        while changes.try_recv().is_ok() {}
    }
}

/// One pass of every controller. `root_ca` is the cluster's CA certificate, published in every namespace.
pub async fn reconcile(api: &ApiServer, root_ca: &str) {
    crate::auth::policy::aggregate(&api.store);
    crate::aggregator::check_api_services(api).await;
    namespaces(api, root_ca).await;
    crd_cleanup(api).await;
    garbage_collect(api).await;
}

fn resource_type(api: &ApiServer, id: &ResourceId) -> Option<ResourceType> {
    api.resources().versions_of(&id.group, &id.resource).first().map(|r| (*r).clone())
}

fn target_of(resource: &ResourceType, object: &Value) -> Target {
    Target {
        resource: resource.clone(),
        namespace: object["metadata"]["namespace"].as_str().unwrap_or_default().to_owned(),
        name: object["metadata"]["name"].as_str().map(str::to_owned),
        subresource: None,
    }
}

fn controller_options() -> WriteOptions {
    WriteOptions::internal("olmv2-control-plane")
}

async fn delete_quietly(api: &ApiServer, resource: &ResourceType, object: &Value, propagation: Option<Propagation>) {
    if !object["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let options = DeleteOptions { propagation, ..DeleteOptions::default() };
    if let Err(error) = deletion::delete(api, &target_of(resource, object), &options, &controller_options()).await {
        if error.code != 404 {
            tracing::debug!(%error, "controller delete failed; retried on the next pass");
        }
    }
}

/// Writes `object` with a changed finalizer list, metadata or spec.
async fn update_quietly(api: &ApiServer, resource: &ResourceType, object: Value, subresource: Option<&str>) {
    let mut target = target_of(resource, &object);
    target.subresource = subresource.map(str::to_owned);
    if let Err(error) = api.update(&target, object, &controller_options()).await {
        tracing::debug!(%error, "controller update failed; retried on the next pass");
    }
}

/// kube-controller-manager's root CA publisher: `kube-root-ca.crt` in every active namespace, created when missing
/// and put back when its data or description is changed.
async fn publish_root_ca(api: &ApiServer, namespace: &str, root_ca: &str) {
    const NAME: &str = "kube-root-ca.crt";
    const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
    let config_maps = ResourceId::new("", "configmaps");
    let Some(config_map_type) = resource_type(api, &config_maps) else { return };
    let options = WriteOptions::internal("kube-controller-manager");
    let wanted_data = json!({"ca.crt": root_ca});
    match api.store.get(&config_maps, namespace, NAME) {
        Err(_) => {
            let target =
                Target { resource: config_map_type, namespace: namespace.to_owned(), name: None, subresource: None };
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": namespace, "annotations": {"kubernetes.io/description": DESCRIPTION}},
                "data": wanted_data});
            let _ = api.create(&target, object, &options).await;
        }
        Ok(existing) => {
            let described = existing["metadata"]["annotations"]["kubernetes.io/description"] == DESCRIPTION;
            if existing["data"] == wanted_data && described && existing["binaryData"].is_null() {
                return;
            }
            let mut repaired = existing.clone();
            repaired["data"] = wanted_data;
            if let Some(map) = repaired.as_object_mut() {
                map.remove("binaryData");
            }
            repaired["metadata"]["annotations"]["kubernetes.io/description"] = json!(DESCRIPTION);
            if let Err(error) = api.update(&target_of(&config_map_type, &repaired), repaired, &options).await {
                tracing::debug!(%error, "kube-root-ca.crt not repaired; retried on the next pass");
            }
        }
    }
}

async fn namespaces(api: &ApiServer, root_ca: &str) {
    let namespace_ids = ResourceId::new("", "namespaces");
    let Some(namespace_type) = resource_type(api, &namespace_ids) else { return };
    let namespaced: Vec<(ResourceType, Vec<Value>)> = api
        .store
        .resource_ids()
        .into_iter()
        .filter_map(|id| resource_type(api, &id).filter(|r| r.namespaced).map(|r| (r, api.store.all(&id))))
        .collect();
    let service_accounts = ResourceId::new("", "serviceaccounts");
    for namespace in api.store.all(&namespace_ids) {
        let name = namespace["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        if namespace["metadata"]["deletionTimestamp"].is_null() {
            if api.store.get(&service_accounts, &name, "default").is_err() {
                if let Some(sa_type) = resource_type(api, &service_accounts) {
                    let target = Target { resource: sa_type, namespace: name.clone(), name: None, subresource: None };
                    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}});
                    let _ = api.create(&target, account, &controller_options()).await;
                }
            }
            publish_root_ca(api, &name, root_ca).await;
            continue;
        }
        let mut remaining = 0;
        for (resource, objects) in &namespaced {
            for object in objects.iter().filter(|o| o["metadata"]["namespace"] == name.as_str()) {
                remaining += 1;
                delete_quietly(api, resource, object, None).await;
            }
        }
        let finalizers = namespace["spec"]["finalizers"].as_array().cloned().unwrap_or_default();
        if remaining == 0 && finalizers.iter().any(|f| f == "kubernetes") {
            let mut finalized = namespace.clone();
            finalized["spec"]["finalizers"] =
                Value::Array(finalizers.into_iter().filter(|f| f != "kubernetes").collect());
            update_quietly(api, &namespace_type, finalized, Some("finalize")).await;
        }
    }
}

async fn crd_cleanup(api: &ApiServer) {
    let Some(crd_type) = resource_type(api, &crd_resource()) else { return };
    for crd in api.store.all(&crd_resource()) {
        if crd["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        let id = ResourceId::new(group, plural);
        let objects = api.store.all(&id);
        if let Some(resource) = resource_type(api, &id) {
            for object in &objects {
                delete_quietly(api, &resource, object, None).await;
            }
        }
        if objects.is_empty() && has_finalizer(&crd, CLEANUP_FINALIZER) {
            remove_finalizer(api, &crd_type, &crd, CLEANUP_FINALIZER).await;
        }
    }
}

/// An object the collector can see, with where it lives.
struct Node {
    resource: ResourceType,
    object: Value,
}

fn has_finalizer(object: &Value, name: &str) -> bool {
    object["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|x| x == name))
}

async fn garbage_collect(api: &ApiServer) {
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for id in api.store.resource_ids() {
        let Some(resource) = resource_type(api, &id) else { continue };
        for object in api.store.all(&id) {
            if let Some(uid) = object["metadata"]["uid"].as_str() {
                nodes.insert(uid.to_owned(), Node { resource: resource.clone(), object: object.clone() });
            }
        }
    }
    // Dependents by owner uid.
    let mut dependents: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (uid, node) in &nodes {
        for reference in node.object["metadata"]["ownerReferences"].as_array().into_iter().flatten() {
            if let Some(owner) = reference["uid"].as_str() {
                dependents.entry(owner.to_owned()).or_default().push(uid.clone());
            }
        }
    }
    for (uid, node) in &nodes {
        let being_deleted = !node.object["metadata"]["deletionTimestamp"].is_null();
        if being_deleted && has_finalizer(&node.object, "orphan") {
            orphan_dependents(api, uid, &nodes, dependents.get(uid)).await;
        }
        if being_deleted && has_finalizer(&node.object, "foregroundDeletion") {
            let blocking: Vec<&Node> = dependents
                .get(uid)
                .into_iter()
                .flatten()
                .filter_map(|d| nodes.get(d))
                .filter(|d| reference_to(&d.object, uid).is_some_and(|r| r["blockOwnerDeletion"] == true))
                .collect();
            if blocking.is_empty() {
                remove_finalizer(api, &node.resource, &node.object, "foregroundDeletion").await;
            }
        }
        collect_if_orphaned(api, node, &nodes).await;
    }
}

fn reference_to<'a>(object: &'a Value, owner_uid: &str) -> Option<&'a Value> {
    object["metadata"]["ownerReferences"].as_array()?.iter().find(|r| r["uid"] == owner_uid)
}

async fn remove_finalizer(api: &ApiServer, resource: &ResourceType, object: &Value, finalizer: &str) {
    let mut object = object.clone();
    let kept: Vec<Value> = object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    object["metadata"]["finalizers"] = Value::Array(kept);
    update_quietly(api, resource, object, None).await;
}

async fn orphan_dependents(
    api: &ApiServer,
    owner_uid: &str,
    nodes: &BTreeMap<String, Node>,
    dependents: Option<&Vec<String>>,
) {
    for dependent in dependents.into_iter().flatten().filter_map(|d| nodes.get(d)) {
        let mut object = dependent.object.clone();
        let kept: Vec<Value> = object["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["uid"] != owner_uid)
            .cloned()
            .collect();
        match object["metadata"].as_object_mut() {
            // Kubernetes writes no empty list (`omitempty`): the last reference gone, the field is gone.
            Some(metadata) if kept.is_empty() => {
                metadata.remove("ownerReferences");
            }
            _ => object["metadata"]["ownerReferences"] = Value::Array(kept),
        }
        update_quietly(api, &dependent.resource, object, None).await;
    }
    if let Some(owner) = nodes.get(owner_uid) {
        remove_finalizer(api, &owner.resource, &owner.object, "orphan").await;
    }
}

/// Whether an owner reference resolves to a live object: same uid, found where the dependent can name it.
enum Owner {
    Solid,
    WaitingForDependents,
    Absent,
    /// A reference the collector cannot resolve (unknown kind, namespaced owner of a cluster-scoped object).
    Unresolvable,
}

fn classify(api: &ApiServer, dependent: &Node, reference: &Value, nodes: &BTreeMap<String, Node>) -> Owner {
    let api_version = reference["apiVersion"].as_str().unwrap_or_default();
    let kind = reference["kind"].as_str().unwrap_or_default();
    let Some(owner_type) = api.resources().by_kind(api_version, kind).cloned() else { return Owner::Unresolvable };
    if owner_type.namespaced && !dependent.resource.namespaced {
        return Owner::Unresolvable;
    }
    let uid = reference["uid"].as_str().unwrap_or_default();
    let Some(owner) = nodes.get(uid) else { return Owner::Absent };
    let same_place = owner.resource.id() == owner_type.id()
        && owner.object["metadata"]["name"] == reference["name"]
        && (!owner_type.namespaced
            || owner.object["metadata"]["namespace"] == dependent.object["metadata"]["namespace"]);
    if !same_place {
        return Owner::Absent;
    }
    if !owner.object["metadata"]["deletionTimestamp"].is_null() && has_finalizer(&owner.object, "foregroundDeletion") {
        Owner::WaitingForDependents
    } else {
        Owner::Solid
    }
}

async fn collect_if_orphaned(api: &ApiServer, node: &Node, nodes: &BTreeMap<String, Node>) {
    let references: Vec<Value> = node.object["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
    if references.is_empty() || !node.object["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let mut solid = 0;
    let mut dangling = BTreeSet::new();
    let mut waiting = 0;
    for reference in &references {
        match classify(api, node, reference, nodes) {
            Owner::Solid | Owner::Unresolvable => solid += 1,
            Owner::WaitingForDependents => waiting += 1,
            Owner::Absent => {
                dangling.insert(reference["uid"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    if solid > 0 {
        if !dangling.is_empty() {
            let mut object = node.object.clone();
            let kept: Vec<Value> =
                references.into_iter().filter(|r| !dangling.contains(r["uid"].as_str().unwrap_or_default())).collect();
            object["metadata"]["ownerReferences"] = Value::Array(kept);
            update_quietly(api, &node.resource, object, None).await;
        }
        return;
    }
    let propagation = if waiting > 0 { Some(Propagation::Foreground) } else { None };
    delete_quietly(api, &node.resource, &node.object, propagation).await;
}
