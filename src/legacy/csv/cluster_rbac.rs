//! The cluster-wide RBAC objects the CSV loop checks accounts against, held once: reflector stores of
//! ClusterRoles and ClusterRoleBindings, and their snapshot (aggregation resolved) built once per change of either
//! rather than listed and resolved on every pass. With a hundred CSVs and the roles OLM makes for them (three per
//! group, four per owned CRD), listing and resolving them per pass, many passes at once, was most of the loop's
//! memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::runtime::reflector::Store;

use crate::rbac::RbacSnapshot;

pub struct ClusterRbac {
    roles: Store<ClusterRole>,
    bindings: Store<ClusterRoleBinding>,
    /// Bumped on every event of either store.
    changes: AtomicU64,
    /// The last snapshot and the change count it was built at.
    built: Mutex<Option<(u64, Arc<RbacSnapshot>)>>,
}

impl ClusterRbac {
    pub fn new(roles: Store<ClusterRole>, bindings: Store<ClusterRoleBinding>) -> Self {
        Self { roles, bindings, changes: AtomicU64::new(0), built: Mutex::new(None) }
    }

    /// Records that a store changed: the next snapshot is built anew.
    pub fn changed(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits until both stores have been listed once (before, every account would seem to hold nothing).
    pub async fn wait_until_ready(&self) -> Result<(), kube::runtime::reflector::store::WriterDropped> {
        self.roles.wait_until_ready().await?;
        self.bindings.wait_until_ready().await
    }

    /// The ClusterRoles and ClusterRoleBindings as a snapshot, rebuilt only when they changed since the last one.
    /// One build at a time: passes asking meanwhile wait for it and share it.
    pub fn snapshot(&self) -> Arc<RbacSnapshot> {
        let mut built = match self.built.lock() {
            Ok(built) => built,
            Err(poisoned) => poisoned.into_inner(),
        };
        let seen = self.changes.load(Ordering::SeqCst);
        if let Some((at, snapshot)) = built.as_ref() {
            if *at == seen {
                return snapshot.clone();
            }
        }
        // The stores' objects themselves, shared: a snapshot still held by a pass costs its resolved rules, not a
        // copy of every role and binding.
        let snapshot = Arc::new(RbacSnapshot::cluster_wide(self.roles.state(), self.bindings.state()));
        *built = Some((seen, snapshot.clone()));
        snapshot
    }

    /// The ClusterRoles, as stored.
    pub fn cluster_roles(&self) -> Vec<Arc<ClusterRole>> {
        self.roles.state()
    }

    /// The ClusterRoleBindings, as stored.
    pub fn cluster_role_bindings(&self) -> Vec<Arc<ClusterRoleBinding>> {
        self.bindings.state()
    }
}
