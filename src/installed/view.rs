//! The Installed API's one cache and its history (pure). The server keeps the CSVs (never copies), Subscriptions and
//! namespace names it watches, and per installed operator — not per namespace — the Installed object it shows
//! (its namespace left to the request), the namespaces it watches and its row. Every change to that is recorded,
//! with the composite resourceVersion of seed 002's 'Watching' (`clusterserviceversions:RV,namespaces:RV,
//! subscriptions:RV`) at which it happened, in a bounded log: a watch resumes from any version the log still
//! holds, and one older is answered `410 Gone`. Memory is the cache plus one entry per operator and the log, flat
//! in the number of namespaces.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use kube::ResourceExt;
use serde_json::{json, Value};

use super::synthesize::{installed, row, tracked, Watches};
use super::table::CompositeVersion;
use crate::api::v1alpha1::{ClusterServiceVersion, Subscription};
use crate::legacy::membership::is_copied;

/// The resources tracked, as they are named in the composite resourceVersion.
pub const CSVS: &str = "clusterserviceversions";
pub const SUBSCRIPTIONS: &str = "subscriptions";
pub const NAMESPACES: &str = "namespaces";

/// How many changes the log keeps for resuming watches.
pub const DEFAULT_HISTORY: usize = 4096;

/// One installed operator as the API shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The Installed object without namespace and resourceVersion (those of the request and the change).
    pub object: Value,
    pub watches: Watches,
    /// Seed 002's row.
    pub cells: [String; 6],
    /// The composite resourceVersion at which it last changed.
    pub version: String,
}

impl Entry {
    fn same_as(&self, other: &Entry) -> bool {
        self.object == other.object && self.watches == other.watches && self.cells == other.cells
    }

    /// The Installed object of this operator in `namespace`, at `version` (its own for a list; the change's
    /// for a watch event, as a deleted object carries the version of its deletion).
    pub fn object_in(&self, namespace: &str, version: &str) -> Value {
        let mut object = self.object.clone();
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["resourceVersion"] = json!(version);
        object
    }

    /// Only the metadata of [`Entry::object_in`]: what a Table row carries unless the whole object is asked for.
    pub fn metadata_in(&self, namespace: &str, version: &str) -> Value {
        let mut metadata = self.object["metadata"].clone();
        metadata["namespace"] = json!(namespace);
        metadata["resourceVersion"] = json!(version);
        json!({"metadata": metadata})
    }

    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// What changed, at one composite resourceVersion.
#[derive(Clone, Debug)]
pub enum Change {
    /// An operator's Installed objects changed, appeared or went (`before`/`after` absent); `namespaces` are those
    /// that existed then.
    Operator { before: Option<Arc<Entry>>, after: Option<Arc<Entry>>, namespaces: Arc<BTreeSet<String>> },
    /// A namespace appeared or went, and with it the Installed objects of the operators watching it.
    Namespace { name: String, exists: bool, entries: Vec<Arc<Entry>> },
}

/// A change and the version it brought the view to.
#[derive(Clone, Debug)]
pub struct Logged {
    pub version: String,
    pub change: Change,
}

/// What the watches of the cluster said.
#[derive(Clone, Debug)]
pub enum Update {
    Csv(ClusterServiceVersion),
    CsvDeleted(ClusterServiceVersion),
    Subscription(Subscription),
    SubscriptionDeleted(Subscription),
    Namespace {
        name: String,
        resource_version: String,
    },
    NamespaceDeleted {
        name: String,
        resource_version: String,
    },
    /// A watch listed its resource again (at start, or after its own 410): what the list held.
    CsvsListed(Vec<ClusterServiceVersion>),
    SubscriptionsListed(Vec<Subscription>),
    NamespacesListed(Vec<(String, String)>),
}

/// A watch asked to resume from a version the log no longer holds (or never held).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("too old resource version: {asked} ({current})")]
pub struct Expired {
    pub asked: String,
    pub current: String,
}

type Key = (String, String);

/// The cache, the operators' entries and the log.
#[derive(Debug)]
pub struct View {
    csvs: BTreeMap<Key, ClusterServiceVersion>,
    subscriptions: BTreeMap<Key, Subscription>,
    namespaces: Arc<BTreeSet<String>>,
    versions: CompositeVersion,
    entries: BTreeMap<Key, Arc<Entry>>,
    log: VecDeque<Arc<Logged>>,
    /// The version before the log's first change.
    base: String,
    history: usize,
}

fn key_of(object: &impl ResourceExt) -> Key {
    (object.namespace().unwrap_or_default(), object.name_any())
}

fn version_of(object: &impl ResourceExt) -> String {
    object.resource_version().unwrap_or_default()
}

/// The newest of resourceVersions a list held: what its resource is known at. Kubernetes' resourceVersions are
/// opaque but numeric in every store it has; a non-numeric one is taken as it comes.
fn newest(versions: impl Iterator<Item = String>) -> Option<String> {
    versions.max_by(|a, b| match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => a.cmp(b),
    })
}

