//! The cluster's RBAC objects, held once per process (per term, with leader election) for every loop that works out
//! what an account holds: reflector stores of Roles, ClusterRoles, RoleBindings and ClusterRoleBindings (trimmed),
//! and their snapshots (aggregation resolved) built once per change rather than listed and resolved on every pass.
//!
//! Why: a hundred operators and the roles made for them are about a thousand ClusterRoles (`admin`, `edit` and
//! `view` aggregating hundreds of rules each); listed, decoded and resolved by every Install pass, sixteen passes at
//! once, that was most of the controller's memory (over 400 MB at a restart) and of its start-up time. Reading from a
//! watch is what kube-apiserver's own RBAC authorizer does: a pass sees what the authorizer sees, moments late at
//! worst. What the controller wrote itself is waited for (`wrote`, `current`): a pass never judges from a cache
//! older than the grants and roles this process applied, or it would find them missing and ask again for what was
//! approved. What others changed can be moments late: content is applied as the Install's account, which the API
//! server authorizes live, and the approval webhook, which guards the gate, reads live; but what the controller
//! grants under its own identity (the grants of an approval, the per-object verbs that follow from an approved
//! `create`, the policy ceilings) is decided on this view, as it was on lists read a moment before (an admin's
//! change made meanwhile is seen by the next pass either way).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};

use super::client::{ClientError, Objects};
use super::listing;
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
    /// Per kind (`KINDS`): the newest resourceVersion the store holds, and the newest this process wrote.
    seen: [AtomicU64; 4],
    written: [AtomicU64; 4],
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

/// The kinds held, in the order of `seen` and `written`.
const KINDS: [&str; 4] = ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"];

/// How long a pass waits for the watches to list everything once, or to see what this process wrote.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const CAUGHT_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// A resourceVersion as a number. They are opaque to clients but numeric in every store Kubernetes has, and etcd's
/// revisions grow across kinds; one that does not parse is 0, which waits for nothing.
fn revision(resource_version: Option<&str>) -> u64 {
    resource_version.and_then(|version| version.parse().ok()).unwrap_or(0)
}

/// Why a pass cannot read the RBAC objects.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CacheError {
    #[error("the watch of the cluster's RBAC objects stopped")]
    Stopped,
    #[error("the cluster's RBAC objects were not all listed within {0:?}")]
    NotListed(Duration),
    #[error("the watch of the cluster's RBAC objects did not show what the controller wrote within {0:?}")]
    Behind(Duration),
}

