//! The three patch types of PATCH requests: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge
//! patch, which merges lists by their merge keys and obeys the `$patch`, `$retainKeys`, `$setElementOrder/` and
//! `$deleteFromPrimitiveList/` directives that kubectl sends.

use serde_json::{Map, Value};

use crate::merge::shape::{ListType, Shape};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    /// The patch document itself is malformed (400).
    #[error("{0}")]
    Malformed(String),
    /// The patch does not apply to this object (422).
    #[error("{0}")]
    Inapplicable(String),
}

pub fn merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError::Malformed("merge patch must be a JSON object".into()));
    }
    let mut merged = target.clone();
    json_patch::merge(&mut merged, patch);
    Ok(merged)
}

pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let operations: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| PatchError::Malformed(format!("invalid JSON patch: {e}")))?;
    let mut patched = target.clone();
    json_patch::patch(&mut patched, &operations).map_err(|e| PatchError::Inapplicable(e.to_string()))?;
    Ok(patched)
}

const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVES: &str = "$deleteFromPrimitiveList/";

/// Strategic merge patch of a built-in kind, as `strategicpatch.StrategicMergePatch` does it.
pub fn strategic_merge_patch(target: &Value, patch: &Value, shape: &Shape) -> Result<Value, PatchError> {
    let (Value::Object(original), Value::Object(patch)) = (target, patch) else {
        return Err(PatchError::Malformed("strategic merge patch must be a JSON object".into()));
    };
    let mut path = Vec::new();
    Ok(merge_map(original, patch, shape, &mut path)?.map_or(Value::Object(Map::new()), Value::Object))
}

/// Merges a patch map into an original; `None` when the patch deletes the map itself.
fn merge_map(
    original: &Map<String, Value>,
    patch: &Map<String, Value>,
    shape: &Shape,
    path: &mut Vec<String>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Ok(None),
        Some("replace") => return Ok(Some(without_directives(patch))),
        Some("merge") | None => {}
        Some(other) => return Err(PatchError::Malformed(format!("unknown patch type: {other}"))),
    }
    let mut merged = original.clone();
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix(DELETE_PRIMITIVES) {
            let remove: Vec<&Value> = value.as_array().map(|a| a.iter().collect()).unwrap_or_default();
            if let Some(Value::Array(items)) = merged.get_mut(field) {
                items.retain(|item| !remove.contains(&item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            merged.remove(key);
            continue;
        }
        path.push(key.clone());
        let result = match (merged.get(key), value) {
            (Some(Value::Object(current)), Value::Object(change)) => {
                merge_map(current, change, shape, path)?.map(Value::Object)
            }
            (_, Value::Object(change)) => merge_map(&Map::new(), change, shape, path)?.map(Value::Object),
            (Some(Value::Array(current)), Value::Array(change)) => {
                Some(Value::Array(merge_list(current, change, shape, path)?))
            }
            (None, Value::Array(change)) => Some(Value::Array(merge_list(&[], change, shape, path)?)),
            (_, scalar) => Some(scalar.clone()),
        };
        path.pop();
        match result {
            Some(value) => {
                merged.insert(key.clone(), value);
            }
            None => {
                merged.remove(key);
            }
        }
    }
    for (key, order) in patch.iter().filter_map(|(k, v)| Some((k.strip_prefix(SET_ORDER)?, v))) {
        if let (Some(Value::Array(items)), Some(order)) = (merged.get_mut(key), order.as_array()) {
            path.push(key.to_owned());
            reorder(items, order, &shape.list_type(&path_refs(path)));
            path.pop();
        }
    }
    if let Some(retain) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        merged.retain(|key, _| keep.contains(&key.as_str()));
    }
    Ok(Some(merged))
}

fn path_refs(path: &[String]) -> Vec<&str> {
    path.iter().map(String::as_str).collect()
}

fn without_directives(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn key_of<'a>(item: &'a Value, keys: &[String]) -> Vec<Option<&'a Value>> {
    keys.iter().map(|key| item.get(key)).collect()
}

fn merge_list(
    original: &[Value],
    patch: &[Value],
    shape: &Shape,
    path: &mut Vec<String>,
) -> Result<Vec<Value>, PatchError> {
    match shape.list_type(&path_refs(path)) {
        ListType::Atomic => Ok(patch.to_vec()),
        ListType::Set => {
            let mut merged = original.to_vec();
            for item in patch {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
            Ok(merged)
        }
        ListType::Map(keys) => {
            if patch.iter().any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace")) {
                return Ok(patch.iter().filter(|i| i.get("$patch").is_none()).cloned().collect());
            }
            let mut merged = original.to_vec();
            for item in patch {
                let Value::Object(change) = item else {
                    return Err(PatchError::Malformed(format!("list items of {} must be objects", path.join("."))));
                };
                let key = key_of(item, &keys);
                if key.iter().any(Option::is_none) {
                    return Err(PatchError::Malformed(format!(
                        "map: {item} does not contain declared merge key: {}",
                        keys.join(",")
                    )));
                }
                let position = merged.iter().position(|existing| key_of(existing, &keys) == key);
                let deleting = change.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, deleting) {
                    (Some(index), true) => {
                        merged.remove(index);
                    }
                    (None, true) => {}
                    (Some(index), false) => {
                        let current = merged[index].as_object().cloned().unwrap_or_default();
                        if let Some(value) = merge_map(&current, change, shape, path)? {
                            merged[index] = Value::Object(value);
                        }
                    }
                    (None, false) => {
                        if let Some(value) = merge_map(&Map::new(), change, shape, path)? {
                            merged.push(Value::Object(value));
                        }
                    }
                }
            }
            Ok(merged)
        }
    }
}