impl View {
    pub fn new(history: usize) -> Self {
        let mut versions = CompositeVersion::default();
        for resource in [CSVS, NAMESPACES, SUBSCRIPTIONS] {
            versions.0.insert(resource.to_owned(), "0".to_owned());
        }
        let base = versions.format();
        Self {
            csvs: BTreeMap::new(),
            subscriptions: BTreeMap::new(),
            namespaces: Arc::new(BTreeSet::new()),
            versions,
            entries: BTreeMap::new(),
            log: VecDeque::new(),
            base,
            history: history.max(1),
        }
    }

    /// The composite resourceVersion of what the view holds now.
    pub fn version(&self) -> String {
        self.versions.format()
    }

    pub fn namespace_exists(&self, namespace: &str) -> bool {
        self.namespaces.contains(namespace)
    }

    /// Takes in one update; answers the changes it made, as logged.
    pub fn apply(&mut self, update: Update) -> Vec<Arc<Logged>> {
        let mut touched: BTreeSet<String> = BTreeSet::new();
        match update {
            Update::Csv(csv) => {
                self.bump(CSVS, version_of(&csv));
                touched.insert(csv.namespace().unwrap_or_default());
                if is_copied(&csv) {
                    self.csvs.remove(&key_of(&csv));
                } else {
                    self.csvs.insert(key_of(&csv), csv);
                }
            }
            Update::CsvDeleted(csv) => {
                self.bump(CSVS, version_of(&csv));
                touched.insert(csv.namespace().unwrap_or_default());
                self.csvs.remove(&key_of(&csv));
            }
            Update::Subscription(subscription) => {
                self.bump(SUBSCRIPTIONS, version_of(&subscription));
                touched.insert(subscription.namespace().unwrap_or_default());
                self.subscriptions.insert(key_of(&subscription), subscription);
            }
            Update::SubscriptionDeleted(subscription) => {
                self.bump(SUBSCRIPTIONS, version_of(&subscription));
                touched.insert(subscription.namespace().unwrap_or_default());
                self.subscriptions.remove(&key_of(&subscription));
            }
            Update::CsvsListed(csvs) => {
                if let Some(version) = newest(csvs.iter().map(version_of)) {
                    self.bump(CSVS, version);
                }
                touched.extend(self.csvs.keys().map(|(namespace, _)| namespace.clone()));
                self.csvs = csvs.into_iter().filter(|csv| !is_copied(csv)).map(|csv| (key_of(&csv), csv)).collect();
                touched.extend(self.csvs.keys().map(|(namespace, _)| namespace.clone()));
            }
            Update::SubscriptionsListed(subscriptions) => {
                if let Some(version) = newest(subscriptions.iter().map(version_of)) {
                    self.bump(SUBSCRIPTIONS, version);
                }
                touched.extend(self.subscriptions.keys().map(|(namespace, _)| namespace.clone()));
                self.subscriptions = subscriptions.into_iter().map(|s| (key_of(&s), s)).collect();
                touched.extend(self.subscriptions.keys().map(|(namespace, _)| namespace.clone()));
            }
            Update::Namespace { name, resource_version } => {
                self.bump(NAMESPACES, resource_version);
                return self.namespace_changed(&name, true).into_iter().collect();
            }
            Update::NamespaceDeleted { name, resource_version } => {
                self.bump(NAMESPACES, resource_version);
                return self.namespace_changed(&name, false).into_iter().collect();
            }
            Update::NamespacesListed(namespaces) => {
                if let Some(version) = newest(namespaces.iter().map(|(_, version)| version.clone())) {
                    self.bump(NAMESPACES, version);
                }
                let listed: BTreeSet<String> = namespaces.into_iter().map(|(name, _)| name).collect();
                let gone: Vec<String> = self.namespaces.difference(&listed).cloned().collect();
                let new: Vec<String> = listed.difference(&self.namespaces).cloned().collect();
                let mut logged = Vec::new();
                for name in gone {
                    logged.extend(self.namespace_changed(&name, false));
                }
                for name in new {
                    logged.extend(self.namespace_changed(&name, true));
                }
                return logged;
            }
        }
        let mut logged = Vec::new();
        for namespace in touched {
            logged.extend(self.recompute(&namespace));
        }
        logged
    }

