//! One watch per component kind, feeding the component index and naming the Operators each change touches. A kind
//! the cluster does not serve (no Subscription CRD yet, say) is retried with backoff and joins once it is served.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PartialObjectMeta};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use super::components::operators_of;
use super::index::{ComponentIndex, ObjectKey};
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

/// Watches every component kind; the stream yields an Operator to reconcile for each change that touches it. Kinds
/// read only by their metadata are watched as metadata (a cluster's Secrets and ConfigMaps are not decoded).
pub fn component_triggers(client: Client, index: SharedIndex) -> impl Stream<Item = ObjectRef<Operator>> + Send {
    let streams = COMPONENT_KINDS.iter().map(move |kind| {
        let resource = api_resource(kind);
        let config = watcher::Config::default();
        if kind.body {
            let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
            triggers(kind, index.clone(), watcher::watcher(api, config).default_backoff())
        } else {
            // An Api of PartialObjectMeta asks for metadata only.
            let api = Api::<PartialObjectMeta<DynamicObject>>::all_with(client.clone(), &resource);
            triggers(kind, index.clone(), watcher::watcher(api, config).default_backoff())
        }
    });
    futures_util::stream::select_all(streams)
}

/// The Operators each event of one kind's watch touches, keeping the index.
fn triggers<K>(
    kind: &'static ComponentKind,
    index: SharedIndex,
    events: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
) -> BoxStream<'static, ObjectRef<Operator>>
where
    K: Resource + Serialize + Send + 'static,
{
    let mut relist = Relist::default();
    events
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
}

/// What a relist has delivered so far: its labelled objects (a relist of every Secret of a cluster is not kept in
/// memory) and, for Installs, every name.
#[derive(Default)]
struct Relist {
    objects: Vec<Value>,
    installs: Vec<String>,
}

fn touched<K: Resource + Serialize>(
    kind: &ComponentKind,
    index: &SharedIndex,
    relist: &mut Relist,
    event: Event<K>,
) -> BTreeSet<String> {
    let json = |object: &K| serde_json::to_value(object).unwrap_or(Value::Null);
    let labelled = |object: &K| object.meta().labels.as_ref().is_some_and(|labels| !operators_of(labels).is_empty());
    let key = |object: &K| ObjectKey::named(kind, object.meta().namespace.as_deref(), &object.name_any());
    let is_install = kind.kind == "Install";
    // An Install of a name that came or went wakes the Operator of that name, labelled or not: the name is now taken,
    // or free (an Operator without a source does not read its Install while none is known).
    let named = |news: bool, object: &K| if news { BTreeSet::from([object.name_any()]) } else { BTreeSet::new() };
    match event {
        Event::Apply(object) => {
            let mut index = lock(index);
            let mut woken = named(is_install && index.note_install(&object.name_any(), true), &object);
            // Most objects of a kind are no component: one neither labelled nor kept is not even encoded.
            if labelled(&object) || index.holds(&key(&object)) {
                woken.extend(index.apply(kind, &json(&object)));
            }
            woken
        }
        Event::Delete(object) => {
            let mut index = lock(index);
            let mut woken = named(is_install && index.note_install(&object.name_any(), false), &object);
            woken.extend(index.delete_key(&key(&object)));
            woken
        }
        Event::Init => {
            *relist = Relist::default();
            BTreeSet::new()
        }
        Event::InitApply(object) => {
            if is_install {
                relist.installs.push(object.name_any());
            }
            if labelled(&object) {
                relist.objects.push(json(&object));
            }
            BTreeSet::new()
        }
        Event::InitDone => {
            let Relist { objects, installs } = std::mem::take(relist);
            let mut index = lock(index);
            let mut woken = if is_install { index.replace_installs(installs) } else { BTreeSet::new() };
            index.settle(kind);
            woken.extend(index.replace_kind(kind, &objects));
            woken
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ObjectMeta;

    type Meta = PartialObjectMeta<DynamicObject>;

    fn kind(name: &str) -> &'static ComponentKind {
        COMPONENT_KINDS.iter().find(|kind| kind.kind == name).expect("known kind")
    }

    fn meta(name: &str, labelled: bool) -> PartialObjectMeta<DynamicObject> {
        let labels = labelled.then(|| [("v2alpha1.operators.coreos.com/plumbus".to_owned(), String::new())].into());
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("operators".into()),
                labels,
                resource_version: Some("1".into()),
                ..ObjectMeta::default()
            },
            _phantom: Default::default(),
        }
    }

    fn names(operators: &[&str]) -> BTreeSet<String> {
        operators.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn a_relist_keeps_labelled_objects_and_settles_the_kind() {
        let index = SharedIndex::default();
        let mut relist = Relist::default();
        let configmap = kind("ConfigMap");
        assert!(touched(configmap, &index, &mut relist, Event::<Meta>::Init).is_empty());
        touched(configmap, &index, &mut relist, Event::InitApply(meta("a", true)));
        touched(configmap, &index, &mut relist, Event::InitApply(meta("b", false)));
        assert_eq!(relist.objects.len(), 1, "only labelled objects are buffered");
        assert!(!lock(&index).settled(std::slice::from_ref(configmap)));
        assert_eq!(touched(configmap, &index, &mut relist, Event::<Meta>::InitDone), names(&["plumbus"]));
        assert!(lock(&index).settled(std::slice::from_ref(configmap)));
        assert_eq!(lock(&index).components_of("plumbus").len(), 1);
    }

    #[test]
    fn an_unlabelled_object_touches_nothing_unless_it_lost_its_label() {
        let index = SharedIndex::default();
        let mut relist = Relist::default();
        let secret = kind("Secret");
        assert!(touched(secret, &index, &mut relist, Event::Apply(meta("plain", false))).is_empty());
        assert_eq!(touched(secret, &index, &mut relist, Event::Apply(meta("s", true))), names(&["plumbus"]));
        assert_eq!(
            touched(secret, &index, &mut relist, Event::Apply(meta("s", false))),
            names(&["plumbus"]),
            "the label removed: the Operator loses a component"
        );
        assert!(lock(&index).is_empty());
        touched(secret, &index, &mut relist, Event::Apply(meta("s", true)));
        assert_eq!(touched(secret, &index, &mut relist, Event::Delete(meta("s", false))), names(&["plumbus"]));
        assert!(lock(&index).is_empty());
    }

    #[test]
    fn every_install_name_is_known_labelled_or_not() {
        let index = SharedIndex::default();
        let mut relist = Relist::default();
        let install = kind("Install");
        touched(install, &index, &mut relist, Event::<Meta>::Init);
        touched(install, &index, &mut relist, Event::InitApply(meta("plain", false)));
        assert!(!lock(&index).install_absent("other"), "not known before the relist ends");
        touched(install, &index, &mut relist, Event::<Meta>::InitDone);
        assert!(!lock(&index).install_absent("plain"));
        assert!(lock(&index).install_absent("other"));
        let other = BTreeSet::from(["other".to_owned()]);
        assert_eq!(touched(install, &index, &mut relist, Event::Apply(meta("other", false))), other, "its name taken");
        assert!(!lock(&index).install_absent("other"));
        assert!(touched(install, &index, &mut relist, Event::Apply(meta("other", false))).is_empty(), "known");
        assert_eq!(touched(install, &index, &mut relist, Event::Delete(meta("other", false))), other, "its name free");
        assert!(lock(&index).install_absent("other"));
        let configmap = kind("ConfigMap");
        touched(configmap, &index, &mut relist, Event::Apply(meta("not-an-install", false)));
        assert!(lock(&index).install_absent("not-an-install"), "other kinds name no Install");
    }
}
