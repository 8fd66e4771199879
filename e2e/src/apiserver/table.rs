//! `kubectl get` output: objects as `meta.k8s.io/v1` Tables, with the printer columns of a CRD version (JSONPath
//! cells) or the columns kube-apiserver prints for the built-in kinds the project uses.

use serde_json::{json, Value};

use super::resources::ResourceType;

fn column(name: &str, kind: &str, format: &str, priority: u32, description: &str) -> Value {
    json!({"name": name, "type": kind, "format": format, "description": description, "priority": priority})
}

fn name_column() -> Value {
    column("Name", "string", "name", 0, "Name must be unique within a namespace.")
}

fn age_column() -> Value {
    column(
        "Age",
        "string",
        "",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    )
}

/// Kubernetes' short age: `45s`, `12m`, `3h`, `2d`.
pub fn age(timestamp: &Value) -> Value {
    let Some(text) = timestamp.as_str() else { return json!("<unknown>") };
    let Ok(then) = text.parse::<jiff::Timestamp>() else { return json!("<invalid>") };
    let seconds = (jiff::Timestamp::now().as_second() - then.as_second()).max(0);
    json!(match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 2 => format!("{}m", s / 60),
        s if s < 86400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    })
}

/// A small JSONPath: `.a.b`, `.a[0]`, `.a[*].b` and `.a[?(@.type=="Ready")].status`.
pub fn json_path(object: &Value, path: &str) -> Vec<Value> {
    let mut current = vec![object.clone()];
    let mut rest = path.trim_start_matches('{').trim_end_matches('}').trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let field = &after[..end];
            current = current.iter().filter_map(|v| v.get(field).cloned()).collect();
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let Some(end) = after.find(']') else { return Vec::new() };
            let selector = &after[..end];
            rest = &after[end + 1..];
            current = current.iter().flat_map(|v| select(v, selector)).collect();
        } else {
            return Vec::new();
        }
    }
    current
}

fn select(value: &Value, selector: &str) -> Vec<Value> {
    let items = value.as_array().cloned().unwrap_or_default();
    if selector == "*" {
        return items;
    }
    if let Ok(index) = selector.parse::<usize>() {
        return items.get(index).cloned().into_iter().collect();
    }
    let Some(filter) = selector.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) else { return Vec::new() };
    let Some((field, wanted)) = filter.split_once("==") else { return Vec::new() };
    let wanted = wanted.trim().trim_matches('"').trim_matches('\'');
    items
        .into_iter()
        .filter(|item| {
            json_path(item, &format!(".{}", field.trim()))
                .first()
                .is_some_and(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned) == wanted)
        })
        .collect()
}

fn cell(object: &Value, definition: &Value) -> Value {
    let found = json_path(object, definition["jsonPath"].as_str().unwrap_or_default());
    let Some(first) = found.first() else { return Value::Null };
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    match definition["type"].as_str() {
        Some("date") => age(first),
        Some("integer" | "number" | "boolean") => first.clone(),
        _ if found.len() > 1 => json!(found.iter().map(text).collect::<Vec<_>>().join(",")),
        _ => json!(text(first)),
    }
}

fn count(value: &Value) -> Value {
    json!(value.as_object().map_or(0, serde_json::Map::len))
}

/// The columns and the cells of one object.
/// The cells of one object's row.
type Cells = Box<dyn Fn(&Value) -> Vec<Value>>;

