//! A kube-runtime Controller runs against the control plane as against a cluster: it watches ConfigMaps, writes a
//! Secret owned by each with server-side apply, marks the ConfigMap with a merge patch, and the owned Secret goes with
//! its owner through garbage collection.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::sync::Arc;
use std::time::Duration;

use crate::support;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::Resource;

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

async fn reconcile(config: Arc<ConfigMap>, client: Arc<kube::Client>) -> Result<Action, ReconcileError> {
    let namespace = config.metadata.namespace.clone().unwrap_or_default();
    let name = config.metadata.name.clone().unwrap_or_default();
    let owner = config.controller_owner_ref(&()).expect("a stored object has a uid");
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{name}-copy"), "ownerReferences": [owner]},
        "stringData": config.data.clone().unwrap_or_default()});
    let secrets: Api<Secret> = Api::namespaced((*client).clone(), &namespace);
    secrets.patch(&format!("{name}-copy"), &PatchParams::apply("copier"), &Patch::Apply(&secret)).await?;
    let configs: Api<ConfigMap> = Api::namespaced((*client).clone(), &namespace);
    // A merge patch, not an apply: applying to an owner deleted meanwhile would create it again.
    let mark = serde_json::json!({"metadata": {"annotations": {"example.com/copied": "true"}}});
    configs.patch(&name, &PatchParams::default(), &Patch::Merge(&mark)).await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

fn on_error(_: Arc<ConfigMap>, _: &ReconcileError, _: Arc<kube::Client>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn a_controller_reconciles_owned_objects() {
    let (_plane, client) = support::start().await;
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let controller = Controller::new(configs.clone(), watcher::Config::default())
        .owns(secrets.clone(), watcher::Config::default())
        .run(reconcile, on_error, Arc::new(client.clone()))
        .for_each(|_| async {});
    let running = tokio::spawn(controller);

    let mut config = ConfigMap::default();
    config.metadata.name = Some("settings".into());
    config.data = Some([("mode".to_owned(), "fast".to_owned())].into());
    configs.create(&PostParams::default(), &config).await.expect("created");

    support::eventually("the copy and the mark", || async {
        let copied = configs
            .get("settings")
            .await
            .ok()
            .and_then(|c| c.metadata.annotations)
            .is_some_and(|a| a.get("example.com/copied").map(String::as_str) == Some("true"));
        copied && secrets.get_opt("settings-copy").await.ok().flatten().is_some()
    })
    .await;
    let secret = secrets.get("settings-copy").await.expect("secret");
    assert_eq!(secret.data.expect("data")["mode"].0, b"fast", "stringData became data");

    // The controller repairs what is deleted behind its back: the Secret it owns is watched.
    secrets.delete("settings-copy", &DeleteParams::default()).await.expect("deleted");
    support::eventually("the copy restored", || async {
        secrets.get_opt("settings-copy").await.ok().flatten().is_some()
    })
    .await;

    configs.delete("settings", &DeleteParams::background()).await.expect("owner deleted");
    support::eventually("the copy collected with its owner", || async {
        secrets.get_opt("settings-copy").await.ok().flatten().is_none()
    })
    .await;
    running.abort();
}
