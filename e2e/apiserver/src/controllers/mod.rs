//! The controllers a cluster runs beside kube-apiserver that its clients depend on, run in-process after each burst
//! of writes and every second: ClusterRole aggregation (`auth::policy`), the availability of aggregated APIs
//! (`aggregator`), the `extension-apiserver-authentication` ConfigMap (`authentication`), the namespace controller
//! and what kube-controller-manager puts in every namespace (`namespaces`), the CRD finalizer (`crd_cleanup`) and
//! the garbage collector (`garbage`); `writes` is how they write.
//!
//! May import `request` (they write through the API server's verbs), `aggregator`, `auth`, `crds`, `model` and
//! `storage`.

pub mod authentication;
mod crd_cleanup;
mod garbage;
mod namespaces;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use crate::aggregator;
use crate::auth::policy;
use crate::request::api_server::ApiServer;

/// What the control plane publishes for its clients: its CA (each namespace's `kube-root-ca.crt`) and how it
/// authenticates (`kube-system/extension-apiserver-authentication`).
#[derive(Clone, Debug, Default)]
pub struct Published {
    pub root_ca: String,
    pub authentication: authentication::ClusterAuthenticationInfo,
}

/// Runs the controllers until the server is dropped: a pass after each burst of changes, and every second.
pub async fn run(api: Arc<ApiServer>, published: Published) {
    let mut changes = api.store.subscribe();
    loop {
        reconcile(&api, &published).await;
        let wait = tokio::time::timeout(Duration::from_secs(1), changes.recv()).await;
        if let Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) = wait {
            return;
        }
        // Coalesce a burst of writes into one pass.
        tokio::time::sleep(Duration::from_millis(5)).await;
        while changes.try_recv().is_ok() {}
    }
}

/// One pass of every controller.
pub async fn reconcile(api: &ApiServer, published: &Published) {
    policy::aggregate(&api.store);
    aggregator::check_api_services(api).await;
    authentication::publish(api, &published.authentication).await;
    namespaces::namespaces(api, &published.root_ca).await;
    crd_cleanup::crd_cleanup(api).await;
    garbage::garbage_collect(api).await;
}
