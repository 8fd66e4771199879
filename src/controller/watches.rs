//! Watches whose objects the controllers hold in memory, trimmed to what they read. An object's `managedFields` are
//! the largest part of most small objects (a Namespace's or a ClusterRole's several times over, every field owned
//! decoded as JSON) and no loop reads them from a store: they are dropped before an object is stored. Where a loop
//! needs only names and labels (namespaces), only metadata is asked for. With a thousand namespaces and the roles of a
//! hundred CSVs, the stores were most of the legacy loops' memory.

use std::fmt::Debug;

use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::Controller;
use kube::runtime::watcher::{self, Event};
use kube::runtime::{reflector, WatchStreamExt};
use kube::Resource;
use serde::de::DeserializeOwned;

use super::listing::Listing;

/// Drops what no loop reads from a stored object. The list itself goes, not only its entries: a cleared `Vec` keeps
/// the room it was decoded into (entries of 176 bytes; four of them for an object decoded whole, 768 bytes with the
/// allocator's rounding).
pub fn trim<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// The watch of `api`'s objects, retried with backoff, each object trimmed.
pub fn trimmed<K>(api: Api<K>, config: watcher::Config) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher::watcher(api, config).default_backoff().modify(trim)
}

/// The watch of the metadata of every object of kind `K` (kube asks an `Api` of PartialObjectMeta for metadata
/// only), retried with backoff, trimmed.
pub fn metadata<K>(
    client: kube::Client,
    config: watcher::Config,
) -> impl Stream<Item = Result<Event<PartialObjectMeta<K>>, watcher::Error>> + Send
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    trimmed(Api::<PartialObjectMeta<K>>::all(client), config).modify(untyped)
}

/// Drops the `apiVersion` and `kind` a metadata-only answer names each object with (`meta.k8s.io/v1`,
/// `PartialObjectMetadata`): the store's type says what it holds, and they are two strings more per object.
pub fn untyped<K>(object: &mut PartialObjectMeta<K>) {
    object.types = None;
}

/// The objects of `namespace` that `store` holds.
pub fn in_namespace<K>(store: &reflector::Store<K>, namespace: &str) -> Vec<std::sync::Arc<K>>
where
    K: Resource + Clone,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let objects = store.state();
    objects.into_iter().filter(|object| object.meta().namespace.as_deref() == Some(namespace)).collect()
}

/// A store filled by `watch`, and the watch's events once the store took each (to wake a controller by): for a loop
/// that reads what another kind's watch holds and is woken by its changes.
pub fn reflected<K>(
    watch: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
) -> (reflector::Store<K>, BoxStream<'static, Result<Event<K>, watcher::Error>>)
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    (store, reflector(writer, watch).boxed())
}

/// A controller of `K` whose store holds trimmed objects: `Controller::new` with [`trim`] before the store.
pub fn controller<K>(api: Api<K>, config: watcher::Config) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    controller_listed(api, config).0
}

/// [`controller`], and the [`Listing`] of its store: for another loop that waits for that store's first list.
pub fn controller_listed<K>(api: Api<K>, config: watcher::Config) -> (Controller<K>, Listing)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    controller_listed_kept(api, config, |_| {})
}

/// [`controller_listed`] for a loop that reads less of each object than the watch brings (`unread`, as
/// [`controller_kept`]).
pub fn controller_listed_kept<K>(api: Api<K>, config: watcher::Config, unread: fn(&mut K)) -> (Controller<K>, Listing)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let (objects, listing) = stored(writer, trimmed(api, config).modify(unread));
    (Controller::for_stream(objects, reader), listing)
}

/// The objects `watch` brings, each once `writer`'s store took it, and the [`Listing`] of that store, set once the
/// store took the first list's end.
fn stored<K>(
    writer: reflector::store::Writer<K>,
    watch: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
) -> (impl Stream<Item = Result<K, watcher::Error>> + Send + 'static, Listing)
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let (set, listing) = Listing::new();
    (reflector(writer, watch).inspect(set).applied_objects(), listing)
}

/// [`controller`] for a loop that reads less of each object than the watch brings: `unread` drops the rest before
/// the object is stored (a namespace's labels but the few a loop reads, at a thousand namespaces).
pub fn controller_kept<K>(api: Api<K>, config: watcher::Config, unread: fn(&mut K)) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    Controller::for_stream(reflector(writer, trimmed(api, config).modify(unread)).applied_objects(), reader)
}

