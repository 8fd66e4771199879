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
        let took = reconcile(&api, &published).await;
        let wait = tokio::time::timeout(Duration::from_secs(1), changes.recv()).await;
        if let Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) = wait {
            return;
        }
        // Coalesce a burst of writes into one pass, and leave the API server at least four times as long as the pass
        // spent reading the store: it reads every object, so under a steady stream of writes to a large store
        // back-to-back passes would take a core from the requests (kube-controller-manager's controllers are driven
        // by events instead).
        tokio::time::sleep(pause_after(took)).await;
        while changes.try_recv().is_ok() {}
    }
}

/// How long to let changes gather after a pass that spent `took` reading the store: at least 5 ms, at most
/// 250 ms (a cluster's garbage collector and namespace controller act within a fraction of a second).
fn pause_after(took: Duration) -> Duration {
    (took * 4).clamp(Duration::from_millis(5), Duration::from_millis(250))
}

/// One pass of every controller; answers the time spent in those that scan the store (not the aggregated API
/// servers' checks, which wait on the network).
pub async fn reconcile(api: &ApiServer, published: &Published) -> Duration {
    let started = tokio::time::Instant::now();
    policy::aggregate(&api.store);
    let mut scanning = started.elapsed();
    aggregator::check_api_services(api).await;
    authentication::publish(api, &published.authentication).await;
    let started = tokio::time::Instant::now();
    namespaces::namespaces(api, &published.root_ca).await;
    crd_cleanup::crd_cleanup(api).await;
    garbage::garbage_collect(api).await;
    scanning += started.elapsed();
    scanning
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quick_pass_runs_again_after_a_short_burst_and_a_long_one_leaves_the_server_four_fifths_of_the_time() {
        assert_eq!(pause_after(Duration::from_micros(300)), Duration::from_millis(5));
        assert_eq!(pause_after(Duration::from_millis(10)), Duration::from_millis(40));
        assert_eq!(pause_after(Duration::from_secs(5)), Duration::from_millis(250), "never seconds");
    }
}
