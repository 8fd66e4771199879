//! The cluster's RBAC objects, held once per process (per term, with leader election) for every loop that works out
//! what an account holds: reflector stores of Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (trimmed),
//! and their snapshots (aggregation resolved) built once per change rather than listed and resolved on every pass.
//!
//! Why: a hundred operators and the roles made for them are about a thousand ClusterRoles (`admin`, `edit` and
//! `view` aggregating hundreds of rules each); listed, decoded and resolved by every Install pass, sixteen passes at
//! once, that was most of the controller's memory (over 400 MB at a restart) and of its start-up time. Reading from a
//! watch is what kube-apiserver's own RBAC authorizer does: a pass sees what the authorizer sees, moments late at
//! worst. Nothing is let through on it: content is applied as the Install's account, which the API server authorizes
//! live; and the approval webhook, which guards the gate, reads live.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::Api;
use kube::runtime::reflector::store::{Writer, WriterDropped};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;

use super::watches;
use crate::rbac::{RbacObjects, RbacSnapshot};

/// The stores and the snapshots built from them.
pub struct RbacCache {
    roles: Store<Role>,
    cluster_roles: Store<ClusterRole>,
    role_bindings: Store<RoleBinding>,
    cluster_role_bindings: Store<ClusterRoleBinding>,
    /// Bumped on every event of any store, after the store took it.
    changes: AtomicU64,
    /// The last snapshot of every object and the change count it was built at.
    whole: Mutex<Option<(u64, Arc<RbacSnapshot>)>>,
    /// The last snapshot of the cluster-wide objects alone.
    cluster_wide: Mutex<Option<(u64, Arc<RbacSnapshot>)>>,
}

/// What fills an [`RbacCache`]: its stores' writers, until [`RbacCache::watch`] runs them.
pub struct RbacWriters {
    roles: Writer<Role>,
    cluster_roles: Writer<ClusterRole>,
    role_bindings: Writer<RoleBinding>,
    cluster_role_bindings: Writer<ClusterRoleBinding>,
}

/// The last snapshot in `slot` if nothing changed since it was built, else `build`'s, kept. One build at a time:
/// passes asking meanwhile wait for it and share it.
fn memoized(
    slot: &Mutex<Option<(u64, Arc<RbacSnapshot>)>>,
    seen: u64,
    build: impl FnOnce() -> RbacSnapshot,
) -> Arc<RbacSnapshot> {
    let mut built = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((at, snapshot)) = built.as_ref() {
        if *at == seen {
            return snapshot.clone();
        }
    }
    let snapshot = Arc::new(build());
    *built = Some((seen, snapshot.clone()));
    snapshot
}

impl RbacCache {
    /// An empty cache and the writers that fill it.
    pub fn new() -> (Arc<Self>, RbacWriters) {
        let (roles, roles_writer) = reflector::store();
        let (cluster_roles, cluster_roles_writer) = reflector::store();
        let (role_bindings, role_bindings_writer) = reflector::store();
        let (cluster_role_bindings, cluster_role_bindings_writer) = reflector::store();
        let cache = Self {
            roles,
            cluster_roles,
            role_bindings,
            cluster_role_bindings,
            changes: AtomicU64::new(0),
            whole: Mutex::new(None),
            cluster_wide: Mutex::new(None),
        };
        let writers = RbacWriters {
            roles: roles_writer,
            cluster_roles: cluster_roles_writer,
            role_bindings: role_bindings_writer,
            cluster_role_bindings: cluster_role_bindings_writer,
        };
        (Arc::new(cache), writers)
    }

