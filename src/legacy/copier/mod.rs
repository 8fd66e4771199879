//! The copies of original CSVs, made, refreshed and deleted by workers of their own (OLM v0's `csvCopyQueueSet`,
//! `syncCopyCSV` and `copyToNamespace`). A CSV pass decides where its CSV's copies go and asks for them (a
//! [`CopyRequest`] carrying the CSV as the pass left it); the copier brings them there after, from the newest request
//! of each original (`queue`). An original that moves through its phases while its copies are written has them
//! written once more at most, not once per phase, and no CSV pass waits on a thousand namespaces' copies.
//!
//! What is on the cluster comes from the copied-CSV loop's watch (copies as metadata) and what this process wrote
//! of each copy from the `ledger`: a copy that holds what was written is neither read nor written again; the others
//! are read (one list for the original's copies, or one get) and put back where they drifted, as `plan` decides.

pub mod ledger;
pub mod plan;
pub mod queue;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use kube::api::{ListParams, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::ResourceExt;

use self::ledger::{Fingerprint, Ledger};
use self::plan::{plan, Work};
use self::queue::Queue;
use super::copies::{drift, prototype};
use super::membership::COPIED_FROM_LABEL;
use crate::api::v1::OPERATOR_NAMESPACE_ANNOTATION;
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::listing::Listing;
use tokio::sync::mpsc::UnboundedSender;

/// An original CSV (as its pass left it, status included) and the namespaces its copies must be in.
pub struct CopyRequest {
    pub original: ClusterServiceVersion,
    pub wanted: BTreeSet<String>,
}

/// Hands requests to the copier's workers; cheap to clone.
#[derive(Clone)]
pub struct Copier {
    shared: Arc<Shared>,
}

struct Shared {
    client: ControllerClient,
    /// Every copy, as metadata (the copied-CSV loop's store).
    copies: Store<PartialObjectMeta<ClusterServiceVersion>>,
    /// Whether that store has listed the copies (the copied-CSV loop's runner waits on the store's own readiness).
    copies_listed: Listing,
    ledger: Arc<Ledger>,
    queue: Queue<(String, String), CopyRequest>,
    /// The originals whose last request wanted copies (or failed): they may have copies the watch does not show yet
    /// (the worker is done with a request before the watch brings the copies it made).
    wanting: Mutex<HashSet<(String, String)>>,
    /// How long after a failed request the original's pass is woken to ask again.
    retry: Duration,
    /// Wakes an original's pass once copies of it were made: its RBAC in a target is owned by its copy there.
    wake: UnboundedSender<ObjectRef<ClusterServiceVersion>>,
}

/// How many originals have their copies written at once, and how many copies of one original at once: one and one.
/// OLM v0 writes two originals' copies at once (two workers on its copy queue, each original's namespaces in turn),
/// so its copies were done sooner at 500 and 1,000 namespaces (docs/operations.md). Copies are a refresh in the
/// background, and the API server is what limits their pace: two copies of one original at once made 10,400 copies
/// little sooner (102 against 115 s) but had a CSV's own status wait behind them (change to status p99 129 against
/// 49 ms; docs/operations.md).
const WORKERS: usize = 1;
const COPY_CONCURRENCY: usize = 1;
/// How long the watch of copies may take to list them before the wait is logged.
const COPIES_LISTED: Duration = Duration::from_secs(60);

/// What syncing an original's copies did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Synced {
    pub created: usize,
    pub refreshed: usize,
    pub deleted: usize,
    /// Copies read because the ledger could not say they held their prototype.
    pub read: usize,
}

impl Synced {
    fn add(self, other: Self) -> Self {
        Self {
            created: self.created + other.created,
            refreshed: self.refreshed + other.refreshed,
            deleted: self.deleted + other.deleted,
            read: self.read + other.read,
        }
    }
}

impl Copier {
    pub fn new(
        client: ControllerClient,
        copies: Store<PartialObjectMeta<ClusterServiceVersion>>,
        copies_listed: Listing,
        ledger: Arc<Ledger>,
        retry: Duration,
        wake: UnboundedSender<ObjectRef<ClusterServiceVersion>>,
    ) -> Self {
        let (queue, wanting) = (Queue::default(), Mutex::default());
        Self { shared: Arc::new(Shared { client, copies, copies_listed, ledger, queue, wanting, retry, wake }) }
    }

    /// Asks for the copies of `request.original` to be brought to `request.wanted`, replacing an older request for
    /// it that no worker took yet.
    pub fn request(&self, request: CopyRequest) {
        let original = &request.original;
        let key = (original.namespace().unwrap_or_default(), original.name_any());
        self.shared.queue.put(key, request);
    }