fn columns_and_cells(resource: &ResourceType) -> (Vec<Value>, Cells) {
    if resource.schema.is_some() {
        let definitions = resource.printer_columns.clone();
        if definitions.is_empty() {
            return (
                vec![name_column(), age_column()],
                Box::new(|o| vec![o["metadata"]["name"].clone(), age(&o["metadata"]["creationTimestamp"])]),
            );
        }
        let mut columns = vec![name_column()];
        columns.extend(definitions.iter().map(|d| {
            column(
                d["name"].as_str().unwrap_or_default(),
                d["type"].as_str().unwrap_or("string"),
                d["format"].as_str().unwrap_or_default(),
                d["priority"].as_u64().unwrap_or(0) as u32,
                d["description"].as_str().unwrap_or_default(),
            )
        }));
        return (
            columns,
            Box::new(move |o| {
                let mut cells = vec![o["metadata"]["name"].clone()];
                cells.extend(definitions.iter().map(|d| cell(o, d)));
                cells
            }),
        );
    }
    let string = |name: &str, priority: u32| column(name, "string", "", priority, "");
    let integer = |name: &str| column(name, "integer", "", 0, "");
    match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Namespace") => (
            vec![name_column(), string("Status", 0), age_column()],
            Box::new(|o| {
                vec![
                    o["metadata"]["name"].clone(),
                    o["status"]["phase"].clone(),
                    age(&o["metadata"]["creationTimestamp"]),
                ]
            }),
        ),
        ("", "ConfigMap") => (
            vec![name_column(), integer("Data"), age_column()],
            Box::new(|o| {
                let total = o["data"].as_object().map_or(0, serde_json::Map::len)
                    + o["binaryData"].as_object().map_or(0, serde_json::Map::len);
                vec![o["metadata"]["name"].clone(), json!(total), age(&o["metadata"]["creationTimestamp"])]
            }),
        ),
        ("", "Secret") => (
            vec![name_column(), string("Type", 0), integer("Data"), age_column()],
            Box::new(|o| {
                vec![
                    o["metadata"]["name"].clone(),
                    o["type"].clone(),
                    count(&o["data"]),
                    age(&o["metadata"]["creationTimestamp"]),
                ]
            }),
        ),
        ("apps", "Deployment") => (
            vec![
                name_column(),
                string("Ready", 0),
                integer("Up-to-date"),
                integer("Available"),
                age_column(),
                string("Containers", 1),
                string("Images", 1),
                string("Selector", 1),
            ],
            Box::new(|o| {
                let containers = o["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default();
                let names: Vec<&str> = containers.iter().filter_map(|c| c["name"].as_str()).collect();
                let images: Vec<&str> = containers.iter().filter_map(|c| c["image"].as_str()).collect();
                let selector: Vec<String> = o["spec"]["selector"]["matchLabels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect();
                let number = |v: &Value| v.as_i64().unwrap_or(0);
                vec![
                    o["metadata"]["name"].clone(),
                    json!(format!(
                        "{}/{}",
                        number(&o["status"]["readyReplicas"]),
                        o["spec"]["replicas"].as_i64().unwrap_or(1)
                    )),
                    json!(number(&o["status"]["updatedReplicas"])),
                    json!(number(&o["status"]["availableReplicas"])),
                    age(&o["metadata"]["creationTimestamp"]),
                    json!(names.join(",")),
                    json!(images.join(",")),
                    json!(selector.join(",")),
                ]
            }),
        ),
        ("", "Pod") => (
            vec![name_column(), string("Ready", 0), string("Status", 0), integer("Restarts"), age_column()],
            Box::new(|o| {
                let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
                let ready = o["status"]["containerStatuses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["ready"] == true)
                    .count();
                vec![
                    o["metadata"]["name"].clone(),
                    json!(format!("{ready}/{total}")),
                    o["status"]["phase"].clone(),
                    json!(0),
                    age(&o["metadata"]["creationTimestamp"]),
                ]
            }),
        ),
        ("" | "events.k8s.io", "Event") => (
            vec![
                string("Last Seen", 0),
                string("Type", 0),
                string("Reason", 0),
                string("Object", 0),
                string("Subobject", 1),
                string("Source", 1),
                string("Message", 0),
                string("First Seen", 1),
                string("Count", 1),
                column("Name", "string", "name", 1, ""),
            ],
            Box::new(|o| event_cells(&super::events::to_core(o.clone()))),
        ),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (
            vec![name_column(), column("Created At", "date", "", 0, "")],
            Box::new(|o| vec![o["metadata"]["name"].clone(), o["metadata"]["creationTimestamp"].clone()]),
        ),
        _ => (
            vec![name_column(), age_column()],
            Box::new(|o| vec![o["metadata"]["name"].clone(), age(&o["metadata"]["creationTimestamp"])]),
        ),
    }
}

/// An Event's row as kube-apiserver prints it, from its core form: times from the deprecated timestamps or else the
/// event time and series, a count of 1 for a singleton of the new API, the object as `kind/name`.
fn event_cells(event: &Value) -> Vec<Value> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let first_seen = if event["firstTimestamp"].is_string() { &event["firstTimestamp"] } else { &event["eventTime"] };
    let first_seen = age(first_seen);
    let mut last_seen =
        if event["lastTimestamp"].is_string() { age(&event["lastTimestamp"]) } else { first_seen.clone() };
    let mut count = event["count"].as_i64().unwrap_or(0);
    if event["series"].is_object() {
        last_seen = age(&event["series"]["lastObservedTime"]);
        count = event["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let involved = &event["involvedObject"];
    let kind = text(&involved["kind"]).to_lowercase();
    let target = match text(&involved["name"]) {
        name if name.is_empty() => kind,
        name => format!("{kind}/{name}"),
    };
    let first_non_empty = |a: &Value, b: &Value| if text(a).is_empty() { text(b) } else { text(a) };
    let component = first_non_empty(&event["source"]["component"], &event["reportingComponent"]);
    let instance = first_non_empty(&event["source"]["host"], &event["reportingInstance"]);
    let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
    vec![
        last_seen,
        event["type"].clone(),
        event["reason"].clone(),
        json!(target),
        json!(text(&involved["fieldPath"])),
        json!(source),
        json!(text(&event["message"]).trim()),
        first_seen,
        json!(count),
        event["metadata"]["name"].clone(),
    ]
}

/// How much of each object a row carries (`includeObject`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub fn parse(text: Option<&str>) -> Self {
        match text {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

fn row(object: &Value, cells: &dyn Fn(&Value) -> Vec<Value>, include: Include) -> Value {
    let mut row = json!({"cells": cells(object)});
    match include {
        Include::None => {}
        Include::Metadata => {
            row["object"] =
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]})
        }
        Include::Object => row["object"] = object.clone(),
    }
    row
}

/// A Table of `objects`, with the list metadata given.
pub fn table(resource: &ResourceType, objects: &[Value], list_metadata: Value, include: Include) -> Value {
    let (columns, cells) = columns_and_cells(resource);
    let rows: Vec<Value> = objects.iter().map(|o| row(o, cells.as_ref(), include)).collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata, "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_of_printer_columns() {
        let object = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]}, "spec": {"items": [{"n": 1}, {"n": 2}]}});
        assert_eq!(json_path(&object, ".status.conditions[?(@.type==\"Ready\")].status"), [json!("True")]);
        assert_eq!(json_path(&object, ".spec.items[*].n"), [json!(1), json!(2)]);
        assert_eq!(json_path(&object, ".spec.items[1].n"), [json!(2)]);
        assert!(json_path(&object, ".missing.field").is_empty());
    }

    #[test]
    fn ages_are_short() {
        let now = jiff::Timestamp::now();
        let ago =
            |seconds: i64| json!(now.checked_sub(jiff::SignedDuration::from_secs(seconds)).expect("time").to_string());
        assert_eq!(age(&ago(30)), json!("30s"));
        assert_eq!(age(&ago(600)), json!("10m"));
        assert_eq!(age(&ago(3 * 86400)), json!("3d"));
    }
}
