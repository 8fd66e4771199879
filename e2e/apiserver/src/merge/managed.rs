//! Field ownership (`metadata.managedFields`) and server-side apply: who set which field, the merge of an applied
//! configuration into the live object, conflicts with other managers (and `force`), and the removal of fields a
//! manager stops applying when nobody else owns them.

use serde_json::{json, Map, Value};

use crate::merge::fieldset::{display, get, remove, Element, FieldSet, Path, Scope};
use crate::merge::shape::{ListType, Shape};

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

impl Entry {
    fn from_json(value: &Value) -> Option<Self> {
        Some(Self {
            manager: value["manager"].as_str()?.to_owned(),
            operation: value["operation"].as_str().unwrap_or("Update").to_owned(),
            api_version: value["apiVersion"].as_str().unwrap_or_default().to_owned(),
            time: value["time"].as_str().unwrap_or_default().to_owned(),
            subresource: value["subresource"].as_str().unwrap_or_default().to_owned(),
            fields: FieldSet::from_fields_v1(&value["fieldsV1"]),
        })
    }

    fn to_json(&self) -> Value {
        let mut entry = json!({"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
            "time": self.time, "fieldsType": "FieldsV1", "fieldsV1": self.fields.to_fields_v1()});
        if !self.subresource.is_empty() {
            entry["subresource"] = json!(self.subresource);
        }
        entry
    }

    fn is(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }
}

/// Who writes, and how.
#[derive(Clone, Debug)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub time: &'a str,
    pub shape: &'a Shape,
    pub scope: Scope,
}

pub fn entries_of(object: &Value) -> Vec<Entry> {
    object["metadata"]["managedFields"].as_array().into_iter().flatten().filter_map(Entry::from_json).collect()
}

fn store_entries(object: &mut Value, entries: Vec<Entry>) {
    let list: Vec<Value> = entries.iter().filter(|e| !e.fields.is_empty()).map(Entry::to_json).collect();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Records a create, update or non-apply patch: the writer now owns the fields whose value it changed, which
/// other managers lose. `old` is `None` for a create. A request that empties `managedFields` resets them.
pub fn track_update(old: Option<&Value>, new: &mut Value, writer: &Writer<'_>) {
    let requested = new["metadata"].get("managedFields").cloned();
    let mut entries = match (&requested, old) {
        (Some(Value::Array(list)), _) if list.is_empty() => {
            store_entries(new, Vec::new());
            return;
        }
        (Some(list @ Value::Array(_)), Some(old)) if Some(list) != old["metadata"].get("managedFields") => {
            entries_of(&json!({"metadata": {"managedFields": list}}))
        }
        (_, Some(old)) => entries_of(old),
        (_, None) => Vec::new(),
    };
    let empty = json!({});
    let before = old.unwrap_or(&empty);
    let new_fields = FieldSet::of(new, writer.shape, writer.scope);
    let old_fields = FieldSet::of(before, writer.shape, writer.scope);
    let changed: Vec<Path> = new_fields.0.iter().filter(|path| get(before, path) != get(new, path)).cloned().collect();
    let removed: Vec<Path> = old_fields.0.iter().filter(|path| !new_fields.contains(path)).cloned().collect();
    if changed.is_empty() && removed.is_empty() && old.is_some() {
        store_entries(new, entries);
        return;
    }
    for entry in &mut entries {
        for path in changed.iter().chain(&removed) {
            entry.fields.0.remove(path);
        }
    }
    let position = entries.iter().position(|e| e.is(writer.manager, "Update", writer.subresource));
    let mut own = position.map(|i| entries.remove(i)).unwrap_or_else(|| Entry {
        manager: writer.manager.to_owned(),
        operation: "Update".into(),
        api_version: writer.api_version.to_owned(),
        time: writer.time.to_owned(),
        subresource: writer.subresource.to_owned(),
        fields: FieldSet::default(),
    });
    own.fields.0.extend(changed);
    own.api_version = writer.api_version.to_owned();
    own.time = writer.time.to_owned();
    entries.push(own);
    store_entries(new, entries);
}

/// A field another manager owns with a different value than the applied one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    pub path: String,
    pub at: Path,
}