    /// Whether the original `name` in `namespace` may have copies: a request for it waits or is being worked on, its
    /// last one wanted copies (they may not be in the watch yet), the watch holds one, or the watch has not listed
    /// the copies yet. An original that wants none and may have none needs no request.
    pub fn may_have_copies(&self, namespace: &str, name: &str) -> bool {
        let shared = &self.shared;
        let key = (namespace.to_owned(), name.to_owned());
        shared.queue.holds(&key)
            || shared.wanting().contains(&key)
            || !shared.copies_listed.is_listed()
            || shared.copies.state().iter().any(|copy| is_copy_of(copy, namespace, name))
    }

    /// Works through the requests, until dropped.
    pub async fn run(self) {
        // Until the watch of copies has listed them, every copy would look missing.
        let copies = &self.shared.copies_listed;
        let listed = match tokio::time::timeout(COPIES_LISTED, copies.ready()).await {
            Ok(listed) => listed,
            Err(_) => {
                tracing::warn!("no copied CSV is written until the watch of copied CSVs has listed them");
                copies.ready().await
            }
        };
        if !listed {
            return;
        }
        futures_util::future::join_all((0..WORKERS).map(|_| self.clone().work())).await;
    }

    async fn work(self) {
        loop {
            let (key, request) = self.shared.queue.take().await;
            let synced = self.shared.sync(&request).await;
            // Before the key is let go: once it is, only this mark says copies may be on their way.
            if request.wanted.is_empty() && synced.is_ok() {
                self.shared.wanting().remove(&key);
            } else {
                self.shared.wanting().insert(key.clone());
            }
            match synced {
                Ok(synced) if synced != Synced::default() => {
                    tracing::debug!(csv = %key.1, namespace = %key.0, ?synced, "synced copied CSVs");
                    if synced.created > 0 {
                        let _ = self.shared.wake.send(ObjectRef::new(&key.1).within(&key.0));
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(csv = %key.1, namespace = %key.0, %error, "failed to sync the copied CSVs; retrying");
                    // A later pass asks again from the original as it is then: putting this request back could
                    // write an older state over copies a newer request wrote meanwhile.
                    let (retry, wake) = (self.shared.retry, self.shared.wake.clone());
                    let original = ObjectRef::new(&key.1).within(&key.0);
                    tokio::spawn(async move {
                        tokio::time::sleep(retry).await;
                        let _ = wake.send(original);
                    });
                }
            }
            self.shared.queue.done(&key);
        }
    }
}

/// Whether `copy` is a copy of the original `name` in `namespace`.
pub fn is_copy_of(copy: &PartialObjectMeta<ClusterServiceVersion>, namespace: &str, name: &str) -> bool {
    copy.metadata.name.as_deref() == Some(name) && copied_from(copy) == Some(namespace)
}

/// The namespace of `copy`'s original: its `olm.copiedFrom` label or, as the copied-CSV loop's store keeps a copy
/// whose label and `olm.operatorNamespace` annotation agree (without its labels), the annotation. Only for copies
/// of that store or of a watch selecting the label: an object without it may be an original, whose annotation names
/// its own namespace.
pub fn copied_from(copy: &PartialObjectMeta<ClusterServiceVersion>) -> Option<&str> {
    let annotations = copy.metadata.annotations.as_ref();
    copy.labels()
        .get(COPIED_FROM_LABEL)
        .or_else(|| annotations.and_then(|annotations| annotations.get(OPERATOR_NAMESPACE_ANNOTATION)))
        .map(String::as_str)
}

fn version_of(object: &ClusterServiceVersion) -> Option<&str> {
    object.metadata.resource_version.as_deref()
}

impl Shared {
    fn wanting(&self) -> MutexGuard<'_, HashSet<(String, String)>> {
        self.wanting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Brings the copies of `request.original` to exactly `request.wanted`.
    async fn sync(&self, request: &CopyRequest) -> Result<Synced, ClientError> {
        let original = &request.original;
        let (namespace, name) = (original.namespace().unwrap_or_default(), original.name_any());
        let proto = prototype(original);
        let fingerprint = Fingerprint::of(&proto);
        let present: BTreeMap<String, Option<String>> = self
            .copies
            .state()
            .iter()
            .filter(|copy| is_copy_of(copy, &namespace, &name))
            .map(|copy| (copy.namespace().unwrap_or_default(), copy.resource_version()))
            .collect();
        let work = plan(&present, &request.wanted, |at, version| self.ledger.holds(at, &name, version, fingerprint));
        let Work { create, read, delete } = work;
        let deletions: Vec<BoxFuture<'_, Result<(), ClientError>>> =
            delete.iter().map(|at| self.delete(at, &name).boxed()).collect();
        let deleted = stream::iter(deletions).buffer_unordered(COPY_CONCURRENCY).try_collect::<Vec<()>>().await?.len();
        let creations: Vec<BoxFuture<'_, Result<Option<String>, ClientError>>> =
            create.into_iter().map(|at| self.create(at, &proto, fingerprint).boxed()).collect();
        let created: Vec<Option<String>> =
            stream::iter(creations).buffer_unordered(COPY_CONCURRENCY).try_collect().await?;
        // A copy made meanwhile (the watch had not shown it) is read like a copy that may have drifted.
        let mut read = read;
        read.extend(created.iter().flatten().cloned());
        let synced = self.refresh(&namespace, &name, read, &proto, fingerprint).await?;
        let made = created.iter().filter(|conflict| conflict.is_none()).count();
        Ok(Synced { created: made, deleted, ..Synced::default() }.add(synced))
    }

