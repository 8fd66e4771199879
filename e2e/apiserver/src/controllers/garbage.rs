//! The garbage collector: dependents of a deleted owner are deleted (background), owners deleted in the foreground
//! wait for the dependents that block them, orphaning removes the owner reference, and references to owners that do
//! not exist are removed or, when no owner is left, their dependent deleted. References it cannot resolve (an
//! unknown kind, a namespaced owner of a cluster-scoped object) are left alone.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::writes::{delete_as_read, has_finalizer, remove_finalizer, resource_type, update_quietly};
use crate::model::resources::ResourceType;
use crate::request::api_server::ApiServer;
use crate::request::deletion::Propagation;

/// An object the collector can see, with where it lives (its resource type shared by every object of the type: a
/// pass sees every object of the cluster).
struct Node {
    resource: std::sync::Arc<ResourceType>,
    object: Value,
}

pub(super) async fn garbage_collect(api: &ApiServer) {
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for id in api.store.resource_ids() {
        let Some(resource) = resource_type(api, &id).map(std::sync::Arc::new) else { continue };
        let read = api.store.map(&id, |_, _, object| {
            let uid = object["metadata"]["uid"].as_str()?.to_owned();
            Some((uid, as_node(object)))
        });
        for (uid, object) in read {
            nodes.insert(uid, Node { resource: resource.clone(), object });
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

/// What the collector keeps of an object: the whole of one it may write (a dependent, or one being deleted), and
/// of the others (owners, or neither) the metadata an owner is checked by.
fn as_node(object: &Value) -> Value {
    let metadata = &object["metadata"];
    if !metadata["ownerReferences"].is_null() || !metadata["deletionTimestamp"].is_null() {
        return object.clone();
    }
    let mut kept = serde_json::Map::new();
    for field in ["name", "namespace", "uid", "deletionTimestamp", "finalizers"] {
        if !metadata[field].is_null() {
            kept.insert(field.to_owned(), metadata[field].clone());
        }
    }
    serde_json::json!({"metadata": kept})
}

fn reference_to<'a>(object: &'a Value, owner_uid: &str) -> Option<&'a Value> {
    object["metadata"]["ownerReferences"].as_array()?.iter().find(|r| r["uid"] == owner_uid)
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
    let in_snapshot = nodes.get(uid).filter(|owner| {
        owner.resource.id() == owner_type.id()
            && owner.object["metadata"]["name"] == reference["name"]
            && (!owner_type.namespaced
                || owner.object["metadata"]["namespace"] == dependent.object["metadata"]["namespace"])
    });
    // The snapshot is read one resource after another: an owner created after its resource was read, and referred
    // to by a dependent read later, is not in it. Kubernetes' collector looks an owner up live before it takes it
    // for absent (`isDangling`), and so does this one.
    let owner = match in_snapshot {
        Some(owner) => owner.object.clone(),
        None => {
            let namespace = if owner_type.namespaced {
                dependent.object["metadata"]["namespace"].as_str().unwrap_or_default()
            } else {
                ""
            };
            let name = reference["name"].as_str().unwrap_or_default();
            match api.store.get(&owner_type.id(), namespace, name) {
                Ok(live) if live["metadata"]["uid"] == uid => live,
                _ => return Owner::Absent,
            }
        }
    };
    if !owner["metadata"]["deletionTimestamp"].is_null() && has_finalizer(&owner, "foregroundDeletion") {
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
    // Deleted only as it was read: a dependent given a new owner since is judged again on the next pass.
    let propagation = if waiting > 0 { Some(Propagation::Foreground) } else { None };
    delete_as_read(api, &node.resource, &node.object, propagation).await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    /// An owner created after the collector read its resource, named by a dependent read later: absent from the
    /// snapshot, present in the store. Taken for absent, the dependent would be deleted with its owner alive.
    #[test]
    fn an_owner_missing_from_the_snapshot_is_looked_up_before_it_is_taken_for_absent() {
        let api = ApiServer::new(100, Duration::from_secs(60));
        let configmaps = api.resources().by_kind("v1", "ConfigMap").cloned().expect("configmaps are served");
        let owner = api
            .store
            .create(&configmaps.id(), json!({"metadata": {"name": "owner", "namespace": "default"}}))
            .expect("owner stored");
        let reference =
            |uid: &Value, name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid});
        let dependent = |reference: Value| Node {
            resource: configmaps.clone().into(),
            object: json!({"metadata": {"name": "dependent", "namespace": "default", "ownerReferences": [reference]}}),
        };
        let snapshot = BTreeMap::new();
        let uid = &owner["metadata"]["uid"];
        let live = reference(uid, "owner");
        assert!(matches!(classify(&api, &dependent(live.clone()), &live, &snapshot), Owner::Solid));
        // Another uid under the name (made again), or no such name: absent.
        let stale = reference(&json!("00000000-0000-0000-0000-000000000000"), "owner");
        assert!(matches!(classify(&api, &dependent(stale.clone()), &stale, &snapshot), Owner::Absent));
        let nameless = reference(uid, "someone-else");
        assert!(matches!(classify(&api, &dependent(nameless.clone()), &nameless, &snapshot), Owner::Absent));
    }
}