/// The message kube-apiserver gives for apply conflicts.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    let count = conflicts.len();
    let noun = if count == 1 { "conflict" } else { "conflicts" };
    let mut managers: Vec<(&str, &str)> =
        conflicts.iter().map(|c| (c.manager.as_str(), c.api_version.as_str())).collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for (manager, api_version) in managers {
        let paths: Vec<&str> = conflicts.iter().filter(|c| c.manager == manager).map(|c| c.path.as_str()).collect();
        match paths.as_slice() {
            [one] => lines.push(format!("conflict with \"{manager}\" using {api_version}: {one}")),
            many => {
                lines.push(format!("conflicts with \"{manager}\" using {api_version}:"));
                lines.extend(many.iter().map(|p| format!("- {p}")));
            }
        }
    }
    format!("Apply failed with {count} {noun}: {}", lines.join("\n"))
}

/// Server-side apply of `config` onto `live` (`None` creates). Returns the new object with its managed fields.
pub fn apply(live: Option<&Value>, config: &Value, writer: &Writer<'_>, force: bool) -> Result<Value, Vec<Conflict>> {
    let empty = json!({});
    let base = live.unwrap_or(&empty);
    let mut entries = live.map(entries_of).unwrap_or_default();
    let config_fields = FieldSet::of(config, writer.shape, writer.scope);
    let mut merged = merge(base, config, writer.shape, &mut Vec::new());
    let mut conflicts = Vec::new();
    let mut taken: Vec<(usize, Path)> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        if entry.is(writer.manager, "Apply", writer.subresource) {
            continue;
        }
        for path in entry.fields.0.intersection(&config_fields.0) {
            let leaf = matches!(path.last(), Some(Element::Field(_) | Element::Index(_)));
            if leaf && get(base, path) != get(&merged, path) {
                conflicts.push(Conflict {
                    manager: entry.manager.clone(),
                    api_version: entry.api_version.clone(),
                    path: display(path),
                    at: path.clone(),
                });
                taken.push((index, path.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for (index, path) in taken {
        if let Some(entry) = entries.get_mut(index) {
            entry.fields.0.remove(&path);
        }
    }
    let position = entries.iter().position(|e| e.is(writer.manager, "Apply", writer.subresource));
    let previous = position.map(|i| entries.remove(i));
    if let Some(previous) = &previous {
        let mut dropped: Vec<&Path> = previous.fields.0.iter().filter(|p| !config_fields.contains(p)).collect();
        // Whole list items go first: their key fields must still be there to find them.
        dropped.sort_by_key(|p| p.len());
        let mut emptied: std::collections::BTreeSet<Path> = std::collections::BTreeSet::new();
        for path in dropped {
            if !entries.iter().any(|e| e.fields.touches(path)) && !config_fields.touches(path) {
                remove(&mut merged, path);
                emptied.extend((1..path.len()).map(|n| path[..n].to_vec()));
            }
        }
        // A named field is owned through the fields under it (structured-merge-diff's EnsureNamedFieldsAreMembers):
        // the struct its removed fields leave empty goes too, deepest first, unless someone still owns it.
        let mut parents: Vec<Path> = emptied.into_iter().collect();
        parents.sort_by_key(|path| std::cmp::Reverse(path.len()));
        for parent in parents {
            let named = matches!(parent.last(), Some(Element::Field(_)));
            let empty = get(&merged, &parent).is_some_and(|value| value.as_object().is_some_and(|map| map.is_empty()));
            let owned = entries.iter().any(|e| e.fields.touches(&parent)) || config_fields.touches(&parent);
            if named && empty && !owned {
                remove(&mut merged, &parent);
            }
        }
    }
    entries.push(Entry {
        manager: writer.manager.to_owned(),
        operation: "Apply".into(),
        api_version: writer.api_version.to_owned(),
        time: writer.time.to_owned(),
        subresource: writer.subresource.to_owned(),
        fields: config_fields,
    });
    store_entries(&mut merged, entries);
    Ok(merged)
}

/// The fields kubectl's client-side apply recorded in the last-applied annotation whose values still match the live
/// object: the conflicts an apply by the `kubectl` manager may take over, as kube-apiserver's upgrade from
/// client-side to server-side apply allows.
pub fn last_applied_fields(live: &Value, shape: &Shape, scope: Scope) -> FieldSet {
    let Some(text) = live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str()
    else {
        return FieldSet::default();
    };
    let Ok(last_applied) = serde_json::from_str::<Value>(text) else { return FieldSet::default() };
    if last_applied["apiVersion"] != live["apiVersion"] {
        return FieldSet::default();
    }
    let mut fields = FieldSet::of(&last_applied, shape, scope);
    fields.0.retain(|path| get(&last_applied, path) == get(live, path));
    fields
}

/// The structured merge of an applied configuration into the live object.
fn merge(live: &Value, config: &Value, shape: &Shape, names: &mut Vec<String>) -> Value {
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    match (live, config) {
        (Value::Object(current), Value::Object(applied)) if !shape.map_is_atomic(&refs) => {
            let mut merged: Map<String, Value> = current.clone();
            for (key, value) in applied {
                if value.is_null() {
                    merged.remove(key);
                    continue;
                }
                names.push(key.clone());
                let next = merge(current.get(key).unwrap_or(&Value::Null), value, shape, names);
                names.pop();
                merged.insert(key.clone(), next);
            }
            Value::Object(merged)
        }
        (Value::Array(current), Value::Array(applied)) => match shape.list_type(&refs) {
            ListType::Atomic => config.clone(),
            ListType::Set => {
                let mut merged = current.clone();
                for item in applied {
                    if !merged.contains(item) {
                        merged.push(item.clone());
                    }
                }
                Value::Array(merged)
            }
            ListType::Map(keys) => {
                let mut merged = current.clone();
                for item in applied {
                    let same = |existing: &Value| keys.iter().all(|k| existing.get(k) == item.get(k));
                    match merged.iter().position(same) {
                        Some(index) => merged[index] = merge(&merged[index].clone(), item, shape, names),
                        None => merged.push(merge(&Value::Null, item, shape, names)),
                    }
                }
                Value::Array(merged)
            }
        },
        (_, Value::Object(applied)) => merge(&Value::Object(Map::new()), &Value::Object(applied.clone()), shape, names),
        _ => config.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer<'a>(manager: &'a str, shape: &'a Shape) -> Writer<'a> {
        Writer {
            manager,
            api_version: "v1",
            subresource: "",
            time: "2026-01-01T00:00:00Z",
            shape,
            scope: Scope::MainResource,
        }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    #[test]
    fn apply_creates_then_merges_and_removes_what_is_no_longer_applied() {
        let shape = Shape::builtin("ConfigMap");
        let created = apply(None, &cm(json!({"a": "1", "b": "2"})), &writer("m", &shape), false).expect("applies");
        assert_eq!(created["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(created["metadata"]["managedFields"][0]["fieldsV1"], json!({"f:data": {"f:a": {}, "f:b": {}}}));
        assert_eq!(created["metadata"]["managedFields"][0]["operation"], "Apply");
        let again = apply(Some(&created), &cm(json!({"a": "1"})), &writer("m", &shape), false).expect("applies");
        assert_eq!(again["data"], json!({"a": "1"}), "b was applied before and is no longer: removed");
    }

    #[test]
    fn a_struct_whose_applied_fields_are_all_dropped_is_removed_not_left_empty() {
        let shape = Shape::builtin("ConfigMap");
        let status = |policy: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"},
                   "status": policy})
        };
        let status_writer = |manager| Writer { scope: Scope::All, ..writer(manager, &shape) };
        let with = status(json!({"policy": {"state": "Exceeds", "detail": {"count": 1}}, "state": "Installed"}));
        let first = apply(None, &with, &status_writer("m"), false).expect("applies");
        let without =
            apply(Some(&first), &status(json!({"state": "Installed"})), &status_writer("m"), false).expect("applies");
        assert_eq!(without["status"], json!({"state": "Installed"}), "no `policy: {{}}` left behind");
        // A struct someone else still owns a field of stays, with that field.
        let mut edited = first.clone();
        edited["status"]["policy"]["note"] = json!("kept");
        track_update(Some(&first), &mut edited, &status_writer("editor"));
        let kept =
            apply(Some(&edited), &status(json!({"state": "Installed"})), &status_writer("m"), false).expect("applies");
        assert_eq!(kept["status"]["policy"], json!({"note": "kept"}));
    }

    #[test]
    fn conflicts_with_other_managers_unless_forced_and_shared_values_stay() {
        let shape = Shape::builtin("ConfigMap");
        let mut object = apply(None, &cm(json!({"a": "1"})), &writer("first", &shape), false).expect("applies");
        let mut edited = object.clone();
        edited["data"]["b"] = json!("x");
        track_update(Some(&object), &mut edited, &writer("editor", &shape));
        object = edited;
        let conflicts = apply(Some(&object), &cm(json!({"a": "2", "b": "y"})), &writer("second", &shape), false)
            .expect_err("conflicts");
        assert_eq!(
            conflict_message(&conflicts),
            "Apply failed with 2 conflicts: conflict with \"editor\" using v1: .data.b\nconflict with \"first\" using v1: .data.a"
        );
        let same_value =
            apply(Some(&object), &cm(json!({"a": "1"})), &writer("second", &shape), false).expect("no conflict");
        let owners: Vec<&str> = same_value["metadata"]["managedFields"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["manager"].as_str().expect("manager"))
            .collect();
        assert_eq!(owners, ["first", "editor", "second"]);
        let forced = apply(Some(&object), &cm(json!({"a": "2"})), &writer("second", &shape), true).expect("forced");
        assert_eq!(forced["data"]["a"], "2");
        let first = entries_of(&forced).into_iter().find(|e| e.manager == "first");
        assert!(first.is_none(), "the first manager lost its only field and its entry");
        let removed = apply(Some(&forced), &cm(json!({})), &writer("second", &shape), false).expect("applies");
        assert_eq!(removed["data"], json!({"b": "x"}), "a was owned by second alone; b by the editor");
    }

    #[test]
    fn updates_move_ownership_and_an_empty_list_resets() {
        let shape = Shape::builtin("ConfigMap");
        let mut created = cm(json!({"a": "1"}));
        track_update(None, &mut created, &writer("creator", &shape));
        assert_eq!(created["metadata"]["managedFields"][0]["operation"], "Update");
        let mut changed = created.clone();
        changed["data"]["a"] = json!("2");
        track_update(Some(&created), &mut changed, &writer("other", &shape));
        let managers: Vec<String> = entries_of(&changed).into_iter().map(|e| e.manager).collect();
        assert_eq!(managers, ["other"]);
        let mut reset = changed.clone();
        reset["metadata"]["managedFields"] = json!([]);
        track_update(Some(&changed), &mut reset, &writer("other", &shape));
        assert!(reset["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn last_applied_fields_are_those_still_matching_the_live_object() {
        let shape = Shape::builtin("ConfigMap");
        let annotation =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "old"}})
                .to_string();
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": annotation}}, "data": {"a": "1", "b": "new"}});
        let fields = last_applied_fields(&live, &shape, Scope::All);
        let data = |key: &str| vec![Element::Field("data".into()), Element::Field(key.into())];
        assert!(fields.contains(&data("a")));
        assert!(!fields.contains(&data("b")), "changed since it was last applied");
        assert!(last_applied_fields(&cm(json!({})), &shape, Scope::All).is_empty());
    }

    #[test]
    fn associative_lists_merge_by_key() {
        let shape = Shape::builtin("Deployment");
        let base = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "1"}]}}}});
        let created = apply(None, &base, &writer("m", &shape), false).expect("applies");
        let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "2"}]}}}});
        let both = apply(Some(&created), &other, &writer("n", &shape), false).expect("applies");
        assert_eq!(both["spec"]["template"]["spec"]["containers"].as_array().map(Vec::len), Some(2));
        let dropped = apply(
            Some(&both),
            &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
            &writer("m", &shape),
            false,
        )
        .expect("applies");
        assert_eq!(dropped["spec"]["template"]["spec"]["containers"], json!([{"name": "b", "image": "2"}]));
    }
}
