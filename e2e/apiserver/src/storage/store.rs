//! The emulator's storage, with kube-apiserver's semantics at that layer: one resourceVersion sequence for all
//! objects, 409 Conflict on a stale write, uid and creationTimestamp set once, lists in name order with pagination,
//! and watches that replay history from a resourceVersion (410 Gone once it has been compacted away) and see
//! objects enter and leave their selectors as ADDED and DELETED.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio::sync::{broadcast, watch as signal};

use crate::storage::selectors::{FieldSelector, LabelSelector};

/// A resource: API group (`""` for core) and plural name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceId {
    pub group: String,
    pub resource: String,
}

impl ResourceId {
    pub fn new(group: &str, resource: &str) -> Self {
        Self { group: group.to_owned(), resource: resource.to_owned() }
    }

    /// `resource.group`, or `resource` for the core group, as Kubernetes names it in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// A change, with the object before it (for selector transitions).
#[derive(Clone, Debug)]
pub struct Change {
    pub resource: ResourceId,
    pub namespace: String,
    pub kind: EventType,
    pub object: Value,
    pub previous: Option<Value>,
    pub revision: u64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    #[error("{resource} \"{name}\" not found")]
    NotFound { resource: String, name: String },
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists { resource: String, name: String },
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {reason}")]
    Conflict { resource: String, name: String, reason: String },
    #[error("{0}")]
    Gone(String),
    #[error("{0}")]
    BadRequest(String),
}

impl StoreError {
    /// The conflict of a write made against an older resourceVersion than the stored one.
    pub fn modified(resource: &ResourceId, name: &str) -> Self {
        Self::Conflict {
            resource: resource.qualified(),
            name: name.to_owned(),
            reason: "the object has been modified; please apply your changes to the latest version and try again"
                .into(),
        }
    }

    /// The HTTP status code and the `Status` reason kube-apiserver answers with.
    pub fn code_and_reason(&self) -> (u16, &'static str) {
        match self {
            Self::NotFound { .. } => (404, "NotFound"),
            Self::AlreadyExists { .. } => (409, "AlreadyExists"),
            Self::Conflict { .. } => (409, "Conflict"),
            Self::Gone(_) => (410, "Expired"),
            Self::BadRequest(_) => (400, "BadRequest"),
        }
    }
}

/// Which objects a list or watch is about.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// A namespace, or every namespace (and cluster-scoped objects) with `None`.
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    fn admits(&self, namespace: &str, object: &Value) -> bool {
        let labels: BTreeMap<String, String> =
            serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default();
        self.namespace.as_deref().is_none_or(|wanted| wanted == namespace)
            && self.labels.matches(&labels)
            && self.fields.matches(object)
    }
}

/// One page of a list.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    pub items: Vec<Value>,
    pub revision: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<u64>,
}

type Key = (String, String);

struct Inner {
    revision: u64,
    objects: BTreeMap<ResourceId, BTreeMap<Key, Value>>,
    history: VecDeque<Arc<Change>>,
    /// Watches may start from this revision or later; older ones are compacted.
    oldest_watchable: u64,
}

/// The object store.
pub struct Store {
    inner: Mutex<Inner>,
    changes: broadcast::Sender<Arc<Change>>,
    history_limit: usize,
    /// Counts restarts (`restart_watches`): each ends every open watch.
    restarts: signal::Sender<u64>,
    /// Watches refused as too old (410 Expired), since the start.
    expired: std::sync::atomic::AtomicU64,
}

