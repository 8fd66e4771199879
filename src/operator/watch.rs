//! One watch per component kind, feeding the component index and naming the Operators each change touches. A kind
//! the cluster does not serve (no Subscription CRD yet, say) is retried with backoff and joins once it is served.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures_util::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::Value;

use super::index::ComponentIndex;
use super::kinds::{ComponentKind, COMPONENT_KINDS};
use crate::api::v2alpha1::Operator;

/// The index shared by the watches (writers) and reconciles (readers).
pub type SharedIndex = Arc<Mutex<ComponentIndex>>;

pub fn lock(index: &SharedIndex) -> std::sync::MutexGuard<'_, ComponentIndex> {
    index.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn api_resource(kind: &ComponentKind) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(kind.group, kind.version, kind.kind), kind.plural)
}

/// Watches every component kind; the stream yields an Operator to reconcile for each change that touches it.
pub fn component_triggers(client: Client, index: SharedIndex) -> impl Stream<Item = ObjectRef<Operator>> + Send {
    let streams = COMPONENT_KINDS.iter().map(move |kind| {
        let api = Api::<DynamicObject>::all_with(client.clone(), &api_resource(kind));
        let index = index.clone();
        let mut relist: Vec<Value> = Vec::new();
        watcher(api)
            .map(move |event| match event {
                Ok(event) => touched(kind, &index, &mut relist, event),
                Err(error) => {
                    tracing::debug!(kind = kind.kind, %error, "component watch");
                    lock(&index).settle(kind);
                    BTreeSet::new()
                }
            })
            .flat_map(|operators| futures_util::stream::iter(operators.into_iter().map(|name| ObjectRef::new(&name))))
            .boxed()
    });
    futures_util::stream::select_all(streams)
}

fn watcher(api: Api<DynamicObject>) -> impl Stream<Item = Result<Event<DynamicObject>, watcher::Error>> + Send {
    watcher::watcher(api, watcher::Config::default()).default_backoff()
}

fn touched(
    kind: &ComponentKind,
    index: &SharedIndex,
    relist: &mut Vec<Value>,
    event: Event<DynamicObject>,
) -> BTreeSet<String> {
    let json = |object: &DynamicObject| serde_json::to_value(object).unwrap_or(Value::Null);
    match event {
        Event::Apply(object) => lock(index).apply(kind, &json(&object)),
        Event::Delete(object) => lock(index).delete(kind, &json(&object)),
        Event::Init => {
            relist.clear();
            BTreeSet::new()
        }
        Event::InitApply(object) => {
            // Only labelled objects are buffered: a relist of every Secret of a cluster is not kept in memory.
            if !super::components::operators_of(object.metadata.labels.as_ref().unwrap_or(&Default::default()))
                .is_empty()
            {
                relist.push(json(&object));
            }
            BTreeSet::new()
        }
        Event::InitDone => {
            let objects = std::mem::take(relist);
            let mut index = lock(index);
            index.settle(kind);
            index.replace_kind(kind, &objects)
        }
    }
}