    fn bump(&mut self, resource: &str, version: String) {
        if !version.is_empty() {
            self.versions.0.insert(resource.to_owned(), version);
        }
    }

    fn namespace_changed(&mut self, name: &str, exists: bool) -> Option<Arc<Logged>> {
        if self.namespaces.contains(name) == exists {
            return None;
        }
        let mut namespaces = (*self.namespaces).clone();
        if exists {
            namespaces.insert(name.to_owned());
        } else {
            namespaces.remove(name);
        }
        self.namespaces = Arc::new(namespaces);
        let mut entries: Vec<Arc<Entry>> =
            self.entries.values().filter(|entry| entry.watches.includes(name)).cloned().collect();
        entries.sort_by(|a, b| a.name().cmp(b.name()));
        Some(self.record(Change::Namespace { name: name.to_owned(), exists, entries }))
    }

    /// Synthesizes the operators of one namespace again (an operator's object depends on its CSV, the other CSVs
    /// and the Subscriptions of its namespace only); records what differs.
    fn recompute(&mut self, namespace: &str) -> Vec<Arc<Logged>> {
        let range = (namespace.to_owned(), String::new())..;
        let csvs: Vec<ClusterServiceVersion> =
            self.csvs.range(range.clone()).take_while(|((ns, _), _)| ns == namespace).map(|(_, c)| c.clone()).collect();
        let subscriptions: Vec<Subscription> = self
            .subscriptions
            .range(range.clone())
            .take_while(|((ns, _), _)| ns == namespace)
            .map(|(_, s)| s.clone())
            .collect();
        let version = self.version();
        let mut fresh: BTreeMap<Key, Entry> = BTreeMap::new();
        for operator in tracked(&csvs, &subscriptions) {
            let mut object = installed(&operator, "");
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.remove("namespace");
            }
            let entry = Entry {
                object,
                watches: operator.watches.clone(),
                cells: row(&operator, &csvs),
                version: version.clone(),
            };
            fresh.insert(key_of(operator.csv), entry);
        }
        let before: Vec<Key> =
            self.entries.range(range).take_while(|((ns, _), _)| ns == namespace).map(|(k, _)| k.clone()).collect();
        let mut logged = Vec::new();
        for key in before {
            if !fresh.contains_key(&key) {
                if let Some(old) = self.entries.remove(&key) {
                    let namespaces = self.namespaces.clone();
                    logged.push(self.record(Change::Operator { before: Some(old), after: None, namespaces }));
                }
            }
        }
        for (key, entry) in fresh {
            let old = self.entries.get(&key).cloned();
            if old.as_ref().is_some_and(|old| old.same_as(&entry)) {
                continue;
            }
            let entry = Arc::new(entry);
            self.entries.insert(key, entry.clone());
            let namespaces = self.namespaces.clone();
            logged.push(self.record(Change::Operator { before: old, after: Some(entry), namespaces }));
        }
        logged
    }

    fn record(&mut self, change: Change) -> Arc<Logged> {
        let logged = Arc::new(Logged { version: self.version(), change });
        self.log.push_back(logged.clone());
        while self.log.len() > self.history {
            if let Some(dropped) = self.log.pop_front() {
                self.base = dropped.version.clone();
            }
        }
        logged
    }

    /// The operators listed in `namespace` (every namespace when `None`), as (namespace, entry) in namespace then
    /// name order. A namespace that does not exist lists nothing.
    pub fn listed(&self, namespace: Option<&str>) -> Vec<(String, Arc<Entry>)> {
        let namespaces: Vec<&String> = match namespace {
            Some(namespace) => self.namespaces.get(namespace).into_iter().collect(),
            None => self.namespaces.iter().collect(),
        };
        let mut listed = Vec::new();
        for namespace in namespaces {
            let mut here: Vec<&Arc<Entry>> =
                self.entries.values().filter(|entry| entry.watches.includes(namespace)).collect();
            here.sort_by(|a, b| a.name().cmp(b.name()));
            listed.extend(here.into_iter().map(|entry| (namespace.clone(), entry.clone())));
        }
        listed
    }

    /// The changes after `version`, to resume a watch from; `Expired` when the log no longer reaches back to it.
    pub fn since(&self, version: &str) -> Result<Vec<Arc<Logged>>, Expired> {
        let expired = || Expired { asked: version.to_owned(), current: self.version() };
        let asked = CompositeVersion::parse(version).map_err(|_| expired())?.format();
        if asked == self.version() {
            return Ok(Vec::new());
        }
        if asked == self.base {
            return Ok(self.log.iter().cloned().collect());
        }
        let position = self.log.iter().rposition(|logged| logged.version == asked).ok_or_else(expired)?;
        Ok(self.log.iter().skip(position + 1).cloned().collect())
    }
}

