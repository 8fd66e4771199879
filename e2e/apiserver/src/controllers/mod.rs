//! The controllers a cluster runs beside kube-apiserver that its clients depend on, run in-process after each burst
//! of writes and every second: ClusterRole aggregation (`auth::policy`), the availability of aggregated APIs
//! (`aggregator`), the `extension-apiserver-authentication` ConfigMap (`authentication`), the namespace controller
//! and what kube-controller-manager puts in every namespace (`namespaces`), the CRD finalizer (`crd_cleanup`) and
//! the garbage collector (`garbage`, when a change concerns it); `writes` is how they write.
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

/// Runs the controllers until the server is dropped: a pass after each burst of changes, and every second. The
/// garbage collector, which reads every object, runs in a pass only when a change of the burst concerns it (or
/// every [`GARBAGE_RESYNC`]), as kube-controller-manager's is driven by the events of owners and dependents: a
/// change to an object that neither owns through references nor is being deleted gives it nothing to do, and its
/// scan of a large store held a core from the requests.
pub async fn run(api: Arc<ApiServer>, published: Published) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    let mut changes = api.store.subscribe();
    let mut concerned = true;
    let mut collected = tokio::time::Instant::now();
    loop {
        let collect = concerned || collected.elapsed() >= GARBAGE_RESYNC;
        let took = reconcile(&api, &published, collect).await;
        if collect {
            collected = tokio::time::Instant::now();
        }
        concerned = false;
        match tokio::time::timeout(Duration::from_secs(1), changes.recv()).await {
            Ok(Err(RecvError::Closed)) => return,
            Ok(Err(RecvError::Lagged(_))) => concerned = true,
            Ok(Ok(change)) => concerned |= concerns_the_collector(&change),
            Err(_) => {}
        }
        // Coalesce a burst of writes into one pass, and leave the API server at least four times as long as the pass
        // spent reading the store: it reads every object, so under a steady stream of writes to a large store
        // back-to-back passes would take a core from the requests (kube-controller-manager's controllers are driven
        // by events instead).
        tokio::time::sleep(pause_after(took)).await;
        loop {
            match changes.try_recv() {
                Ok(change) => concerned |= concerns_the_collector(&change),
                Err(TryRecvError::Lagged(_)) => concerned = true,
                Err(_) => break,
            }
        }
    }
}

/// How often the garbage collector runs when no change concerned it: what it could not do (a write refused) is
/// tried again.
const GARBAGE_RESYNC: Duration = Duration::from_secs(10);

/// Whether a change may give the garbage collector work: a deletion (dependents may be orphaned, a foreground
/// deletion unblocked), an object being deleted (its finalizers), or one with owner references before or after
/// (a dependent whose owner may be gone, or a reference that blocked a foreground deletion removed).
fn concerns_the_collector(change: &crate::storage::store::Change) -> bool {
    let owned = |object: &serde_json::Value| {
        object["metadata"]["ownerReferences"].as_array().is_some_and(|references| !references.is_empty())
    };
    change.kind == crate::storage::store::EventType::Deleted
        || !change.object["metadata"]["deletionTimestamp"].is_null()
        || owned(&change.object)
        || change.previous.as_ref().is_some_and(owned)
}

/// How long to let changes gather after a pass that spent `took` reading the store: at least 5 ms, at most
/// 250 ms (a cluster's garbage collector and namespace controller act within a fraction of a second).
fn pause_after(took: Duration) -> Duration {
    (took * 4).clamp(Duration::from_millis(5), Duration::from_millis(250))
}

/// One pass of every controller (the garbage collector only when `collect`); answers the time spent in those that
/// scan the store (not the aggregated API servers' checks, which wait on the network).
pub async fn reconcile(api: &ApiServer, published: &Published, collect: bool) -> Duration {
    let started = tokio::time::Instant::now();
    policy::aggregate(&api.store);
    let mut scanning = started.elapsed();
    aggregator::check_api_services(api).await;
    authentication::publish(api, &published.authentication).await;
    let started = tokio::time::Instant::now();
    namespaces::namespaces(api, &published.root_ca).await;
    crd_cleanup::crd_cleanup(api).await;
    if collect {
        garbage::garbage_collect(api).await;
    }
    scanning += started.elapsed();
    scanning
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::store::{Change, EventType};

    #[test]
    fn a_quick_pass_runs_again_after_a_short_burst_and_a_long_one_leaves_the_server_four_fifths_of_the_time() {
        assert_eq!(pause_after(Duration::from_micros(300)), Duration::from_millis(5));
        assert_eq!(pause_after(Duration::from_millis(10)), Duration::from_millis(40));
        assert_eq!(pause_after(Duration::from_secs(5)), Duration::from_millis(250), "never seconds");
    }

    fn change(kind: EventType, object: serde_json::Value, previous: Option<serde_json::Value>) -> Change {
        let resource = crate::storage::store::ResourceId::new("", "configmaps");
        Change { resource, namespace: "default".into(), kind, object, previous, revision: 7 }
    }

    #[test]
    fn the_collector_is_woken_by_deletions_objects_being_deleted_and_owner_references_only() {
        let plain = serde_json::json!({"metadata": {"name": "a", "labels": {"x": "y"}}});
        let owned = serde_json::json!({"metadata": {"name": "a", "ownerReferences": [{"uid": "1"}]}});
        let deleting = serde_json::json!({"metadata": {"name": "a", "deletionTimestamp": "2026-12-03T10:00:00Z"}});
        assert!(!concerns_the_collector(&change(EventType::Added, plain.clone(), None)));
        assert!(!concerns_the_collector(&change(EventType::Modified, plain.clone(), Some(plain.clone()))));
        assert!(concerns_the_collector(&change(EventType::Deleted, plain.clone(), None)), "a deletion");
        assert!(concerns_the_collector(&change(EventType::Modified, deleting, Some(plain.clone()))), "being deleted");
        assert!(concerns_the_collector(&change(EventType::Added, owned.clone(), None)), "a dependent");
        assert!(concerns_the_collector(&change(EventType::Modified, plain, Some(owned))), "a reference removed");
    }
}
