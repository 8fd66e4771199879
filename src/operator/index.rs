//! The component index: every labelled object of the component kinds, kept from their watches, by Operator. An
//! Operator's reconcile reads its components here instead of listing every kind, and each change names the
//! Operators it touches so only they are reconciled. Unlabelled objects are never kept.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use super::components::{component_of, operators_of, Component};
use super::kinds::ComponentKind;

/// Identifies one object: its kind (by plural, unique among the component kinds; a key is held twice per labelled
/// object, so it is kept small), namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    /// The key of the object of `kind` in `namespace` (ignored for a cluster-scoped kind) named `name`.
    pub fn named(kind: &ComponentKind, namespace: Option<&str>, name: &str) -> Self {
        Self {
            kind: kind.plural,
            namespace: namespace.filter(|_| kind.namespaced).map(str::to_owned),
            name: name.to_owned(),
        }
    }

    fn of(kind: &ComponentKind, object: &Value) -> Self {
        Self::named(
            kind,
            object["metadata"]["namespace"].as_str(),
            object["metadata"]["name"].as_str().unwrap_or_default(),
        )
    }
}

struct Entry {
    operators: Vec<String>,
    component: Component,
}

/// Labelled components by object and by Operator.
#[derive(Default)]
pub struct ComponentIndex {
    entries: HashMap<ObjectKey, Entry>,
    by_operator: HashMap<String, BTreeSet<ObjectKey>>,
    /// The kinds whose watch has listed them once, or failed to (a kind the cluster does not serve).
    settled: BTreeSet<&'static str>,
    /// The name of every Install, labelled or not: an Operator whose Install does not exist asks nothing.
    installs: BTreeSet<String>,
    /// Whether the Installs were listed once: before, an Install's absence is not known.
    listed_installs: bool,
}

impl ComponentIndex {
    /// Records that `kind`'s watch has listed it once, or failed to: what the index holds of it is what there is,
    /// as far as it can tell.
    pub fn settle(&mut self, kind: &ComponentKind) {
        self.settled.insert(kind.plural);
    }

    /// Whether every kind of `kinds` is settled: before, an Operator's components may look missing only because
    /// their kind was not listed yet (a controller's start), and its status would say so for a moment.
    pub fn settled(&self, kinds: &[ComponentKind]) -> bool {
        kinds.iter().all(|kind| self.settled.contains(kind.plural))
    }

    /// Records an object as it is now; returns the Operators whose components changed.
    pub fn apply(&mut self, kind: &ComponentKind, object: &Value) -> BTreeSet<String> {
        let key = ObjectKey::of(kind, object);
        let labels: BTreeMap<String, String> =
            serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default();
        let operators = operators_of(&labels);
        let mut touched: BTreeSet<String> = self.remove(&key);
        if operators.is_empty() {
            return touched;
        }
        for operator in &operators {
            self.by_operator.entry(operator.clone()).or_default().insert(key.clone());
            touched.insert(operator.clone());
        }
        self.entries.insert(key, Entry { operators, component: component_of(kind, object) });
        touched
    }

    /// Forgets a deleted object; returns the Operators it was a component of.
    pub fn delete(&mut self, kind: &ComponentKind, object: &Value) -> BTreeSet<String> {
        self.remove(&ObjectKey::of(kind, object))
    }

    /// Forgets the deleted object of this key; returns the Operators it was a component of.
    pub fn delete_key(&mut self, key: &ObjectKey) -> BTreeSet<String> {
        self.remove(key)
    }

    /// Whether the object of this key is kept (it was a component when last seen).
    pub fn holds(&self, key: &ObjectKey) -> bool {
        self.entries.contains_key(key)
    }

    /// Records that an Install of this name exists, or (`exists` false) no longer does; answers whether that is news
    /// (the Operator of that name may find its name taken, or free).
    pub fn note_install(&mut self, name: &str, exists: bool) -> bool {
        if exists {
            self.installs.insert(name.to_owned())
        } else {
            self.installs.remove(name)
        }
    }

    /// Replaces the names of every Install with a relist's; answers the names that came or went.
    pub fn replace_installs(&mut self, names: Vec<String>) -> BTreeSet<String> {
        let names: BTreeSet<String> = names.into_iter().collect();
        let changed = names.symmetric_difference(&self.installs).cloned().collect();
        self.installs = names;
        self.listed_installs = true;
        changed
    }

