//! Sets of field paths as server-side apply tracks them, and their `fieldsV1` encoding: `f:<field>`,
//! `k:<key-json>` for an item of an associative list, `v:<value-json>` for a set member, `i:<n>` for a position, and
//! `.` for a node that is itself a member.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::merge::shape::{ListType, Shape};

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    Field(String),
    /// The key fields of an associative-list item, as canonical JSON (sorted keys).
    Key(String),
    Value(String),
    Index(usize),
}

pub type Path = Vec<Element>;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet(pub BTreeSet<Path>);

/// Which part of an object a write may touch: everything but `status`, or only `status` (the subresource).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    MainResource,
    Status,
}

const TRACKED_METADATA: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

fn canonical_key(item: &Value, keys: &[String]) -> String {
    let map: BTreeMap<&str, &Value> = keys.iter().filter_map(|k| Some((k.as_str(), item.get(k)?))).collect();
    serde_json::to_string(&map).unwrap_or_default()
}

impl FieldSet {
    /// The leaf fields of an object, with the merge shape of its kind, limited to `scope`.
    pub fn of(object: &Value, shape: &Shape, scope: Scope) -> Self {
        let mut set = BTreeSet::new();
        let Some(root) = object.as_object() else { return Self(set) };
        for (field, value) in root {
            let wanted = match (field.as_str(), scope) {
                ("apiVersion" | "kind", _) => false,
                ("status", Scope::MainResource) => false,
                ("status", _) => true,
                (_, Scope::Status) => false,
                _ => true,
            };
            if !wanted {
                continue;
            }
            if field == "metadata" {
                for (meta_field, meta_value) in value.as_object().into_iter().flatten() {
                    if TRACKED_METADATA.contains(&meta_field.as_str()) {
                        let path = vec![Element::Field("metadata".into()), Element::Field(meta_field.clone())];
                        collect(meta_value, shape, &mut vec!["metadata".into(), meta_field.clone()], path, &mut set);
                    }
                }
                continue;
            }
            collect(value, shape, &mut vec![field.clone()], vec![Element::Field(field.clone())], &mut set);
        }
        Self(set)
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.0.contains(path)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether this set has `path` or anything beneath it.
    pub fn touches(&self, path: &Path) -> bool {
        self.0.range(path.clone()..).next().is_some_and(|first| first.starts_with(path))
    }

    pub fn to_fields_v1(&self) -> Value {
        let mut root = Map::new();
        for path in &self.0 {
            let mut node = &mut root;
            for element in path {
                let entry = node.entry(encode(element)).or_insert_with(|| Value::Object(Map::new()));
                let Value::Object(next) = entry else { break };
                node = next;
            }
        }
        // A member that also has members beneath it is marked with ".".
        fn mark(node: &mut Map<String, Value>, prefix: &mut Path, set: &BTreeSet<Path>) {
            for (key, child) in node.iter_mut() {
                let Some(element) = decode(key) else { continue };
                prefix.push(element);
                if let Value::Object(children) = child {
                    if !children.is_empty() {
                        mark(children, prefix, set);
                        if set.contains(prefix) {
                            children.insert(".".into(), Value::Object(Map::new()));
                        }
                    }
                }
                prefix.pop();
            }
        }
        mark(&mut root, &mut Vec::new(), &self.0);
        Value::Object(root)
    }

    pub fn from_fields_v1(value: &Value) -> Self {
        fn walk(node: &Map<String, Value>, prefix: &mut Path, set: &mut BTreeSet<Path>) {
            for (key, child) in node {
                if key == "." {
                    set.insert(prefix.clone());
                    continue;
                }
                let Some(element) = decode(key) else { continue };
                prefix.push(element);
                match child.as_object() {
                    Some(children) if !children.is_empty() => walk(children, prefix, set),
                    _ => {
                        set.insert(prefix.clone());
                    }
                }
                prefix.pop();
            }
        }
        let mut set = BTreeSet::new();
        if let Some(root) = value.as_object() {
            walk(root, &mut Vec::new(), &mut set);
        }
        Self(set)
    }
}

fn collect(value: &Value, shape: &Shape, names: &mut Vec<String>, path: Path, set: &mut BTreeSet<Path>) {
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    match value {
        Value::Object(map) if !map.is_empty() && !shape.map_is_atomic(&name_refs) => {
            for (field, child) in map {
                let mut child_path = path.clone();
                child_path.push(Element::Field(field.clone()));
                names.push(field.clone());
                collect(child, shape, names, child_path, set);
                names.pop();
            }
        }
        Value::Array(items) => match shape.list_type(&name_refs) {
            ListType::Atomic => {
                set.insert(path);
            }
            ListType::Set => {
                for item in items {
                    let mut item_path = path.clone();
                    item_path.push(Element::Value(item.to_string()));
                    set.insert(item_path);
                }
            }
            ListType::Map(keys) => {
                for item in items {
                    let mut item_path = path.clone();
                    item_path.push(Element::Key(canonical_key(item, &keys)));
                    set.insert(item_path.clone());
                    if let Value::Object(fields) = item {
                        for (field, child) in fields {
                            let mut child_path = item_path.clone();
                            child_path.push(Element::Field(field.clone()));
                            names.push(field.clone());
                            collect(child, shape, names, child_path, set);
                            names.pop();
                        }
                    }
                }
            }
        },
        _ => {
            set.insert(path);
        }
    }
}

fn encode(element: &Element) -> String {
    match element {
        Element::Field(name) => format!("f:{name}"),
        Element::Key(key) => format!("k:{key}"),
        Element::Value(value) => format!("v:{value}"),
        Element::Index(index) => format!("i:{index}"),
    }
}

fn decode(key: &str) -> Option<Element> {
    let (kind, rest) = key.split_once(':')?;
    Some(match kind {
        "f" => Element::Field(rest.to_owned()),
        "k" => Element::Key(rest.to_owned()),
        "v" => Element::Value(rest.to_owned()),
        "i" => Element::Index(rest.parse().ok()?),
        _ => return None,
    })
}

/// A path as server-side apply writes it in conflict messages: `.spec.containers[name="app"].image`.
pub fn display(path: &Path) -> String {
    let mut text = String::new();
    for element in path {
        match element {
            Element::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            Element::Key(key) => {
                let fields: BTreeMap<String, Value> = serde_json::from_str(key).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                text.push_str(&format!("[{}]", parts.join(",")));
            }
            Element::Value(value) => text.push_str(&format!("[={value}]")),
            Element::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

/// The value at `path`, if there is one.
pub fn get<'a>(value: &'a Value, path: &[Element]) -> Option<&'a Value> {
    let mut node = value;
    for element in path {
        node = match element {
            Element::Field(name) => node.get(name)?,
            Element::Index(index) => node.get(*index)?,
            Element::Key(key) => {
                let fields: Map<String, Value> = serde_json::from_str(key).ok()?;
                node.as_array()?.iter().find(|item| fields.iter().all(|(k, v)| item.get(k) == Some(v)))?
            }
            Element::Value(text) => {
                let wanted: Value = serde_json::from_str(text).ok()?;
                node.as_array()?.iter().find(|item| **item == wanted)?
            }
        };
    }
    Some(node)
}

/// Removes what `path` names (a field, a list item or a set member).
pub fn remove(value: &mut Value, path: &[Element]) {
    let Some((last, parent_path)) = path.split_last() else { return };
    let mut node = value;
    for element in parent_path {
        let next = match element {
            Element::Field(name) => node.get_mut(name),
            Element::Index(index) => node.get_mut(*index),
            Element::Key(key) => {
                let Ok(fields) = serde_json::from_str::<Map<String, Value>>(key) else { return };
                node.as_array_mut()
                    .and_then(|items| items.iter_mut().find(|item| fields.iter().all(|(k, v)| item.get(k) == Some(v))))
            }
            Element::Value(_) => None,
        };
        let Some(next) = next else { return };
        node = next;
    }
    match last {
        Element::Field(name) => {
            if let Some(map) = node.as_object_mut() {
                map.remove(name);
            }
        }
        Element::Index(index) => {
            if let Some(items) = node.as_array_mut() {
                if *index < items.len() {
                    items.remove(*index);
                }
            }
        }
        Element::Key(key) => {
            let Ok(fields) = serde_json::from_str::<Map<String, Value>>(key) else { return };
            if let Some(items) = node.as_array_mut() {
                items.retain(|item| !fields.iter().all(|(k, v)| item.get(k) == Some(v)));
            }
        }
        Element::Value(text) => {
            let Ok(wanted) = serde_json::from_str::<Value>(text) else { return };
            if let Some(items) = node.as_array_mut() {
                items.retain(|item| *item != wanted);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_of_an_object_and_their_encoding_round_trip() {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "1"}, "finalizers": ["x/y"]},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "app", "image": "i", "args": ["a"]}]}}}, "status": {"replicas": 1}});
        let set = FieldSet::of(&object, &Shape::builtin("Deployment"), Scope::MainResource);
        let encoded = set.to_fields_v1();
        assert_eq!(
            encoded,
            json!({"f:metadata": {"f:labels": {"f:a": {}}, "f:finalizers": {"v:\"x/y\"": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:name": {}, "f:image": {}, "f:args": {}}}}}}})
        );
        assert_eq!(FieldSet::from_fields_v1(&encoded), set);
        let status = FieldSet::of(&object, &Shape::builtin("Deployment"), Scope::Status);
        assert_eq!(status.to_fields_v1(), json!({"f:status": {"f:replicas": {}}}));
    }

    #[test]
    fn paths_are_found_removed_and_displayed() {
        let mut object = json!({"spec": {"containers": [{"name": "app", "image": "i"}, {"name": "b"}]}, "metadata": {"finalizers": ["a/b", "c/d"]}});
        let image = vec![
            Element::Field("spec".into()),
            Element::Field("containers".into()),
            Element::Key("{\"name\":\"app\"}".into()),
            Element::Field("image".into()),
        ];
        assert_eq!(get(&object, &image), Some(&json!("i")));
        assert_eq!(display(&image), ".spec.containers[name=\"app\"].image");
        remove(&mut object, &image[..3]);
        assert_eq!(object["spec"]["containers"], json!([{"name": "b"}]));
        let member = vec![
            Element::Field("metadata".into()),
            Element::Field("finalizers".into()),
            Element::Value("\"a/b\"".into()),
        ];
        assert_eq!(display(&member), ".metadata.finalizers[=\"a/b\"]");
        remove(&mut object, &member);
        assert_eq!(object["metadata"]["finalizers"], json!(["c/d"]));
    }
}
