//! kube's namespace controller (a terminating namespace's content deleted, then the namespace finalized) and what
//! kube-controller-manager puts in every active namespace: its `default` ServiceAccount, and the `kube-root-ca.crt`
//! ConfigMap its root CA publisher keeps.

use serde_json::{json, Value};

use super::writes::{controller_options, delete_quietly, resource_type, target_of, update_quietly};
use crate::model::resources::ResourceType;
use crate::request::api_server::ApiServer;
use crate::request::types::{Target, WriteOptions};
use crate::storage::store::ResourceId;

/// kube-controller-manager's root CA publisher: `kube-root-ca.crt` in every active namespace, created when missing
/// and put back when its data or description is changed.
async fn publish_root_ca(api: &ApiServer, namespace: &str, root_ca: &str) {
    const NAME: &str = "kube-root-ca.crt";
    const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";
    let config_maps = ResourceId::new("", "configmaps");
    let Some(config_map_type) = resource_type(api, &config_maps) else { return };
    let options = WriteOptions::internal("kube-controller-manager");
    let wanted_data = json!({"ca.crt": root_ca});
    // Read in place: every namespace's is looked at each pass, and it is rarely to be written.
    let as_wanted = |existing: &Value| {
        existing["data"] == wanted_data
            && existing["metadata"]["annotations"]["kubernetes.io/description"] == DESCRIPTION
            && existing["binaryData"].is_null()
    };
    if api.store.read(&config_maps, namespace, NAME, as_wanted) == Some(true) {
        return;
    }
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

pub(super) async fn namespaces(api: &ApiServer, root_ca: &str) {
    let namespace_ids = ResourceId::new("", "namespaces");
    let Some(namespace_type) = resource_type(api, &namespace_ids) else { return };
    let namespaces = api.store.all(&namespace_ids);
    // The content of every namespace, read only when one is terminating (a pass runs each second).
    let terminating = namespaces.iter().any(|n| !n["metadata"]["deletionTimestamp"].is_null());
    let namespaced: Vec<(ResourceType, Vec<Value>)> = if terminating {
        api.store
            .resource_ids()
            .into_iter()
            .filter_map(|id| resource_type(api, &id).filter(|r| r.namespaced).map(|r| (r, api.store.all(&id))))
            .collect()
    } else {
        Vec::new()
    };
    let service_accounts = ResourceId::new("", "serviceaccounts");
    for namespace in namespaces {
        let name = namespace["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        if namespace["metadata"]["deletionTimestamp"].is_null() {
            if api.store.read(&service_accounts, &name, "default", |_| ()).is_none() {
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