    async fn delete(&self, at: &str, name: &str) -> Result<(), ClientError> {
        self.client.namespaced::<ClusterServiceVersion>(at).ensure_deleted(name).await?;
        self.ledger.forget(at, name);
        Ok(())
    }

    /// Creates the copy in `at`, then its status; answers `at` back when a copy was there already.
    async fn create(
        &self,
        at: String,
        proto: &ClusterServiceVersion,
        fingerprint: Fingerprint,
    ) -> Result<Option<String>, ClientError> {
        let mut copy = proto.clone();
        copy.metadata.namespace = Some(at.clone());
        let objects = self.client.namespaced::<ClusterServiceVersion>(&at);
        self.ledger.writing(&at, &proto.name_any(), fingerprint);
        let mut created = match objects.create(&copy).await {
            Ok(created) => created,
            Err(error) => {
                self.ledger.forget(&at, &proto.name_any());
                return if error.code() == Some(409) { Ok(Some(at)) } else { Err(error) };
            }
        };
        // Its creation is this process's own change (the copied-CSV loop leaves it), but it holds no status yet.
        let version = created.metadata.resource_version.as_deref();
        self.ledger.wrote(&at, &proto.name_any(), version, fingerprint.without_status());
        created.status = proto.status.clone();
        self.ledger.writing(&at, &proto.name_any(), fingerprint);
        let written = objects.replace_status(&proto.name_any(), &created).await.inspect_err(|_| {
            // The creation is recorded: the copy holds no status, which the next request sees.
            self.ledger.wrote(&at, &proto.name_any(), version_of(&created), fingerprint.without_status());
        })?;
        self.ledger.wrote(&at, &proto.name_any(), written.metadata.resource_version.as_deref(), fingerprint);
        Ok(None)
    }

    /// Reads the copies in `namespaces` (one list of the original's copies when there are several, a get when one)
    /// and puts back those that drifted; a copy found gone is made again.
    async fn refresh(
        &self,
        origin: &str,
        name: &str,
        namespaces: Vec<String>,
        proto: &ClusterServiceVersion,
        fingerprint: Fingerprint,
    ) -> Result<Synced, ClientError> {
        if namespaces.is_empty() {
            return Ok(Synced::default());
        }
        let mut found: BTreeMap<String, ClusterServiceVersion> = if let [only] = namespaces.as_slice() {
            let copy = self.client.namespaced::<ClusterServiceVersion>(only).get_opt(name).await?;
            copy.into_iter().map(|copy| (only.clone(), copy)).collect()
        } else {
            let params = ListParams::default()
                .labels(&format!("{COPIED_FROM_LABEL}={origin}"))
                .fields(&format!("metadata.name={name}"));
            let listed = self.client.all::<ClusterServiceVersion>().list_with(&params).await?;
            listed.into_iter().map(|copy| (copy.namespace().unwrap_or_default(), copy)).collect()
        };
        let read = namespaces.len();
        let runs: Vec<BoxFuture<'_, Result<Synced, ClientError>>> = namespaces
            .into_iter()
            .map(|at| {
                let copy = found.remove(&at);
                async move {
                    match copy {
                        Some(copy) => {
                            let wrote = self.put_back(proto, &copy, fingerprint).await?;
                            Ok(Synced { refreshed: usize::from(wrote), ..Synced::default() })
                        }
                        None => {
                            let conflict = self.create(at, proto, fingerprint).await?;
                            Ok(Synced { created: usize::from(conflict.is_none()), ..Synced::default() })
                        }
                    }
                }
                .boxed()
            })
            .collect();
        let done: Vec<Synced> = stream::iter(runs).buffer_unordered(COPY_CONCURRENCY).try_collect().await?;
        Ok(done.into_iter().fold(Synced { read, ..Synced::default() }, Synced::add))
    }