    /// Whether the Install of this name is known not to exist: the Installs were listed and none has this name
    /// since. Not known before they were listed (nor when they cannot be). Known as the watch tells: an Install
    /// created a moment ago may not be seen yet, and its creation is then refused as a conflict.
    pub fn install_absent(&self, name: &str) -> bool {
        self.listed_installs && !self.installs.contains(name)
    }

    /// Replaces everything known of `kind` with `objects` (a watch's full relist); returns the Operators whose
    /// components changed.
    pub fn replace_kind(&mut self, kind: &ComponentKind, objects: &[Value]) -> BTreeSet<String> {
        let before: BTreeMap<ObjectKey, (Vec<String>, Component)> = self
            .entries
            .iter()
            .filter(|(key, _)| key.kind == kind.plural)
            .map(|(key, entry)| (key.clone(), (entry.operators.clone(), entry.component.clone())))
            .collect();
        let mut touched = BTreeSet::new();
        for key in before.keys() {
            self.remove(key);
        }
        for object in objects {
            self.apply(kind, object);
        }
        let after: BTreeMap<&ObjectKey, &Entry> =
            self.entries.iter().filter(|(key, _)| key.kind == kind.plural).collect();
        for (key, (operators, component)) in &before {
            let unchanged =
                after.get(key).is_some_and(|entry| &entry.operators == operators && &entry.component == component);
            if !unchanged {
                touched.extend(operators.iter().cloned());
            }
        }
        for (key, entry) in after {
            if !before
                .get(key)
                .is_some_and(|(operators, component)| operators == &entry.operators && component == &entry.component)
            {
                touched.extend(entry.operators.iter().cloned());
            }
        }
        touched
    }