/// A watch event: its type, the operator and the namespace of its Installed object, and the version it happened at.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub kind: &'static str,
    pub namespace: String,
    pub entry: Arc<Entry>,
    pub version: String,
}

impl Event {
    pub fn object(&self) -> Value {
        self.entry.object_in(&self.namespace, &self.version)
    }
}

/// The events a watch of `scope` (a namespace, or all when `None`) sees for one change.
pub fn events(logged: &Logged, scope: Option<&str>) -> Vec<Event> {
    let in_scope = |namespace: &str| scope.is_none_or(|scope| scope == namespace);
    match &logged.change {
        Change::Namespace { name, exists, entries } => {
            if !in_scope(name) {
                return Vec::new();
            }
            let kind = if *exists { "ADDED" } else { "DELETED" };
            entries
                .iter()
                .map(|entry| Event {
                    kind,
                    namespace: name.clone(),
                    entry: entry.clone(),
                    version: logged.version.clone(),
                })
                .collect()
        }
        Change::Operator { before, after, namespaces } => {
            let mut out = Vec::new();
            let candidates: Vec<&String> = match scope {
                Some(scope) => namespaces.get(scope).into_iter().collect(),
                None => namespaces.iter().collect(),
            };
            for namespace in candidates {
                let was = before.as_ref().filter(|entry| entry.watches.includes(namespace));
                let is = after.as_ref().filter(|entry| entry.watches.includes(namespace));
                let (kind, entry) = match (was, is) {
                    (None, None) => continue,
                    (None, Some(is)) => ("ADDED", is),
                    (Some(_), Some(is)) => ("MODIFIED", is),
                    (Some(was), None) => ("DELETED", was),
                };
                out.push(Event {
                    kind,
                    namespace: namespace.clone(),
                    entry: entry.clone(),
                    version: logged.version.clone(),
                });
            }
            out
        }
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
