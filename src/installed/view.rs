//! The Installed API's one cache and its history (pure). The server keeps the CSVs (never copies), Subscriptions and
//! namespace names it watches, the OperatorGroups' target namespaces and the CSVs each Install applied (what says
//! where an operator is listed: `synthesize::watches`), and per installed operator — not per namespace — the
//! Installed object it shows (its namespace left to the request), the namespaces it watches and its row. What each
//! update changes is recorded, with the composite resourceVersion of seed 002's 'Watching'
//! (`clusterserviceversions:RV,installs:RV,namespaces:RV,operatorgroups:RV,subscriptions:RV`, plus
//! `changes:<epoch>-<count>` naming the state exactly) it brought the view to, in a bounded log: a watch resumes from
//! any version this view gave whose updates the log still holds, and any other is answered `410 Gone`. Memory is the
//! cache plus one entry per operator and the log (which holds operators' entries, never namespace lists), flat in the
//! number of namespaces.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use kube::ResourceExt;
use serde_json::{json, Value};

use super::synthesize::{group_targets, installed, row, tracked, Applied, Groups, Installs, Reach, Watches};
use super::table::CompositeVersion;
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::is_copied;
use crate::api::v1alpha1::{ClusterServiceVersion, Subscription};
use crate::api::v2alpha1::Install;

/// The resources tracked, as they are named in the composite resourceVersion.
pub const CSVS: &str = "clusterserviceversions";
pub const SUBSCRIPTIONS: &str = "subscriptions";
pub const NAMESPACES: &str = "namespaces";
pub const OPERATOR_GROUPS: &str = "operatorgroups";
pub const INSTALLS: &str = "installs";
/// The part of the composite version that counts the view's changes (not a resource: it names the state exactly).
pub const CHANGES: &str = "changes";

/// How many changes the log keeps for resuming watches. Each holds the Installed objects it changed (an operator's
/// object carries its whole CSV: a few KiB), so the log is most of this API's memory once it is full, as it is on any
/// cluster that has run a while. kube-apiserver's watch cache reaches back about 75 seconds of a resource's events
/// (at least 100), and every client lists again after a `410 Gone`: 256 updates reach back further than that at a
/// bounded cost. A full log of 1,024 held about 5 MiB at the scale bench (a hundred operators' objects several times
/// over, from the cold start's phases); this one should hold about a quarter of that (not measured apart).
pub const DEFAULT_HISTORY: usize = 256;

/// One installed operator as the API shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The Installed object without namespace and resourceVersion (those of the request and the change), as JSON
    /// text: the log keeps hundreds of entries, and a parsed object (a map and a string per field) takes several
    /// times the room of its text. It is parsed when served.
    object: Box<str>,
    /// Its metadata, parsed: what selectors, Table rows and ordering read.
    metadata: Value,
    pub watches: Watches,
    /// Seed 002's row.
    pub cells: [String; 6],
    /// The composite resourceVersion at which it last changed.
    pub version: String,
}

impl Entry {
    pub fn new(object: &Value, watches: Watches, cells: [String; 6], version: String) -> Self {
        Self { object: object.to_string().into(), metadata: object["metadata"].clone(), watches, cells, version }
    }

    fn same_as(&self, other: &Entry) -> bool {
        self.object == other.object && self.watches == other.watches && self.cells == other.cells
    }

    /// The Installed object of this operator in `namespace`, at `version` (its own for a list; the change's
    /// for a watch event, as a deleted object carries the version of its deletion).
    pub fn object_in(&self, namespace: &str, version: &str) -> Value {
        // The text was written from a `Value` by this process: it parses.
        let mut object: Value = serde_json::from_str(&self.object).unwrap_or(Value::Null);
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["resourceVersion"] = json!(version);
        object
    }

    /// Only the metadata of [`Entry::object_in`]: what a Table row carries unless the whole object is asked for.
    pub fn metadata_in(&self, namespace: &str, version: &str) -> Value {
        let mut metadata = self.metadata.clone();
        metadata["namespace"] = json!(namespace);
        metadata["resourceVersion"] = json!(version);
        json!({"metadata": metadata})
    }