/// Orders a merged list as `$setElementOrder` says; items it does not mention keep their place after those it does.
fn reorder(items: &mut Vec<Value>, order: &[Value], list_type: &ListType) {
    let rank = |item: &Value| {
        order.iter().position(|wanted| match list_type {
            ListType::Map(keys) => keys.iter().all(|k| wanted.get(k) == item.get(k)),
            _ => wanted == item,
        })
    };
    let mut ranked: Vec<(usize, Value)> =
        items.drain(..).enumerate().map(|(i, item)| (rank(&item).unwrap_or(order.len() + i), item)).collect();
    ranked.sort_by_key(|(rank, _)| *rank);
    items.extend(ranked.into_iter().map(|(_, item)| item));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({"metadata": {"name": "d", "labels": {"a": "1"}, "finalizers": ["x/a"]}, "spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}], "args": ["--x"]},
            {"name": "side", "image": "side:1"}]}}}})
    }

    #[test]
    fn strategic_merge_merges_containers_by_name_and_replaces_atomic_lists() {
        let patch = json!({"metadata": {"labels": {"a": null, "b": "2"}, "finalizers": ["x/b"]}, "spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}], "args": ["--y"]}]}}}});
        let merged = strategic_merge_patch(&deployment(), &patch, &Shape::builtin("Deployment")).expect("applies");
        assert_eq!(merged["metadata"]["labels"], json!({"b": "2"}));
        assert_eq!(merged["metadata"]["finalizers"], json!(["x/a", "x/b"]));
        let containers = &merged["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["image"], "app:2");
        assert_eq!(containers[0]["env"], json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]));
        assert_eq!(containers[0]["args"], json!(["--y"]));
        assert_eq!(containers[1]["name"], "side");
        assert_eq!(merged["spec"]["replicas"], 1);
    }

    #[test]
    fn strategic_merge_directives() {
        let patch = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x/a"]}, "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "app"}],
            "containers": [{"name": "side", "$patch": "delete"}, {"name": "new", "image": "n"}]}}}});
        let merged = strategic_merge_patch(&deployment(), &patch, &Shape::builtin("Deployment")).expect("applies");
        assert_eq!(merged["metadata"]["finalizers"], json!([]));
        let names: Vec<&str> = merged["spec"]["template"]["spec"]["containers"]
            .as_array()
            .expect("list")
            .iter()
            .map(|c| c["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, ["app", "new"]);
        let replace = json!({"spec": {"$patch": "replace", "replicas": 3}});
        let merged = strategic_merge_patch(&deployment(), &replace, &Shape::builtin("Deployment")).expect("applies");
        assert_eq!(merged["spec"], json!({"replicas": 3}));
        let retain = json!({"spec": {"$retainKeys": ["replicas"], "replicas": 2}});
        let merged = strategic_merge_patch(&deployment(), &retain, &Shape::builtin("Deployment")).expect("applies");
        assert_eq!(merged["spec"], json!({"replicas": 2}));
    }

    #[test]
    fn strategic_merge_refuses_items_without_their_merge_key() {
        let patch = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
        assert!(matches!(
            strategic_merge_patch(&deployment(), &patch, &Shape::builtin("Deployment")),
            Err(PatchError::Malformed(_))
        ));
    }

    #[test]
    fn merge_and_json_patches() {
        let merged = merge_patch(&deployment(), &json!({"spec": {"template": null, "replicas": 2}})).expect("merge");
        assert_eq!(merged["spec"], json!({"replicas": 2}));
        let patched = json_patch(&deployment(), &json!([{"op": "replace", "path": "/spec/replicas", "value": 5}, {"op": "add", "path": "/metadata/labels/c", "value": "3"}])).expect("json");
        assert_eq!(
            (patched["spec"]["replicas"].clone(), patched["metadata"]["labels"]["c"].clone()),
            (json!(5), json!("3"))
        );
        assert!(matches!(
            json_patch(&deployment(), &json!([{"op": "test", "path": "/spec/replicas", "value": 9}])),
            Err(PatchError::Inapplicable(_))
        ));
        assert!(matches!(json_patch(&deployment(), &json!({"op": "add"})), Err(PatchError::Malformed(_))));
    }
}