    /// Watches the four kinds into the stores for as long as the future runs. Every event dates the snapshots, the
    /// end of a relist included (its objects replace a store's only then).
    pub fn watch(self: &Arc<Self>, client: kube::Client, writers: RbacWriters) -> BoxFuture<'static, ()> {
        let config = watcher::Config::default;
        let streams = [
            reflector::reflector(writers.roles, watches::trimmed(Api::<Role>::all(client.clone()), config()))
                .map(|_| ())
                .boxed(),
            reflector::reflector(
                writers.cluster_roles,
                watches::trimmed(Api::<ClusterRole>::all(client.clone()), config()),
            )
            .map(|_| ())
            .boxed(),
            reflector::reflector(
                writers.role_bindings,
                watches::trimmed(Api::<RoleBinding>::all(client.clone()), config()),
            )
            .map(|_| ())
            .boxed(),
            reflector::reflector(
                writers.cluster_role_bindings,
                watches::trimmed(Api::<ClusterRoleBinding>::all(client), config()),
            )
            .map(|_| ())
            .boxed(),
        ];
        let cache = self.clone();
        futures_util::stream::select_all(streams)
            .for_each(move |()| {
                cache.changed();
                std::future::ready(())
            })
            .boxed()
    }

    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits until every store has been listed once (before, every account would seem to hold nothing).
    pub async fn wait_until_ready(&self) -> Result<(), WriterDropped> {
        self.roles.wait_until_ready().await?;
        self.cluster_roles.wait_until_ready().await?;
        self.role_bindings.wait_until_ready().await?;
        self.cluster_role_bindings.wait_until_ready().await
    }

    /// Every object as stored, shared rather than copied.
    pub fn objects(&self) -> RbacObjects {
        RbacObjects {
            roles: self.roles.state(),
            cluster_roles: self.cluster_roles.state(),
            role_bindings: self.role_bindings.state(),
            cluster_role_bindings: self.cluster_role_bindings.state(),
        }
    }

    /// The snapshot of every object, rebuilt only when one changed since the last.
    pub fn snapshot(&self) -> Arc<RbacSnapshot> {
        memoized(&self.whole, self.changes.load(Ordering::SeqCst), || self.objects().snapshot())
    }

    /// The snapshot of the ClusterRoles and ClusterRoleBindings alone, rebuilt only when an object changed.
    pub fn cluster_snapshot(&self) -> Arc<RbacSnapshot> {
        memoized(&self.cluster_wide, self.changes.load(Ordering::SeqCst), || {
            RbacSnapshot::cluster_wide(self.cluster_roles.state(), self.cluster_role_bindings.state())
        })
    }

    /// The ClusterRoles, as stored.
    pub fn cluster_roles(&self) -> Vec<Arc<ClusterRole>> {
        self.cluster_roles.state()
    }

    /// The ClusterRoleBindings, as stored.
    pub fn cluster_role_bindings(&self) -> Vec<Arc<ClusterRoleBinding>> {
        self.cluster_role_bindings.state()
    }
}

/// The loop that fills the process's [`RbacCache`] (one of `process::CONTROLLERS`), until the process stops. A
/// second call for the same process finds the writers taken and only waits for the stop.
pub fn controller(process: &super::Process) -> BoxFuture<'static, ()> {
    let stopped = process.shutdown();
    let watching = match process.take_rbac_writers() {
        Some(writers) => process.rbac.watch(process.client.clone(), writers),
        None => futures_util::future::pending().boxed(),
    };
    async move {
        tokio::select! {
            () = stopped => {}
            () = watching => {}
        }
    }
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_built_once_per_change() {
        let slot = Mutex::new(None);
        let mut builds = 0;
        let first = memoized(&slot, 1, || {
            builds += 1;
            RbacSnapshot::default()
        });
        let again = memoized(&slot, 1, || {
            builds += 1;
            RbacSnapshot::default()
        });
        assert!(Arc::ptr_eq(&first, &again), "the same snapshot, shared");
        let changed = memoized(&slot, 2, || {
            builds += 1;
            RbacSnapshot::default()
        });
        assert!(!Arc::ptr_eq(&first, &changed), "built anew after a change");
        assert_eq!(builds, 2);
    }
}