    pub fn labels(&self) -> &Value {
        &self.metadata["labels"]
    }

    pub fn name(&self) -> &str {
        self.metadata["name"].as_str().unwrap_or_default()
    }
}

/// One change an update made.
#[derive(Clone, Debug)]
pub enum Change {
    /// An operator's Installed objects changed, appeared or went (`before`/`after` absent).
    Operator { before: Option<Arc<Entry>>, after: Option<Arc<Entry>> },
    /// A namespace appeared or went, and with it the Installed objects of the operators watching it.
    Namespace { name: String, exists: bool, entries: Vec<Arc<Entry>> },
}

/// What one update changed, and the version it brought the view to: a watch resumes before or after all of it.
#[derive(Clone, Debug)]
pub struct Logged {
    pub version: String,
    pub changes: Vec<Change>,
}

/// What the watches of the cluster said.
#[derive(Clone, Debug)]
pub enum Update {
    Csv(ClusterServiceVersion),
    CsvDeleted(ClusterServiceVersion),
    Subscription(Subscription),
    SubscriptionDeleted(Subscription),
    OperatorGroup(OperatorGroup),
    OperatorGroupDeleted(OperatorGroup),
    Install(Install),
    InstallDeleted(Install),
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
    OperatorGroupsListed(Vec<OperatorGroup>),
    InstallsListed(Vec<Install>),
    NamespacesListed(Vec<(String, String)>),
}

/// Why a watch cannot resume from the version it asked for.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// Older than what the log still reaches back to: the client lists again (`410 Expired`).
    #[error("too old resource version: {asked} ({current})")]
    Expired { asked: String, current: String },
    /// Not a composite version of this API (`400`).
    #[error("invalid resource version: {0}")]
    Invalid(String),
}

/// Whether resourceVersion `a` comes after `b`. Kubernetes' resourceVersions are opaque to clients but numeric in
/// every store it has; versions of one resource that do not parse are only told apart by being different.
fn after(a: &str, b: &str) -> bool {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a > b,
        _ => a != b,
    }
}

type Key = (String, String);

/// The cache, the operators' entries and the log.
#[derive(Debug)]
pub struct View {
    csvs: BTreeMap<Key, ClusterServiceVersion>,
    subscriptions: BTreeMap<Key, Subscription>,
    /// Each OperatorGroup's `status.namespaces`, nothing else of it.
    groups: Groups,
    /// The CSVs each Install applied, by its status; nothing else of it.
    installs: Installs,
    namespaces: Arc<BTreeSet<String>>,
    versions: CompositeVersion,
    entries: BTreeMap<Key, Arc<Entry>>,
    log: VecDeque<(u64, Arc<Logged>)>,
    /// This view's own name (the process's start): a version another process wrote is never resumed from.
    epoch: String,
    /// How many updates changed something: the `changes` part of the version.
    changed: u64,
    /// The count of updates that left the log: a version whose count is older cannot be resumed from.
    forgotten: u64,
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
    versions.reduce(|newest, version| if after(&version, &newest) { version } else { newest })
}

impl View {
    /// An empty view keeping `history` updates, named `epoch` (unique per process: its start time).
    pub fn new(history: usize, epoch: &str) -> Self {
        let mut versions = CompositeVersion::default();
        for resource in [CSVS, INSTALLS, NAMESPACES, OPERATOR_GROUPS, SUBSCRIPTIONS] {
            versions.0.insert(resource.to_owned(), "0".to_owned());
        }
        Self {
            csvs: BTreeMap::new(),
            subscriptions: BTreeMap::new(),
            groups: BTreeMap::new(),
            installs: BTreeMap::new(),
            namespaces: Arc::new(BTreeSet::new()),
            versions,
            entries: BTreeMap::new(),
            log: VecDeque::new(),
            epoch: epoch.to_owned(),
            changed: 0,
            forgotten: 0,
            history: history.max(1),
        }
    }

    /// The composite resourceVersion of what the view holds now: the tracked resources' versions, and the
    /// `changes` part `<epoch>-<count>` that names the view's state exactly (a re-list that only removes objects
    /// moves no resource's version; a restarted process starts counting again under another epoch).
    pub fn version(&self) -> String {
        let mut versions = self.versions.clone();
        versions.0.insert(CHANGES.to_owned(), format!("{}-{}", self.epoch, self.changed));
        versions.format()
    }

