//! What the copier wrote of each copy: its resourceVersion after the write and a fingerprint of the prototype it was
//! written from (OLM v0 keeps the same two hashes of every copy in its informer's cache, `$copyhash-spec` and
//! `$copyhash-status`). A copy the watch shows at or before that version holds what was written: the copier does
//! not read it again while its original's prototype is unchanged, and the copied-CSV loop knows the change as this
//! process's own. Entries are keyed and valued by 64-bit hashes, about 40 bytes a copy: a hundred thousand copies
//! cost a few megabytes. A collision (odds of about 1 in 10^9 at that count) would only skip one refresh.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::api::v1alpha1::ClusterServiceVersion;

/// The parts of a prototype a copy is written from: its labels, annotations and spec; its status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    object: u64,
    status: u64,
}

impl Fingerprint {
    /// The fingerprint of `prototype` (a copy as `copies::prototype` makes it, in no namespace).
    pub fn of(prototype: &ClusterServiceVersion) -> Self {
        let metadata = &prototype.metadata;
        let object = (&metadata.labels, &metadata.annotations, &prototype.spec);
        Self { object: hash_json(&object), status: hash_json(&prototype.status) }
    }

    /// This fingerprint for a copy created without its status yet: held by no prototype.
    pub fn without_status(self) -> Self {
        Self { status: UNWRITTEN, ..self }
    }
}

/// The status hash of a copy created whose status is not written yet (a status hash of 0 is as likely as any other
/// 64-bit value: never, in practice).
const UNWRITTEN: u64 = 0;

fn hash_json(value: &impl serde::Serialize) -> u64 {
    let mut hasher = DefaultHasher::new();
    serde_json::to_string(value).unwrap_or_default().hash(&mut hasher);
    hasher.finish()
}

fn key(namespace: &str, name: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (namespace, name).hash(&mut hasher);
    hasher.finish()
}

/// A resourceVersion as a number (they are numeric in every store Kubernetes has); None when it is not one.
fn version(resource_version: Option<&str>) -> Option<u64> {
    resource_version.and_then(|version| version.parse().ok())
}

#[derive(Clone, Copy)]
struct Entry {
    version: u64,
    fingerprint: Fingerprint,
}

/// The copies written by this process.
#[derive(Default)]
pub struct Ledger {
    entries: Mutex<HashMap<u64, Entry>>,
}

impl Ledger {
    fn entries(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that the copy `namespace`/`name` holds `fingerprint` at `resource_version`.
    pub fn wrote(&self, namespace: &str, name: &str, resource_version: Option<&str>, fingerprint: Fingerprint) {
        let key = key(namespace, name);
        match version(resource_version) {
            Some(version) => self.entries().insert(key, Entry { version, fingerprint }),
            None => self.entries().remove(&key),
        };
    }

    /// Records that a write of the copy `namespace`/`name` is under way: its watch event may come before the write's
    /// answer, and must not be taken for someone else's change (which would wake the original's pass for nothing).
    /// Followed by [`Self::wrote`], or by [`Self::forget`] when the write failed.
    pub fn writing(&self, namespace: &str, name: &str, fingerprint: Fingerprint) {
        let entry = Entry { version: u64::MAX, fingerprint: fingerprint.without_status() };
        self.entries().insert(key(namespace, name), entry);
    }

    /// Forgets the copy `namespace`/`name` (deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.entries().remove(&key(namespace, name));
    }

    /// Whether the copy `namespace`/`name`, seen at `resource_version`, is this process's last write of it or
    /// older (a later change, by anyone else, has a higher version).
    pub fn is_own(&self, namespace: &str, name: &str, resource_version: Option<&str>) -> bool {
        self.entry(namespace, name, resource_version).is_some()
    }

    /// Whether the copy `namespace`/`name`, seen at `resource_version`, holds `fingerprint` as this process wrote it.
    pub fn holds(&self, namespace: &str, name: &str, resource_version: Option<&str>, fingerprint: Fingerprint) -> bool {
        self.entry(namespace, name, resource_version).is_some_and(|entry| entry.fingerprint == fingerprint)
    }