    /// Puts `copy` back to `proto` where it drifted (metadata and spec replaced, then status), records what it holds
    /// now, and answers whether it wrote.
    async fn put_back(
        &self,
        proto: &ClusterServiceVersion,
        copy: &ClusterServiceVersion,
        fingerprint: Fingerprint,
    ) -> Result<bool, ClientError> {
        let namespace = copy.namespace().unwrap_or_default();
        let name = copy.name_any();
        let drifted = drift(copy, proto);
        let objects = self.client.namespaced::<ClusterServiceVersion>(&namespace);
        let mut current = copy.clone();
        if drifted.object || drifted.status {
            self.ledger.writing(&namespace, &name, fingerprint);
        }
        let written = self.write_drifted(&objects, proto, &mut current, drifted.object).await;
        if let Err(error) = written {
            self.ledger.forget(&namespace, &name);
            return Err(error);
        }
        self.ledger.wrote(&namespace, &name, current.metadata.resource_version.as_deref(), fingerprint);
        Ok(drifted.object || drifted.status)
    }

    /// Replaces what drifted of `current` (metadata and spec when `object`, then status), leaving it as written.
    async fn write_drifted(
        &self,
        objects: &crate::controller::client::Objects<ClusterServiceVersion>,
        proto: &ClusterServiceVersion,
        current: &mut ClusterServiceVersion,
        object: bool,
    ) -> Result<(), ClientError> {
        let name = current.name_any();
        if object {
            let mut replacement = proto.clone();
            replacement.metadata.namespace = current.metadata.namespace.clone();
            replacement.metadata.resource_version = current.metadata.resource_version.clone();
            replacement.metadata.uid = current.metadata.uid.clone();
            replacement.status = current.status.take();
            *current = objects.replace(&name, &replacement).await?;
        }
        if drift(current, proto).status {
            current.status = proto.status.clone();
            *current = objects.replace_status(&name, current).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    use super::*;

    type Copy = PartialObjectMeta<ClusterServiceVersion>;
    type Seen = Result<Event<Copy>, kube::runtime::watcher::Error>;

    /// The watch of copies: its store and its listing, as the copied-CSV loop's watch sets them.
    struct Copies {
        writer: Writer<Copy>,
        listing: Box<dyn FnMut(&Seen) + Send>,
    }

    impl Copies {
        fn apply_watcher_event(&mut self, event: &Event<Copy>) {
            self.writer.apply_watcher_event(event);
            (self.listing)(&Ok(event.clone()));
        }
    }

    /// A copier whose writes fail at once (nothing answers at its address).
    fn copier() -> (Copier, Copies) {
        let (copies, writer) = kube::runtime::reflector::store();
        let (listing, listed) = Listing::new();
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = ControllerClient::new(kube::Client::try_from(config).expect("client"), "test");
        let (wake, _woken) = tokio::sync::mpsc::unbounded_channel();
        let copier = Copier::new(client, copies, listed, Arc::default(), Duration::from_secs(3600), wake);
        (copier, Copies { writer, listing: Box::new(listing) })
    }

    fn copy_of(original: &str, at: &str) -> PartialObjectMeta<ClusterServiceVersion> {
        serde_json::from_value(serde_json::json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {"name": original, "namespace": at, "labels": {COPIED_FROM_LABEL: "ops"}}}))
        .expect("copy")
    }

    fn request(wanted: &[&str]) -> CopyRequest {
        let original = serde_json::from_value(serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion", "metadata": {"name": "a", "namespace": "ops"},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}}}))
        .expect("csv");
        CopyRequest { original, wanted: wanted.iter().map(|at| (*at).to_owned()).collect() }
    }

    async fn until_idle(copier: &Copier) {
        let key = ("ops".to_owned(), "a".to_owned());
        tokio::time::timeout(Duration::from_secs(10), async {
            while copier.shared.queue.holds(&key) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the request is done");
    }

    #[tokio::test]
    async fn an_original_may_have_copies_until_the_watch_listed_them_and_then_as_it_shows() {
        let (copier, mut writer) = copier();
        assert!(copier.may_have_copies("ops", "a"), "not listed yet: any copy may be there");
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(copy_of("a", "x")));
        writer.apply_watcher_event(&Event::InitDone);
        assert!(copier.may_have_copies("ops", "a"), "the watch holds a copy");
        assert!(!copier.may_have_copies("ops", "b"), "a copy of another original");
        assert!(!copier.may_have_copies("elsewhere", "a"), "a copy of a namesake elsewhere");
    }

    #[tokio::test]
    async fn an_original_whose_last_request_wanted_copies_may_have_them_before_the_watch_shows_them() {
        let (copier, mut writer) = copier();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        assert!(!copier.may_have_copies("ops", "a"), "listed, none there, none asked for");
        copier.request(request(&["x"]));
        assert!(copier.may_have_copies("ops", "a"), "asked for");
        let worker = tokio::spawn(copier.clone().work());
        until_idle(&copier).await;
        assert!(copier.may_have_copies("ops", "a"), "done with it, the copy not in the watch");
        copier.request(request(&[]));
        until_idle(&copier).await;
        assert!(!copier.may_have_copies("ops", "a"), "its last request wanted none, and none is there");
        worker.abort();
    }
}