    pub fn namespace_exists(&self, namespace: &str) -> bool {
        self.namespaces.contains(namespace)
    }

    /// Takes in one update; answers what it changed, as logged (nothing when no Installed object changed; the
    /// version moves on all the same).
    pub fn apply(&mut self, update: Update) -> Option<Arc<Logged>> {
        let changes = self.changes(update);
        (!changes.is_empty()).then(|| self.record(changes))
    }

    /// What `update` changed: the operators of the namespaces it touched, synthesized again; for namespaces, the
    /// operators watching those that came or went.
    fn changes(&mut self, update: Update) -> Vec<Change> {
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
            Update::OperatorGroup(group) => self.group_updated(&group, &mut touched),
            Update::OperatorGroupDeleted(group) => {
                self.bump(OPERATOR_GROUPS, version_of(&group));
                touched.insert(group.namespace().unwrap_or_default());
                self.groups.remove(&key_of(&group));
            }
            Update::Install(install) => self.install_updated(&install, &mut touched),
            Update::InstallDeleted(install) => {
                self.bump(INSTALLS, version_of(&install));
                touched.extend(record_namespaces(self.installs.remove(&install.name_any()).as_ref()));
            }
            Update::OperatorGroupsListed(groups) => self.groups_listed(&groups, &mut touched),
            Update::InstallsListed(installs) => self.installs_listed(&installs, &mut touched),
            Update::CsvsListed(csvs) => self.csvs_listed(csvs, &mut touched),
            Update::SubscriptionsListed(subscriptions) => self.subscriptions_listed(subscriptions, &mut touched),
            Update::Namespace { name, resource_version } => {
                self.bump(NAMESPACES, resource_version);
                return self.namespace_changed(&name, true).into_iter().collect();
            }
            Update::NamespaceDeleted { name, resource_version } => {
                self.bump(NAMESPACES, resource_version);
                return self.namespace_changed(&name, false).into_iter().collect();
            }
            Update::NamespacesListed(namespaces) => return self.namespaces_listed(namespaces),
        }
        let mut changes = Vec::new();
        for namespace in touched {
            changes.extend(self.recompute(&namespace));
        }
        changes
    }

    /// A group's targets decide where the operators of its namespace are listed: they are synthesized again (its
    /// namespace `touched`) when the targets change; an update that moves only `lastUpdated` or the spec changes
    /// nothing shown.
    fn group_updated(&mut self, group: &OperatorGroup, touched: &mut BTreeSet<String>) {
        self.bump(OPERATOR_GROUPS, version_of(group));
        let targets = group_targets(group);
        if self.groups.get(&key_of(group)) != Some(&targets) {
            touched.insert(group.namespace().unwrap_or_default());
            self.groups.insert(key_of(group), targets);
        }
    }

    /// An Install decides where its records are listed: the namespaces of the CSVs it applied, before and after,
    /// are `touched` when that list (or its uid) changes, not on every status write.
    fn install_updated(&mut self, install: &Install, touched: &mut BTreeSet<String>) {
        self.bump(INSTALLS, version_of(install));
        let applied = Applied::of(install);
        let before = self.installs.insert(install.name_any(), applied.clone());
        if before.as_ref() != Some(&applied) {
            touched.extend(record_namespaces(before.as_ref()));
            touched.extend(record_namespaces(Some(&applied)));
        }
    }

    /// The OperatorGroups listed again: the namespaces of the groups whose targets changed, came or went are
    /// `touched`, as in `group_updated`.
    fn groups_listed(&mut self, groups: &[OperatorGroup], touched: &mut BTreeSet<String>) {
        if let Some(version) = newest(groups.iter().map(version_of)) {
            self.bump(OPERATOR_GROUPS, version);
        }
        let listed: Groups = groups.iter().map(|group| (key_of(group), group_targets(group))).collect();
        let keys: BTreeSet<&Key> = self.groups.keys().chain(listed.keys()).collect();
        touched.extend(
            keys.into_iter()
                .filter(|key| self.groups.get(*key) != listed.get(*key))
                .map(|(namespace, _)| namespace.clone()),
        );
        self.groups = listed;
    }

    /// The Installs listed again: the namespaces of the records of those whose applied CSVs changed, came or went
    /// are `touched`, as in `install_updated`.
    fn installs_listed(&mut self, installs: &[Install], touched: &mut BTreeSet<String>) {
        if let Some(version) = newest(installs.iter().map(version_of)) {
            self.bump(INSTALLS, version);
        }
        let listed: Installs = installs.iter().map(|install| (install.name_any(), Applied::of(install))).collect();
        for name in self.installs.keys().chain(listed.keys()) {
            let (before, after) = (self.installs.get(name), listed.get(name));
            if before != after {
                touched.extend(record_namespaces(before));
                touched.extend(record_namespaces(after));
            }
        }
        self.installs = listed;
    }

    /// The CSVs listed again (copies left out): every namespace that held one before or holds one now is
    /// `touched`, as a list may have dropped CSVs as well as changed them.
    fn csvs_listed(&mut self, csvs: Vec<ClusterServiceVersion>, touched: &mut BTreeSet<String>) {
        if let Some(version) = newest(csvs.iter().map(version_of)) {
            self.bump(CSVS, version);
        }
        touched.extend(self.csvs.keys().map(|(namespace, _)| namespace.clone()));
        self.csvs = csvs.into_iter().filter(|csv| !is_copied(csv)).map(|csv| (key_of(&csv), csv)).collect();
        touched.extend(self.csvs.keys().map(|(namespace, _)| namespace.clone()));
    }

    /// The Subscriptions listed again: every namespace that held one before or holds one now is `touched`, as a
    /// list may have dropped Subscriptions as well as changed them.
    fn subscriptions_listed(&mut self, subscriptions: Vec<Subscription>, touched: &mut BTreeSet<String>) {
        if let Some(version) = newest(subscriptions.iter().map(version_of)) {
            self.bump(SUBSCRIPTIONS, version);
        }
        touched.extend(self.subscriptions.keys().map(|(namespace, _)| namespace.clone()));
        self.subscriptions = subscriptions.into_iter().map(|s| (key_of(&s), s)).collect();
        touched.extend(self.subscriptions.keys().map(|(namespace, _)| namespace.clone()));
    }

    /// The namespaces listed again: those gone, then those new, each a change of its own, as when a watch sees
    /// them one by one.
    fn namespaces_listed(&mut self, namespaces: Vec<(String, String)>) -> Vec<Change> {
        if let Some(version) = newest(namespaces.iter().map(|(_, version)| version.clone())) {
            self.bump(NAMESPACES, version);
        }
        let listed: BTreeSet<String> = namespaces.into_iter().map(|(name, _)| name).collect();
        let gone: Vec<String> = self.namespaces.difference(&listed).cloned().collect();
        let new: Vec<String> = listed.difference(&self.namespaces).cloned().collect();
        let mut changes = Vec::new();
        for name in gone {
            changes.extend(self.namespace_changed(&name, false));
        }
        for name in new {
            changes.extend(self.namespace_changed(&name, true));
        }
        changes
    }

    /// Moves a resource's version forward (never back: a list after a deletion may hold only older objects).
    fn bump(&mut self, resource: &str, version: String) {
        let current = self.versions.0.get(resource);
        if !version.is_empty() && current.is_none_or(|current| after(&version, current)) {
            self.versions.0.insert(resource.to_owned(), version);
        }
    }

    fn namespace_changed(&mut self, name: &str, exists: bool) -> Option<Change> {
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
        Some(Change::Namespace { name: name.to_owned(), exists, entries })
    }

    /// Synthesizes the operators of one namespace again (an operator's object depends on its CSV, the other CSVs,
    /// the Subscriptions and the OperatorGroups of its namespace, and the Install that applied it, only); records
    /// what differs.
    fn recompute(&mut self, namespace: &str) -> Vec<Change> {
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
        let reach = Reach { groups: &self.groups, installs: &self.installs };
        for operator in tracked(&csvs, &subscriptions, reach) {
            let mut object = installed(&operator, "");
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.remove("namespace");
            }
            let entry = Entry::new(&object, operator.watches.clone(), row(&operator, &csvs), version.clone());
            fresh.insert(key_of(operator.csv), entry);
        }
        let before: Vec<Key> =
            self.entries.range(range).take_while(|((ns, _), _)| ns == namespace).map(|(k, _)| k.clone()).collect();
        let mut changes = Vec::new();
        for key in before {
            if !fresh.contains_key(&key) {
                if let Some(old) = self.entries.remove(&key) {
                    changes.push(Change::Operator { before: Some(old), after: None });
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
            changes.push(Change::Operator { before: old, after: Some(entry) });
        }
        changes
    }

    fn record(&mut self, changes: Vec<Change>) -> Arc<Logged> {
        self.changed += 1;
        let logged = Arc::new(Logged { version: self.version(), changes });
        self.log.push_back((self.changed, logged.clone()));
        while self.log.len() > self.history {
            if let Some((count, _)) = self.log.pop_front() {
                self.forgotten = count;
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

    /// The namespaces there are now.
    pub fn namespaces(&self) -> Arc<BTreeSet<String>> {
        self.namespaces.clone()
    }

    /// What changed after `version`, to resume a watch from: the logged updates after the count its `changes` part
    /// names. `Expired` when the log no longer reaches back to it, or when another process (or a view restarted)
    /// wrote it; `Invalid` when it is not a version of this API.
    pub fn since(&self, version: &str) -> Result<Vec<Arc<Logged>>, ResumeError> {
        let invalid = || ResumeError::Invalid(version.to_owned());
        let asked = CompositeVersion::parse(version).map_err(|_| invalid())?;
        let (epoch, count) = asked.0.get(CHANGES).and_then(|part| part.rsplit_once('-')).ok_or_else(invalid)?;
        let count: u64 = count.parse().map_err(|_| invalid())?;
        if epoch != self.epoch || count < self.forgotten || count > self.changed {
            return Err(ResumeError::Expired { asked: version.to_owned(), current: self.version() });
        }
        Ok(self.log.iter().filter(|(logged, _)| *logged > count).map(|(_, logged)| logged.clone()).collect())
    }
}

/// The namespaces of the CSVs an Install applied.
fn record_namespaces(applied: Option<&Applied>) -> impl Iterator<Item = String> + '_ {
    applied.into_iter().flat_map(|applied| applied.csvs.iter().map(|(namespace, _)| namespace.clone()))
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

/// The events a watch of `scope` (a namespace, or all when `None`) sees for what `logged` changed, given the
/// namespaces there are.
pub fn events(logged: &Logged, scope: Option<&str>, namespaces: &BTreeSet<String>) -> Vec<Event> {
    let in_scope = |namespace: &str| scope.is_none_or(|scope| scope == namespace);
    let event = |kind, namespace: &str, entry: &Arc<Entry>| Event {
        kind,
        namespace: namespace.to_owned(),
        entry: entry.clone(),
        version: logged.version.clone(),
    };
    let mut out = Vec::new();
    for change in &logged.changes {
        match change {
            Change::Namespace { name, exists, entries } => {
                if in_scope(name) {
                    let kind = if *exists { "ADDED" } else { "DELETED" };
                    out.extend(entries.iter().map(|entry| event(kind, name, entry)));
                }
            }
            Change::Operator { before, after } => {
                let candidates: Vec<&String> = match scope {
                    Some(scope) => namespaces.get(scope).into_iter().collect(),
                    None => namespaces.iter().collect(),
                };
                for namespace in candidates {
                    let was = before.as_ref().filter(|entry| entry.watches.includes(namespace));
                    let is = after.as_ref().filter(|entry| entry.watches.includes(namespace));
                    match (was, is) {
                        (None, None) => {}
                        (None, Some(is)) => out.push(event("ADDED", namespace, is)),
                        (Some(_), Some(is)) => out.push(event("MODIFIED", namespace, is)),
                        (Some(was), None) => out.push(event("DELETED", namespace, was)),
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