pub fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn key_of(object: &Value) -> Key {
    (
        object["metadata"]["namespace"].as_str().unwrap_or_default().to_owned(),
        object["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
    )
}

fn revision_of(object: &Value) -> Option<u64> {
    object["metadata"]["resourceVersion"].as_str().and_then(|rv| rv.parse().ok())
}

impl Store {
    /// A store that keeps `history_limit` changes for watches to replay.
    pub fn new(history_limit: usize) -> Self {
        let (changes, _) = broadcast::channel(4096);
        let inner =
            Inner { revision: 1000, objects: BTreeMap::new(), history: VecDeque::new(), oldest_watchable: 1000 };
        let (restarts, _) = signal::channel(0);
        Self { inner: Mutex::new(inner), changes, history_limit, restarts, expired: Default::default() }
    }

    /// Fault injection: ends every open watch and forgets the history, as a kube-apiserver that restarts while
    /// others write (its watch cache starts after every resourceVersion a client has seen). A watch resumed from
    /// before now is refused with 410 Expired, so the client must list again.
    pub fn restart_watches(&self) {
        let mut inner = self.lock();
        inner.revision += 1;
        inner.oldest_watchable = inner.revision;
        inner.history.clear();
        self.restarts.send_modify(|count| *count += 1);
    }

    /// How many watches were refused as too old (410 Expired) so far.
    pub fn expired_watches(&self) -> u64 {
        self.expired.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock poisons it; the store's data is still consistent, as every change is
        // made after its checks pass.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every resource that holds objects.
    pub fn resource_ids(&self) -> Vec<ResourceId> {
        self.lock().objects.iter().filter(|(_, objects)| !objects.is_empty()).map(|(id, _)| id.clone()).collect()
    }

    /// Every object of a resource, in (namespace, name) order.
    pub fn all(&self, resource: &ResourceId) -> Vec<Value> {
        self.matching(resource, |_, _, _| true)
    }

    /// What `read` makes of one stored object, without copying the object; `None` when there is none.
    pub fn read<T>(
        &self,
        resource: &ResourceId,
        namespace: &str,
        name: &str,
        read: impl FnOnce(&Value) -> T,
    ) -> Option<T> {
        let inner = self.lock();
        let object = inner.objects.get(resource)?.get(&(namespace.to_owned(), name.to_owned()))?;
        Some(read(object))
    }

    /// The objects of `resource` that `keep` takes (given each one's namespace, name and content), cloned: only
    /// those are copied (an authorization looks at every binding for each request, and takes a few).
    pub fn matching(&self, resource: &ResourceId, keep: impl Fn(&str, &str, &Value) -> bool) -> Vec<Value> {
        self.map(resource, |namespace, name, object| keep(namespace, name, object).then(|| object.clone()))
    }

    /// What `read` makes of each object of `resource` it takes, in key order, without copying the others: the
    /// controllers' passes read every object of the cluster each second, and need little of most.
    pub fn map<T>(&self, resource: &ResourceId, mut read: impl FnMut(&str, &str, &Value) -> Option<T>) -> Vec<T> {
        let inner = self.lock();
        let Some(objects) = inner.objects.get(resource) else { return Vec::new() };
        objects.iter().filter_map(|((namespace, name), object)| read(namespace, name, object)).collect()
    }

    /// How many objects of `resource` are stored.
    pub fn count(&self, resource: &ResourceId) -> usize {
        self.lock().objects.get(resource).map_or(0, BTreeMap::len)
    }

    /// A receiver of every change, for the emulator's controllers.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.changes.subscribe()
    }

    /// The latest resourceVersion.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    fn record(&self, inner: &mut Inner, change: Change) {
        let change = Arc::new(change);
        inner.history.push_back(change.clone());
        while inner.history.len() > self.history_limit {
            if let Some(dropped) = inner.history.pop_front() {
                inner.oldest_watchable = dropped.revision;
            }
        }
        let _ = self.changes.send(change);
    }

    /// Applies one write: the next resourceVersion, stamped on the object, which is stored (or removed, for a
    /// deletion) and recorded for watches. Returns the object as written.
    fn commit(
        &self,
        inner: &mut Inner,
        resource: &ResourceId,
        key: Key,
        kind: EventType,
        mut object: Value,
        previous: Option<Value>,
    ) -> Value {
        inner.revision += 1;
        let revision = inner.revision;
        object["metadata"]["resourceVersion"] = json!(revision.to_string());
        let objects = inner.objects.entry(resource.clone()).or_default();
        if kind == EventType::Deleted {
            objects.remove(&key);
        } else {
            objects.insert(key.clone(), object.clone());
        }
        let change =
            Change { resource: resource.clone(), namespace: key.0, kind, object: object.clone(), previous, revision };
        self.record(inner, change);
        object
    }

    /// Stores a new object: uid, creationTimestamp and resourceVersion are set here.
    pub fn create(&self, resource: &ResourceId, mut object: Value) -> Result<Value, StoreError> {
        let mut inner = self.lock();
        let key = key_of(&object);
        if inner.objects.get(resource).is_some_and(|objects| objects.contains_key(&key)) {
            return Err(StoreError::AlreadyExists { resource: resource.qualified(), name: key.1 });
        }
        let metadata = &mut object["metadata"];
        metadata["uid"] = json!(uuid::Uuid::new_v4().to_string());
        metadata["creationTimestamp"] = json!(now());
        Ok(self.commit(&mut inner, resource, key, EventType::Added, object, None))
    }

    pub fn get(&self, resource: &ResourceId, namespace: &str, name: &str) -> Result<Value, StoreError> {
        self.lock()
            .objects
            .get(resource)
            .and_then(|objects| objects.get(&(namespace.to_owned(), name.to_owned())))
            .cloned()
            .ok_or_else(|| StoreError::NotFound { resource: resource.qualified(), name: name.to_owned() })
    }

    /// Replaces an object. When `object` carries a resourceVersion, it must be the stored one (optimistic
    /// concurrency); uid and creationTimestamp are kept from the stored object.
    pub fn update(&self, resource: &ResourceId, mut object: Value) -> Result<Value, StoreError> {
        let mut inner = self.lock();
        let key = key_of(&object);
        let stored = inner
            .objects
            .get(resource)
            .and_then(|objects| objects.get(&key))
            .cloned()
            .ok_or_else(|| StoreError::NotFound { resource: resource.qualified(), name: key.1.clone() })?;
        if revision_of(&object).is_some_and(|expected| Some(expected) != revision_of(&stored)) {
            return Err(StoreError::modified(resource, &key.1));
        }
        let stored_uid = stored["metadata"]["uid"].clone();
        if let Some(uid) = object["metadata"]["uid"].as_str() {
            if Some(uid) != stored_uid.as_str() {
                return Err(StoreError::Conflict {
                    resource: resource.qualified(),
                    name: key.1,
                    reason: format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        stored_uid.as_str().unwrap_or_default()
                    ),
                });
            }
        }
        let metadata = &mut object["metadata"];
        metadata["uid"] = stored_uid;
        metadata["creationTimestamp"] = stored["metadata"]["creationTimestamp"].clone();
        metadata["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
        // As kube-apiserver: a write that changes nothing but the times of managed-fields entries is no write at
        // all (no new resourceVersion, no watch event), or controllers that write their status would wake
        // themselves forever.
        if without_managed_times(&object) == without_managed_times(&stored) {
            return Ok(stored);
        }
        Ok(self.commit(&mut inner, resource, key, EventType::Modified, object, Some(stored)))
    }

    /// Removes an object; `expected_revision`, when given, must be the stored one.
    pub fn delete(
        &self,
        resource: &ResourceId,
        namespace: &str,
        name: &str,
        expected_revision: Option<u64>,
    ) -> Result<Value, StoreError> {
        let mut inner = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        let not_found = || StoreError::NotFound { resource: resource.qualified(), name: name.to_owned() };
        let stored =
            inner.objects.get(resource).and_then(|objects| objects.get(&key)).cloned().ok_or_else(not_found)?;
        if expected_revision.is_some_and(|expected| Some(expected) != revision_of(&stored)) {
            return Err(StoreError::modified(resource, name));
        }
        Ok(self.commit(&mut inner, resource, key, EventType::Deleted, stored.clone(), Some(stored)))
    }

    /// A page of the objects `filter` admits, in (namespace, name) order, after the one `continue_token` names.
    pub fn list(
        &self,
        resource: &ResourceId,
        filter: &Filter,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<Page, StoreError> {
        let inner = self.lock();
        let after = continue_token.map(decode_continue).transpose()?;
        if let Some((revision, _)) = &after {
            if *revision < inner.oldest_watchable {
                return Err(StoreError::Gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".into()));
            }
        }
        let matching: Vec<(&Key, &Value)> = inner
            .objects
            .get(resource)
            .into_iter()
            .flatten()
            .filter(|(key, _)| after.as_ref().is_none_or(|(_, last)| *key > last))
            .filter(|(key, object)| filter.admits(&key.0, object))
            .collect();
        let revision = after.as_ref().map_or(inner.revision, |(revision, _)| *revision);
        let take = limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let items: Vec<Value> = matching.iter().take(take).map(|(_, object)| (*object).clone()).collect();
        let remaining = matching.len().saturating_sub(items.len());
        let continue_token = (remaining > 0)
            .then(|| matching.get(items.len().saturating_sub(1)).map(|(key, _)| encode_continue(revision, key)))
            .flatten();
        Ok(Page { items, revision, continue_token, remaining: (remaining > 0).then_some(remaining as u64) })
    }

    /// Starts a watch. From `Some(revision)`, the changes after it are replayed first (410 Gone when compacted);
    /// from `None`, every admitted object comes first as ADDED, as a watch without a resourceVersion does.
    pub fn watch(&self, resource: &ResourceId, filter: Filter, from: Option<u64>) -> Result<Watch, StoreError> {
        let inner = self.lock();
        let mut backlog = Vec::new();
        match from {
            Some(revision) if revision < inner.oldest_watchable => {
                self.expired.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Err(StoreError::Gone(format!(
                    "too old resource version: {revision} ({})",
                    inner.oldest_watchable
                )));
            }
            Some(revision) => {
                for change in inner.history.iter().filter(|c| c.revision > revision && &c.resource == resource) {
                    if let Some(event) = as_seen_by(change, &filter) {
                        backlog.push(event);
                    }
                }
            }
            None => {
                for ((namespace, _), object) in inner.objects.get(resource).into_iter().flatten() {
                    if filter.admits(namespace, object) {
                        backlog.push(WatchEvent {
                            kind: EventType::Added,
                            object: object.clone(),
                            revision: revision_of(object).unwrap_or_default(),
                        });
                    }
                }
            }
        }
        // Subscribing under the lock means no change falls between the backlog and the live stream.
        let receiver = self.changes.subscribe();
        let restarted = self.restarts.subscribe();
        Ok(Watch { resource: resource.clone(), filter, backlog: backlog.into(), receiver, restarted })
    }
}

fn encode_continue(revision: u64, key: &Key) -> String {
    let raw = json!({"rv": revision, "namespace": key.0, "name": key.1}).to_string();
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(u64, Key), StoreError> {
    let invalid = || StoreError::BadRequest(format!("invalid continue token {token:?}"));
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| token.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
        .collect::<Option<_>>()
        .ok_or_else(invalid)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let revision = value["rv"].as_u64().ok_or_else(invalid)?;
    let key = (
        value["namespace"].as_str().ok_or_else(invalid)?.to_owned(),
        value["name"].as_str().ok_or_else(invalid)?.to_owned(),
    );
    Ok((revision, key))
}

/// An event as one watcher sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchEvent {
    pub kind: EventType,
    pub object: Value,
    pub revision: u64,
}

/// How a change looks through a filter: an object that starts matching is ADDED, one that stops is DELETED.
fn as_seen_by(change: &Change, filter: &Filter) -> Option<WatchEvent> {
    let now = filter.admits(&change.namespace, &change.object) && change.kind != EventType::Deleted;
    let before = change.previous.as_ref().is_some_and(|previous| filter.admits(&change.namespace, previous));
    let kind = match (change.kind, before, now) {
        (EventType::Deleted, true, _) => EventType::Deleted,
        (EventType::Deleted, false, _) => return None,
        (_, false, true) => EventType::Added,
        (_, true, true) => EventType::Modified,
        (_, true, false) => EventType::Deleted,
        (_, false, false) => return None,
    };
    Some(WatchEvent { kind, object: change.object.clone(), revision: change.revision })
}

/// A running watch.
pub struct Watch {
    resource: ResourceId,
    filter: Filter,
    backlog: VecDeque<WatchEvent>,
    receiver: broadcast::Receiver<Arc<Change>>,
    restarted: signal::Receiver<u64>,
}

impl Watch {
    /// The next event already waiting (the initial or replayed ones), without waiting for new ones.
    pub fn take_backlog(&mut self) -> Option<WatchEvent> {
        self.backlog.pop_front()
    }

    /// The next event; `Err(Gone)` when this watcher fell too far behind (it must list again), `Ok(None)` when the
    /// store is gone or restarted its watches.
    pub async fn next(&mut self) -> Result<Option<WatchEvent>, StoreError> {
        if let Some(event) = self.backlog.pop_front() {
            return Ok(Some(event));
        }
        loop {
            let received = tokio::select! {
                biased;
                _ = self.restarted.changed() => return Ok(None),
                received = self.receiver.recv() => received,
            };
            match received {
                Ok(change) if change.resource == self.resource => {
                    if let Some(event) = as_seen_by(&change, &self.filter) {
                        return Ok(Some(event));
                    }
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Err(StoreError::Gone("the watch fell behind; list again".into()));
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
            }
        }
    }
}

/// An object with the `time` of its managed-fields entries removed.
fn without_managed_times(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(entries) = copy.pointer_mut("/metadata/managedFields").and_then(Value::as_array_mut) {
        for entry in entries {
            if let Some(fields) = entry.as_object_mut() {
                fields.remove("time");
            }
        }
    }
    copy
}
