//! The Installed API's cache kept current: five watches (CSVs without the `olm.copiedFrom` label, so copies are
//! never cached; Subscriptions; OperatorGroups and Installs, whose status says where an operator is listed;
//! namespace metadata) feed the [`View`], and every change it records is broadcast to the open watches of clients.
//! Recording and broadcasting happen under one lock, so a client that reads the view and subscribes under it misses
//! nothing and sees nothing twice.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, ResourceExt};
use tokio::sync::{broadcast, watch};

use super::view::{Logged, Update, View, DEFAULT_HISTORY};
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::COPIED_FROM_LABEL;
use crate::api::v1alpha1::{ClusterServiceVersion, Subscription};
use crate::api::v2alpha1::{Install, InstallStatus};
use crate::controller::watches::{metadata, trimmed};

/// How many updates a slow client's watch may fall behind before it is ended (it lists again, as after a 410): as
/// many as the log keeps, which a watch resuming could not reach back past either. The broadcast holds as many
/// updates alive for a slow watch, so a longer one would undo the log's bound.
const CHANNEL: usize = DEFAULT_HISTORY;

/// The view, its broadcast of changes, and which watches have listed once.
pub struct Cache {
    view: Mutex<View>,
    changes: broadcast::Sender<Arc<Logged>>,
    synced: watch::Sender<u8>,
}

/// Each watch's bit in `synced`; the cache is synced when all five have listed (before the groups and Installs are
/// listed, every operator would be shown in its own namespace only).
const CSVS_LISTED: u8 = 1;
const SUBSCRIPTIONS_LISTED: u8 = 2;
const NAMESPACES_LISTED: u8 = 4;
const GROUPS_LISTED: u8 = 8;
const INSTALLS_LISTED: u8 = 16;
const ALL_LISTED: u8 = CSVS_LISTED | SUBSCRIPTIONS_LISTED | NAMESPACES_LISTED | GROUPS_LISTED | INSTALLS_LISTED;

impl Default for Cache {
    fn default() -> Self {
        Self::new(DEFAULT_HISTORY)
    }
}

impl Cache {
    /// A cache keeping `history` updates; its versions are named after the time it was made, so that versions a
    /// process gave before a restart are never taken for its own.
    pub fn new(history: usize) -> Self {
        let epoch =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_millis());
        Self {
            view: Mutex::new(View::new(history, &epoch.to_string())),
            changes: broadcast::channel(CHANNEL).0,
            synced: watch::channel(0).0,
        }
    }

    /// The view, locked. Held briefly: every watch event waits on it.
    pub fn view(&self) -> MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Subscribes to the changes after what `view` (the locked view) holds.
    pub fn subscribe(&self, _view: &MutexGuard<'_, View>) -> broadcast::Receiver<Arc<Logged>> {
        self.changes.subscribe()
    }

    /// Takes in an update and broadcasts what it changed.
    pub fn apply(&self, update: Update) {
        let listed = match update {
            Update::CsvsListed(_) => CSVS_LISTED,
            Update::SubscriptionsListed(_) => SUBSCRIPTIONS_LISTED,
            Update::NamespacesListed(_) => NAMESPACES_LISTED,
            Update::OperatorGroupsListed(_) => GROUPS_LISTED,
            Update::InstallsListed(_) => INSTALLS_LISTED,
            _ => 0,
        };
        let mut view = self.view();
        if let Some(logged) = view.apply(update) {
            // No receiver is no error: nobody is watching.
            let _ = self.changes.send(logged);
        }
        drop(view);
        if listed != 0 {
            self.synced.send_modify(|synced| *synced |= listed);
        }
    }

    /// Waits until every watch has listed once, at most `limit`; answers whether they have.
    pub async fn wait_synced(&self, limit: Duration) -> bool {
        let mut synced = self.synced.subscribe();
        tokio::time::timeout(limit, synced.wait_for(|synced| *synced == ALL_LISTED)).await.is_ok_and(|r| r.is_ok())
    }

    /// Keeps the cache current until the process ends.
    pub async fn run(self: Arc<Self>, client: Client) {
        let csvs = trimmed(
            Api::<ClusterServiceVersion>::all(client.clone()),
            watcher::Config::default().labels(&format!("!{COPIED_FROM_LABEL}")),
        );
        let subscriptions = trimmed(Api::<Subscription>::all(client.clone()), watcher::Config::default());
        let groups = trimmed(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default());
        // An Install's status holds its pending rules, grants and conditions: only what it applied is read here, and
        // only that is kept from the moment it arrives (a re-list holds every Install until it is complete).
        let installs = trimmed(Api::<Install>::all(client.clone()), watcher::Config::default()).modify(keep_applied);
        let namespaces = metadata::<Namespace>(client, watcher::Config::default());
        tokio::join!(
            feed(self.clone(), csvs, Update::Csv, Update::CsvDeleted, Update::CsvsListed),
            feed(
                self.clone(),
                subscriptions,
                Update::Subscription,
                Update::SubscriptionDeleted,
                Update::SubscriptionsListed
            ),
            feed(
                self.clone(),
                groups,
                Update::OperatorGroup,
                Update::OperatorGroupDeleted,
                Update::OperatorGroupsListed
            ),
            feed(self.clone(), installs, Update::Install, Update::InstallDeleted, Update::InstallsListed),
            feed(
                self.clone(),
                namespaces,
                |n| Update::Namespace {
                    name: n.name_any(),
                    resource_version: n.resource_version().unwrap_or_default()
                },
                |n| Update::NamespaceDeleted {
                    name: n.name_any(),
                    resource_version: n.resource_version().unwrap_or_default()
                },
                |list| Update::NamespacesListed(
                    list.iter().map(|n| (n.name_any(), n.resource_version().unwrap_or_default())).collect()
                ),
            ),
        );
    }
}

/// Drops from an Install what the view does not read: its content, annotations and status but what it applied.
fn keep_applied(install: &mut Install) {
    install.metadata.annotations = None;
    install.metadata.labels = None;
    install.spec.content.clear();
    install.spec.namespaces.clear();
    let applied = install.status.take().map(|status| status.applied).unwrap_or_default();
    let applied = applied.into_iter().filter(|object| object.kind == "ClusterServiceVersion").collect();
    install.status = Some(InstallStatus { applied, ..InstallStatus::default() });
}

/// Feeds one watch into the cache: each applied or deleted object, and each complete list.
async fn feed<K, S>(
    cache: Arc<Cache>,
    stream: S,
    applied: impl Fn(K) -> Update,
    deleted: impl Fn(K) -> Update,
    listed: impl Fn(Vec<K>) -> Update,
) where
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut buffer: Vec<K> = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(object)) => buffer.push(object),
            Ok(Event::InitDone) => cache.apply(listed(std::mem::take(&mut buffer))),
            Ok(Event::Apply(object)) => cache.apply(applied(object)),
            Ok(Event::Delete(object)) => cache.apply(deleted(object)),
            Err(error) => tracing::warn!(%error, "the Installed API's watch failed; retrying"),
        }
    }
}