    fn entry(&self, namespace: &str, name: &str, resource_version: Option<&str>) -> Option<Entry> {
        let seen = version(resource_version)?;
        self.entries().get(&key(namespace, name)).copied().filter(|entry| seen <= entry.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::legacy::copies::prototype;

    fn original(phase: &str) -> ClusterServiceVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "plumbus.v1", "namespace": "ops", "annotations": {"olm.operatorNamespace": "ops"}},
            "spec": {"displayName": "Plumbus", "install": {"strategy": "deployment"}},
            "status": {"phase": phase, "reason": "InstallSucceeded"}
        }))
        .expect("a CSV")
    }

    #[test]
    fn a_copy_holds_what_was_written_until_someone_else_writes_it() {
        let ledger = Ledger::default();
        let written = Fingerprint::of(&prototype(&original("Installing")));
        assert!(!ledger.is_own("a", "plumbus.v1", Some("7")), "nothing written");
        ledger.wrote("a", "plumbus.v1", Some("10"), written);
        assert!(ledger.holds("a", "plumbus.v1", Some("10"), written));
        assert!(ledger.holds("a", "plumbus.v1", Some("9"), written), "the watch has not seen the write yet");
        assert!(!ledger.holds("a", "plumbus.v1", Some("11"), written), "changed after the write");
        assert!(!ledger.is_own("a", "plumbus.v1", Some("11")));
        assert!(!ledger.holds("b", "plumbus.v1", Some("10"), written), "another namespace's copy");
        assert!(!ledger.holds("a", "plumbus.v1", None, written), "no version: unknown");
        ledger.forget("a", "plumbus.v1");
        assert!(!ledger.is_own("a", "plumbus.v1", Some("10")));
        assert!(ledger.entries().is_empty());
    }

    #[test]
    fn a_new_status_or_spec_of_the_original_is_not_held() {
        let ledger = Ledger::default();
        let installing = Fingerprint::of(&prototype(&original("Installing")));
        ledger.wrote("a", "plumbus.v1", Some("10"), installing);
        let succeeded = Fingerprint::of(&prototype(&original("Succeeded")));
        assert_ne!(succeeded, installing);
        assert!(!ledger.holds("a", "plumbus.v1", Some("10"), succeeded), "the status changed");
        let mut renamed = original("Installing");
        renamed.spec.display_name = Some("Plumbus 2".into());
        assert!(
            !ledger.holds("a", "plumbus.v1", Some("10"), Fingerprint::of(&prototype(&renamed))),
            "the spec changed"
        );
        assert!(ledger.is_own("a", "plumbus.v1", Some("10")), "still this process's write");
    }

    #[test]
    fn a_copy_being_written_is_own_whatever_the_watch_shows_first() {
        let ledger = Ledger::default();
        let fingerprint = Fingerprint::of(&prototype(&original("Succeeded")));
        ledger.writing("a", "plumbus.v1", fingerprint);
        assert!(ledger.is_own("a", "plumbus.v1", Some("12")), "the write's event, before its answer");
        assert!(!ledger.holds("a", "plumbus.v1", Some("12"), fingerprint), "not held until written");
        ledger.wrote("a", "plumbus.v1", Some("12"), fingerprint);
        assert!(!ledger.is_own("a", "plumbus.v1", Some("13")), "a later change is someone else's");
    }

    #[test]
    fn a_copy_created_without_its_status_is_own_but_not_held() {
        let ledger = Ledger::default();
        let fingerprint = Fingerprint::of(&prototype(&original("Succeeded")));
        ledger.wrote("a", "plumbus.v1", Some("10"), fingerprint.without_status());
        assert!(ledger.is_own("a", "plumbus.v1", Some("10")));
        assert!(!ledger.holds("a", "plumbus.v1", Some("10"), fingerprint), "its status is still to be written");
    }
}