    fn remove(&mut self, key: &ObjectKey) -> BTreeSet<String> {
        let Some(entry) = self.entries.remove(key) else { return BTreeSet::new() };
        for operator in &entry.operators {
            if let Some(keys) = self.by_operator.get_mut(operator) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_operator.remove(operator);
                }
            }
        }
        entry.operators.into_iter().collect()
    }

    /// The components of an Operator, ordered by kind, API version, namespace and name.
    pub fn components_of(&self, operator: &str) -> Vec<Component> {
        let mut components: Vec<Component> = self
            .by_operator
            .get(operator)
            .into_iter()
            .flatten()
            .filter_map(|key| self.entries.get(key))
            .map(|entry| entry.component.clone())
            .collect();
        components.sort_by(|a, b| {
            let key = |c: &Component| {
                (
                    c.reference.kind.clone(),
                    c.reference.api_version.clone(),
                    c.reference.namespace.clone(),
                    c.reference.name.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        components
    }

    /// How many objects are kept, for the benchmark and metrics.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::kinds::COMPONENT_KINDS;
    use serde_json::json;

    fn kind(name: &str) -> &'static ComponentKind {
        COMPONENT_KINDS.iter().find(|kind| kind.kind == name).expect("known kind")
    }

    fn object(name: &str, operators: &[&str], rv: &str) -> Value {
        let labels: serde_json::Map<String, Value> =
            operators.iter().map(|operator| (format!("v2alpha1.operators.coreos.com/{operator}"), json!(""))).collect();
        json!({"metadata": {"name": name, "namespace": "operators", "labels": labels, "resourceVersion": rv}})
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn the_index_is_settled_once_every_kind_was_listed_or_failed_to_be() {
        let mut index = ComponentIndex::default();
        assert!(!index.settled(COMPONENT_KINDS));
        for component in &COMPONENT_KINDS[1..] {
            index.settle(component);
        }
        assert!(!index.settled(COMPONENT_KINDS), "one kind not listed yet");
        index.settle(&COMPONENT_KINDS[0]);
        assert!(index.settled(COMPONENT_KINDS));
    }

    #[test]
    fn labelled_objects_are_kept_and_unlabelled_ones_are_not() {
        let mut index = ComponentIndex::default();
        assert_eq!(index.apply(kind("ConfigMap"), &object("a", &["plumbus"], "1")), set(&["plumbus"]));
        assert!(index.apply(kind("ConfigMap"), &object("b", &[], "1")).is_empty());
        assert_eq!(index.len(), 1);
        assert_eq!(index.components_of("plumbus")[0].reference.name, "a");
        assert!(index.components_of("grumbo").is_empty());
    }

    #[test]
    fn a_label_moved_to_another_operator_touches_both() {
        let mut index = ComponentIndex::default();
        index.apply(kind("ConfigMap"), &object("a", &["plumbus"], "1"));
        assert_eq!(index.apply(kind("ConfigMap"), &object("a", &["grumbo"], "2")), set(&["grumbo", "plumbus"]));
        assert!(index.components_of("plumbus").is_empty());
        assert_eq!(index.apply(kind("ConfigMap"), &object("a", &[], "3")), set(&["grumbo"]));
        assert!(index.is_empty());
    }

    #[test]
    fn deletes_touch_the_operators_the_object_belonged_to() {
        let mut index = ComponentIndex::default();
        index.apply(kind("Secret"), &object("s", &["plumbus", "grumbo"], "1"));
        assert_eq!(index.delete(kind("Secret"), &object("s", &[], "2")), set(&["grumbo", "plumbus"]));
        assert!(index.delete(kind("Secret"), &object("s", &[], "2")).is_empty());
    }

    #[test]
    fn a_relist_touches_only_operators_whose_components_changed() {
        let mut index = ComponentIndex::default();
        index.apply(kind("ConfigMap"), &object("a", &["plumbus"], "1"));
        index.apply(kind("ConfigMap"), &object("b", &["grumbo"], "1"));
        index.apply(kind("Secret"), &object("a", &["rick"], "1"));
        let touched =
            index.replace_kind(kind("ConfigMap"), &[object("a", &["plumbus"], "1"), object("c", &["morty"], "1")]);
        assert_eq!(touched, set(&["grumbo", "morty"]));
        assert_eq!(index.components_of("rick").len(), 1, "other kinds stay");
        assert!(index.components_of("grumbo").is_empty());
    }

    #[test]
    fn an_install_is_known_absent_only_once_the_installs_were_listed() {
        let mut index = ComponentIndex::default();
        assert!(!index.install_absent("plumbus"), "not listed yet: not known");
        index.replace_installs(vec!["grumbo".into()]);
        assert!(index.install_absent("plumbus"));
        assert!(!index.install_absent("grumbo"));
        assert!(index.note_install("plumbus", true), "news");
        assert!(!index.note_install("plumbus", true), "known");
        assert!(!index.install_absent("plumbus"));
        assert!(index.note_install("plumbus", false));
        assert!(!index.note_install("plumbus", false));
        assert!(index.install_absent("plumbus"));
        let set = |names: &[&str]| names.iter().map(|name| (*name).to_owned()).collect::<BTreeSet<_>>();
        assert_eq!(
            index.replace_installs(vec!["plumbus".into(), "other".into()]),
            set(&["grumbo", "other", "plumbus"])
        );
    }

    #[test]
    fn a_kept_object_is_held_by_its_key_and_deleted_by_it() {
        let mut index = ComponentIndex::default();
        index.apply(kind("ConfigMap"), &object("a", &["plumbus"], "1"));
        let key = ObjectKey::named(kind("ConfigMap"), Some("operators"), "a");
        assert!(index.holds(&key));
        assert!(!index.holds(&ObjectKey::named(kind("ConfigMap"), Some("elsewhere"), "a")));
        index.apply(kind("ClusterRole"), &object("r", &["plumbus"], "1"));
        assert!(
            index.holds(&ObjectKey::named(kind("ClusterRole"), None, "r")),
            "a cluster-scoped key has no namespace"
        );
        assert!(index.holds(&ObjectKey::named(kind("ClusterRole"), Some("elsewhere"), "r")));
        assert_eq!(index.delete_key(&key), set(&["plumbus"]));
        assert!(!index.holds(&key));
    }

    #[test]
    fn components_are_ordered_by_kind_then_name() {
        let mut index = ComponentIndex::default();
        index.apply(kind("Secret"), &object("b", &["plumbus"], "1"));
        index.apply(kind("ConfigMap"), &object("z", &["plumbus"], "1"));
        index.apply(kind("ConfigMap"), &object("a", &["plumbus"], "1"));
        let names: Vec<(String, String)> =
            index.components_of("plumbus").into_iter().map(|c| (c.reference.kind, c.reference.name)).collect();
        assert_eq!(
            names,
            vec![("ConfigMap".into(), "a".into()), ("ConfigMap".into(), "z".into()), ("Secret".into(), "b".into())]
        );
    }
}
