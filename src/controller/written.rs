//! Read-your-writes over a watch's store: the resourceVersion of each object this process wrote, so that a pass
//! reads the object from the store only once the store holds that write (or a later one), and live before. A store
//! lags the API server by the time its watch takes to deliver; a pass that just applied a Deployment and read it
//! back from a store that has not seen the write would judge the old one (or none) and undo its own work.
//! resourceVersions are opaque to clients but numeric in every store Kubernetes has (as `rbac_cache` relies on).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::Resource;

/// What this process wrote, by object.
#[derive(Default)]
pub struct Written {
    writes: Mutex<HashMap<(String, String), Write>>,
}

/// The last write of an object.
#[derive(Clone, Copy)]
enum Write {
    /// Applied, at this resourceVersion.
    At(u64),
    /// Deleted.
    Deleted,
}

fn revision(resource_version: Option<&str>) -> u64 {
    resource_version.and_then(|version| version.parse().ok()).unwrap_or(0)
}

/// What a store can say of an object.
#[derive(Debug, PartialEq)]
pub enum Stored<K> {
    /// The store holds what this process wrote of it (or it wrote nothing): the object, or None when it is gone.
    Current(Option<Arc<K>>),
    /// The store may not hold the last write yet: read it live.
    Behind,
}

impl Written {
    /// Records that this process wrote `namespace`/`name` at `resource_version`.
    pub fn wrote(&self, namespace: &str, name: &str, resource_version: Option<&str>) {
        let mut writes = self.writes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let version = revision(resource_version);
        let key = (namespace.to_owned(), name.to_owned());
        let newest = match writes.get(&key) {
            Some(Write::At(before)) => version.max(*before),
            _ => version,
        };
        writes.insert(key, Write::At(newest));
    }

    /// Records that this process deleted `namespace`/`name`.
    pub fn deleted(&self, namespace: &str, name: &str) {
        let mut writes = self.writes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        writes.insert((namespace.to_owned(), name.to_owned()), Write::Deleted);
    }

    /// `namespace`/`name` as `store` holds it, if the store holds what this process wrote of it. An object written
    /// and missing from the store is [`Stored::Behind`]: its creation may not have reached the store, and whether
    /// it was deleted since is for a live read to say; one deleted and still stored is too. Once the store caught
    /// up, the record is dropped.
    pub fn read<K>(&self, store: &Store<K>, namespace: &str, name: &str) -> Stored<K>
    where
        K: Resource<DynamicType = ()> + Clone,
    {
        let stored = store.get(&ObjectRef::new(name).within(namespace));
        let key = (namespace.to_owned(), name.to_owned());
        let mut writes = self.writes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let caught_up = match (writes.get(&key).copied(), &stored) {
            (None, _) => return Stored::Current(stored),
            (Some(Write::At(written)), Some(object)) => revision(object.meta().resource_version.as_deref()) >= written,
            (Some(Write::Deleted), None) => true,
            (Some(Write::At(_)), None) | (Some(Write::Deleted), Some(_)) => false,
        };
        if !caught_up {
            return Stored::Behind;
        }
        writes.remove(&key);
        Stored::Current(stored)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::runtime::watcher::Event;

    use super::*;

    fn deployment(version: &str) -> Deployment {
        let mut deployment = Deployment::default();
        deployment.metadata.name = Some("plumbus".into());
        deployment.metadata.namespace = Some("ops".into());
        deployment.metadata.resource_version = Some(version.into());
        deployment
    }

    #[test]
    fn the_store_is_read_only_once_it_holds_what_was_written() {
        let (store, mut writer) = kube::runtime::reflector::store::<Deployment>();
        let written = Written::default();
        assert_eq!(written.read(&store, "ops", "plumbus"), Stored::Current(None), "nothing written, none stored");
        writer.apply_watcher_event(&Event::Apply(deployment("10")));
        assert!(matches!(written.read(&store, "ops", "plumbus"), Stored::Current(Some(_))));
        written.wrote("ops", "plumbus", Some("12"));
        assert_eq!(written.read(&store, "ops", "plumbus"), Stored::Behind, "older than the write");
        writer.apply_watcher_event(&Event::Delete(deployment("10")));
        assert_eq!(written.read(&store, "ops", "plumbus"), Stored::Behind, "written, not stored: read live");
        writer.apply_watcher_event(&Event::Apply(deployment("12")));
        assert!(matches!(written.read(&store, "ops", "plumbus"), Stored::Current(Some(_))), "caught up");
        writer.apply_watcher_event(&Event::Delete(deployment("12")));
        assert_eq!(written.read(&store, "ops", "plumbus"), Stored::Current(None), "caught up once: a deletion is seen");
    }

    #[test]
    fn an_object_deleted_is_read_live_while_the_store_still_holds_it() {
        let (store, mut writer) = kube::runtime::reflector::store::<Deployment>();
        let written = Written::default();
        writer.apply_watcher_event(&Event::Apply(deployment("10")));
        written.deleted("ops", "plumbus");
        assert_eq!(written.read(&store, "ops", "plumbus"), Stored::Behind);
        writer.apply_watcher_event(&Event::Delete(deployment("10")));
        assert_eq!(written.read(&store, "ops", "plumbus"), Stored::Current(None));
        writer.apply_watcher_event(&Event::Apply(deployment("11")));
        assert!(matches!(written.read(&store, "ops", "plumbus"), Stored::Current(Some(_))), "made by someone else");
    }
}