/// [`controller`] whose every change of an object also wakes the objects of the same kind `related` names, found in
/// the store after it took the change: a pass woken so reads a store that holds what woke it (a second watch of the
/// same kind, mapped to the related objects, could wake them before this store took the change, and a pass would
/// read the older object).
pub fn controller_waking_related<K>(
    api: Api<K>,
    config: watcher::Config,
    related: impl Fn(&K, &reflector::Store<K>) -> Vec<reflector::ObjectRef<K>> + Send + 'static,
) -> (Controller<K>, Listing)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let (wake, woken) = tokio::sync::mpsc::unbounded_channel();
    let store = reader.clone();
    let (objects, listing) = stored(writer, trimmed(api, config));
    let objects = objects.inspect(move |changed| {
        if let Ok(changed) = changed {
            for object in related(changed, &store) {
                // The receiver goes only with the controller, which stops polling this stream first.
                let _ = wake.send(object);
            }
        }
    });
    let woken =
        futures_util::stream::unfold(woken, |mut woken| async move { woken.recv().await.map(|at| (at, woken)) });
    (Controller::for_stream(objects, reader).reconcile_on(woken), listing)
}

/// [`controller`], woken only when what `changed` hashes differs from the object's last event (the store still
/// takes every event, so a pass reads the newest object). A controller's own status write moves an object's
/// resourceVersion but none of what others change; woken by it, a pass finds nothing to do.
pub fn controller_of_changes<K>(api: Api<K>, config: watcher::Config, changed: fn(&K) -> Option<u64>) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    controller_of_changes_kept(api, config, changed, |_| {})
}

/// [`controller_of_changes`] for a loop that reads less of each object than the controller writes: `unread` drops
/// the rest (an Operator's status, whose references grow with its components) before the object is stored.
pub fn controller_of_changes_kept<K>(
    api: Api<K>,
    config: watcher::Config,
    changed: fn(&K) -> Option<u64>,
    unread: fn(&mut K),
) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let objects = reflector(writer, trimmed(api, config).modify(unread))
        .applied_objects()
        .predicate_filter(changed, kube::runtime::PredicateConfig::default());
    Controller::for_stream(objects, reader)
}

/// What others change on an object with a status subresource: its spec (`generation`), labels, annotations,
/// finalizers and deletion; not its status, nor the resourceVersion a status write moves.
pub fn changed_by_others<K: Resource>(object: &K) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let metadata = object.meta();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    metadata.generation.hash(&mut hasher);
    metadata.labels.hash(&mut hasher);
    metadata.annotations.hash(&mut hasher);
    metadata.finalizers.hash(&mut hasher);
    metadata.deletion_timestamp.is_some().hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::ResourceExt;

    #[tokio::test]
    async fn a_controllers_store_is_listed_once_it_holds_the_first_list() {
        let named = |name: &str| {
            let mut namespace = Namespace::default();
            namespace.metadata.name = Some(name.into());
            namespace
        };
        let (store, writer) = reflector::store::<Namespace>();
        let events = [Event::Init, Event::InitApply(named("a")), Event::InitDone, Event::Apply(named("b"))];
        let (objects, listing) = stored(writer, futures_util::stream::iter(events.map(Ok)));
        let mut objects = std::pin::pin!(objects);
        let first = objects.next().await.and_then(Result::ok).and_then(|object| object.metadata.name);
        assert_eq!(first.as_deref(), Some("a"));
        assert!(!listing.is_listed(), "the list has not ended");
        let next = objects.next().await.and_then(Result::ok).and_then(|object| object.metadata.name);
        assert_eq!(next.as_deref(), Some("b"));
        assert!(listing.is_listed(), "the list ended");
        assert!(store.get(&reflector::ObjectRef::new("a")).is_some(), "the store held the list when it was");
        assert!(objects.next().await.is_none());
    }

    #[test]
    fn a_status_or_resource_version_change_is_not_a_change_by_others_and_the_rest_is() {
        let mut base = Namespace::default();
        base.metadata.name = Some("ops".into());
        base.metadata.generation = Some(1);
        base.metadata.resource_version = Some("10".into());
        let hash = |namespace: &Namespace| changed_by_others(namespace).expect("hashed");
        let mut status_written = base.clone();
        status_written.metadata.resource_version = Some("11".into());
        status_written.status = Some(Default::default());
        assert_eq!(hash(&status_written), hash(&base));
        let changes: [fn(&mut Namespace); 5] = [
            |n| n.metadata.generation = Some(2),
            |n| n.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into()),
            |n| n.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into()),
            |n| n.metadata.finalizers = Some(vec!["f".into()]),
            |n| {
                n.metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
            },
        ];
        for (index, change) in changes.iter().enumerate() {
            let mut changed = base.clone();
            change(&mut changed);
            assert_ne!(hash(&changed), hash(&base), "change {index}");
        }
    }

    #[test]
    fn trimming_drops_managed_fields_and_keeps_the_rest() {
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some("ops".into());
        namespace.labels_mut().insert("team".into(), "a".into());
        namespace.metadata.managed_fields =
            Some(vec![ManagedFieldsEntry { manager: Some("kubectl".into()), ..ManagedFieldsEntry::default() }]);
        trim(&mut namespace);
        assert_eq!(namespace.metadata.managed_fields, None, "the list goes, not only its entries");
        assert_eq!(namespace.name_any(), "ops");
        assert_eq!(namespace.labels().get("team").map(String::as_str), Some("a"));
    }
}