/// Follows what a store holds: the newest resourceVersion of its objects, a relist's counted when the store takes it
/// (at its end). `written` is what this process had written of the kind when the event came: a relist starts after
/// its `Init` is taken, so it holds every write made before, or its deletion, though no object listed may be as
/// new (the one written may be gone, and nothing newer of the kind made).
fn follow<K: kube::Resource>(seen: &AtomicU64, listing: &mut u64, written: u64, event: &Event<K>) {
    let version = |object: &K| revision(object.meta().resource_version.as_deref());
    match event {
        Event::Apply(object) | Event::Delete(object) => {
            seen.fetch_max(version(object), Ordering::SeqCst);
        }
        Event::Init => *listing = written,
        Event::InitApply(object) => *listing = (*listing).max(version(object)),
        Event::InitDone => {
            seen.fetch_max(*listing, Ordering::SeqCst);
        }
    }
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
            seen: Default::default(),
            written: Default::default(),
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
        // The default: a list then a watch, the list a consistent read made when the stream is polled after `Init`,
        // which `follow` relies on to count every write made before `Init` as held once the relist is done. A
        // streaming list (`Init` after its request) or `ListSemantic::Any` (a cached list) would not allow that.
        let config = watcher::Config::default;
        let streams = [
            self.followed(
                0,
                reflector::reflector(writers.roles, watches::trimmed(Api::<Role>::all(client.clone()), config())),
            ),
            self.followed(
                1,
                reflector::reflector(
                    writers.cluster_roles,
                    watches::trimmed(Api::<ClusterRole>::all(client.clone()), config()),
                ),
            ),
            self.followed(
                2,
                reflector::reflector(
                    writers.role_bindings,
                    watches::trimmed(Api::<RoleBinding>::all(client.clone()), config()),
                ),
            ),
            self.followed(
                3,
                reflector::reflector(
                    writers.cluster_role_bindings,
                    watches::trimmed(Api::<ClusterRoleBinding>::all(client), config()),
                ),
            ),
        ];
        futures_util::stream::select_all(streams).for_each(|()| std::future::ready(())).boxed()
    }

    /// One kind's watch, its events dating the snapshots and moving what its store is known to hold; its errors
    /// logged (the watch is retried with backoff meanwhile, and passes wait).
    fn followed<K: kube::Resource + Send + 'static>(
        self: &Arc<Self>,
        kind: usize,
        stream: impl futures_util::Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
    ) -> futures_util::stream::BoxStream<'static, ()> {
        let cache = self.clone();
        let mut listing = 0;
        stream
            .map(move |event| match event {
                Ok(event) => {
                    // Dated first: a pass that finds its write held must not be given a snapshot from before it.
                    cache.changed();
                    follow(&cache.seen[kind], &mut listing, cache.written[kind].load(Ordering::SeqCst), &event);
                }
                Err(error) => tracing::warn!(kind = KINDS[kind], %error, "watching RBAC objects"),
            })
            .boxed()
    }

    /// Records that this process wrote an object of `kind` (`Role`, `ClusterRole`, `RoleBinding`,
    /// `ClusterRoleBinding`; others are not held) at `resource_version`: passes wait until the store holds it.
    pub fn wrote(&self, kind: &str, resource_version: Option<&str>) {
        if let Some(index) = KINDS.iter().position(|held| *held == kind) {
            self.written[index].fetch_max(revision(resource_version), Ordering::SeqCst);
        }
    }

    /// Whether every store holds what this process wrote.
    fn holds_what_was_written(&self) -> bool {
        (0..KINDS.len()).all(|kind| self.seen[kind].load(Ordering::SeqCst) >= self.written[kind].load(Ordering::SeqCst))
    }

    /// Waits until every store was listed once and holds what this process wrote: what a pass reads is then no
    /// older than its own writes.
    pub async fn current(&self) -> Result<(), CacheError> {
        match tokio::time::timeout(READY_TIMEOUT, self.listed()).await {
            Ok(true) => {}
            Ok(false) => return Err(CacheError::Stopped),
            Err(_) => return Err(CacheError::NotListed(READY_TIMEOUT)),
        }
        let started = tokio::time::Instant::now();
        while !self.holds_what_was_written() {
            if started.elapsed() > CAUGHT_UP_TIMEOUT {
                return Err(CacheError::Behind(CAUGHT_UP_TIMEOUT));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits until every store has been listed once (before, every account would seem to hold nothing): false if a
    /// watch stopped first.
    async fn listed(&self) -> bool {
        listing::ready(&self.roles).await
            && listing::ready(&self.cluster_roles).await
            && listing::ready(&self.role_bindings).await
            && listing::ready(&self.cluster_role_bindings).await
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

    /// The Roles and RoleBindings of `namespace`, as stored (copies: a namespace holds a few).
    pub fn namespace_objects(&self, namespace: &str) -> (Vec<Role>, Vec<RoleBinding>) {
        let here = |meta: &kube::api::ObjectMeta| meta.namespace.as_deref() == Some(namespace);
        let roles =
            self.roles.state().iter().filter(|role| here(&role.metadata)).map(|role| role.as_ref().clone()).collect();
        let bindings = self.role_bindings.state();
        let bindings =
            bindings.iter().filter(|binding| here(&binding.metadata)).map(|binding| binding.as_ref().clone());
        (roles, bindings.collect())
    }

    /// The ClusterRoles, as stored.
    pub fn cluster_roles(&self) -> Vec<Arc<ClusterRole>> {
        self.cluster_roles.state()
    }

    /// The ClusterRole `name` as stored: from the cache once it holds what this process wrote, so that a pass
    /// comparing what it wants with what is there reads nothing older than its own writes (a loop applying a
    /// hundred groups' roles read each live before: most of its requests); from the API server when the cache
    /// cannot say (not listed yet, or behind).
    pub async fn cluster_role(
        &self,
        live: &Objects<ClusterRole>,
        name: &str,
    ) -> Result<Option<ClusterRole>, ClientError> {
        match self.current().await {
            Ok(()) => Ok(self.cluster_roles.get(&ObjectRef::new(name)).map(|role| role.as_ref().clone())),
            Err(_) => live.get_opt(name).await,
        }
    }

    /// Server-side applies the ClusterRole `name` and records the write, so that the next pass waits until the
    /// cache holds it.
    pub async fn apply_cluster_role(
        &self,
        live: &Objects<ClusterRole>,
        name: &str,
        role: &serde_json::Value,
    ) -> Result<(), ClientError> {
        let applied = live.apply(name, role, None).await?;
        self.wrote("ClusterRole", applied.metadata.resource_version.as_deref());
        Ok(())
    }

    /// The ClusterRoleBindings, as stored.
    pub fn cluster_role_bindings(&self) -> Vec<Arc<ClusterRoleBinding>> {
        self.cluster_role_bindings.state()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(version: &str) -> Role {
        let mut role = Role::default();
        role.metadata.resource_version = Some(version.to_owned());
        role
    }

    #[test]
    fn a_store_holds_what_its_events_brought_a_relist_once_it_is_done() {
        let (seen, mut listing) = (AtomicU64::new(0), 0);
        follow(&seen, &mut listing, 0, &Event::Apply(role("7")));
        assert_eq!(seen.load(Ordering::SeqCst), 7);
        follow(&seen, &mut listing, 0, &Event::<Role>::Init);
        follow(&seen, &mut listing, 0, &Event::InitApply(role("12")));
        assert_eq!(seen.load(Ordering::SeqCst), 7, "a relist's objects are the store's only at its end");
        follow(&seen, &mut listing, 0, &Event::<Role>::InitDone);
        assert_eq!(seen.load(Ordering::SeqCst), 12);
        follow(&seen, &mut listing, 0, &Event::Delete(role("15")));
        assert_eq!(seen.load(Ordering::SeqCst), 15);
    }

    #[test]
    fn a_relist_holds_what_was_written_before_it_though_the_object_is_gone() {
        // Written at 40, then deleted while the watch was down: the relist lists nothing as new, yet holds it.
        let (seen, mut listing) = (AtomicU64::new(30), 0);
        follow(&seen, &mut listing, 40, &Event::<Role>::Init);
        follow(&seen, &mut listing, 41, &Event::InitApply(role("35")));
        assert_eq!(seen.load(Ordering::SeqCst), 30);
        follow(&seen, &mut listing, 41, &Event::<Role>::InitDone);
        assert_eq!(seen.load(Ordering::SeqCst), 40, "not 41: that write may have come after the list");
    }

    #[tokio::test]
    async fn a_pass_waits_for_what_this_process_wrote() {
        let (cache, _writers) = RbacCache::new();
        assert!(cache.holds_what_was_written());
        cache.wrote("ClusterRoleBinding", Some("40"));
        cache.wrote("ConfigMap", Some("99"));
        assert!(!cache.holds_what_was_written(), "the binding written is not held yet");
        cache.seen[3].store(39, Ordering::SeqCst);
        assert!(!cache.holds_what_was_written());
        cache.seen[3].store(40, Ordering::SeqCst);
        assert!(cache.holds_what_was_written(), "kinds not held are not waited for");
    }

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
