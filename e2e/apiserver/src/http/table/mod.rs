//! `kubectl get` output: objects as `meta.k8s.io/v1` Tables. Custom resources get their CRD version's printer
//! columns (JSONPath cells, as apiextensions-apiserver's table convertor fills them); built-in kinds the columns and
//! cells kube-apiserver's printers give them (`core_group`, `pod`, `network`, `workloads`, `cluster`), all columns at
//! once as kube-apiserver sends them (kubectl hides those of priority 1 unless `-o wide`); kinds without a printer
//! the default `Name` and `Created At`.
//!
//! May import `model`.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Value};

use crate::model::resources::ResourceType;

mod cluster;
mod core_group;
mod duration;
mod format;
mod network;
mod pod;
mod quantity;
mod workloads;

pub use duration::{age, human_duration};

/// The cells of one object's row, at a given time (ages are counted to it).
type Cells = fn(&Value, Timestamp) -> Vec<Value>;

/// The columns of a built-in kind and how its rows are filled.
struct Printer {
    columns: fn() -> Vec<Value>,
    cells: Cells,
}

/// A column definition. Descriptions are the API documentation of the field shown, as kube-apiserver takes them
/// from the Go types; empty where kube-apiserver writes its own.
fn column(name: &str, kind: &str, priority: u32, description: String) -> Value {
    json!({"name": name, "type": kind, "format": "", "description": description, "priority": priority})
}

fn string(name: &str, priority: u32, description: String) -> Value {
    column(name, "string", priority, description)
}

fn name_column() -> Value {
    let mut name = string("Name", 0, doc::<ObjectMeta>("name"));
    name["format"] = json!("name");
    name
}

fn age_column() -> Value {
    string("Age", 0, doc::<ObjectMeta>("creationTimestamp"))
}

/// The documentation of `field` of the API type `T` (k8s-openapi's, from the same Go comments as kube's), each
/// type's read once.
fn doc<T: JsonSchema>(field: &str) -> String {
    static PROPERTIES: OnceLock<Mutex<HashMap<&'static str, Value>>> = OnceLock::new();
    let mut cache = PROPERTIES.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner);
    let properties = cache.entry(std::any::type_name::<T>()).or_insert_with(|| {
        let mut generator = SchemaGenerator::new(SchemaSettings::draft2020_12());
        T::json_schema(&mut generator).as_value()["properties"].clone()
    });
    format::text(&properties[field]["description"]).to_owned()
}

fn builtin(group: &str, kind: &str) -> Option<Printer> {
    core_group::printer(group, kind)
        .or_else(|| pod::printer(group, kind))
        .or_else(|| network::printer(group, kind))
        .or_else(|| workloads::printer(group, kind))
        .or_else(|| cluster::printer(group, kind))
}

/// kube-apiserver's default table convertor, for kinds without a printer: the name and the creation time.
fn default_printer() -> Printer {
    Printer {
        columns: || vec![name_column(), column("Created At", "date", 0, doc::<ObjectMeta>("creationTimestamp"))],
        cells: |o, _| vec![format::name(o), json!(duration::created_at(&o["metadata"]["creationTimestamp"]))],
    }
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

/// A printer column's cell: the first value the path finds, as the column's type takes it (null when nothing is
/// found or the value is of another type); a string column prints any value as JSONPath's text output does.
fn cell(object: &Value, definition: &Value, now: Timestamp) -> Value {
    let found = json_path(object, format::text(&definition["jsonPath"]));
    let Some(first) = found.first().filter(|v| !v.is_null()) else { return Value::Null };
    match (format::text(&definition["type"]), first) {
        ("string", Value::String(_)) => first.clone(),
        ("string", Value::Number(number)) => json!(go_number(number)),
        ("string", Value::Bool(_) | Value::Array(_) | Value::Object(_)) => json!(first.to_string()),
        ("integer", Value::Number(number)) => {
            number.as_i64().map_or_else(|| number.as_f64().map_or(Value::Null, |f| json!(f as i64)), Value::from)
        }
        ("number", Value::Number(number)) => number.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(_)) => first.clone(),
        ("date", Value::String(_)) => json!(age(first, now)),
        _ => Value::Null,
    }
}

/// A JSON number as Go's `fmt` prints the int64 or float64 it decodes to.
fn go_number(number: &serde_json::Number) -> String {
    match (number.as_i64(), number.as_f64()) {
        (Some(integer), _) => integer.to_string(),
        (None, Some(float)) if float.fract() == 0.0 && float.abs() < 1e21 => format!("{float:.0}"),
        _ => number.to_string(),
    }
}

/// The cells of a custom resource's row, from its version's printer columns.
type ColumnCells = Box<dyn Fn(&Value, Timestamp) -> Vec<Value>>;

fn custom_resource_printer(resource: &ResourceType) -> (Vec<Value>, ColumnCells) {
    let mut definitions = resource.printer_columns.clone();
    if definitions.is_empty() {
        // apiextensions-apiserver serves an Age column for versions that declare none.
        definitions.push(json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
            "description": doc::<ObjectMeta>("creationTimestamp")}));
    }
    let mut columns = vec![name_column()];
    columns.extend(definitions.iter().map(|d| {
        let mut definition = column(
            format::text(&d["name"]),
            format::text(&d["type"]),
            u32::try_from(format::int(&d["priority"])).unwrap_or(0),
            format::text(&d["description"]).to_owned(),
        );
        definition["format"] = json!(format::text(&d["format"]));
        definition
    }));
    let cells = move |o: &Value, now: Timestamp| {
        let mut cells = vec![format::name(o)];
        cells.extend(definitions.iter().map(|d| cell(o, d, now)));
        cells
    };
    (columns, Box::new(cells))
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

fn row(object: &Value, cells: Vec<Value>, include: Include) -> Value {
    let mut row = json!({"cells": cells});
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
    let now = Timestamp::now();
    let (columns, rows): (Vec<Value>, Vec<Value>) = if resource.schema.is_some() {
        let (columns, cells) = custom_resource_printer(resource);
        (columns, objects.iter().map(|o| row(o, cells(o, now), include)).collect())
    } else {
        let printer = builtin(&resource.group, &resource.kind).unwrap_or_else(default_printer);
        ((printer.columns)(), objects.iter().map(|o| row(o, (printer.cells)(o, now), include)).collect())
    };
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_metadata, "columnDefinitions": columns, "rows": rows})
}

/// Test support: the column names, types and priorities of a built-in kind, and one object's cells.
#[cfg(test)]
fn printed(group: &str, kind: &str, object: &Value, now: &str) -> (Vec<(String, String, u64)>, Vec<Value>) {
    let printer = builtin(group, kind).unwrap_or_else(default_printer);
    let columns = (printer.columns)()
        .iter()
        .map(|c| {
            (
                format::text(&c["name"]).to_owned(),
                format::text(&c["type"]).to_owned(),
                c["priority"].as_u64().unwrap_or(9),
            )
        })
        .collect();
    (columns, (printer.cells)(object, now.parse().expect("time")))
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
    fn printer_column_cells_take_the_first_value_of_the_columns_type() {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().expect("time");
        let object =
            json!({"spec": {"size": 3, "ratio": 1.5, "on": true, "names": ["a", "b"], "when": "2026-03-01T11:00:00Z"}});
        let column = |kind: &str, path: &str| json!({"type": kind, "jsonPath": path});
        assert_eq!(cell(&object, &column("integer", ".spec.size"), now), json!(3));
        assert_eq!(cell(&object, &column("integer", ".spec.ratio"), now), json!(1));
        assert_eq!(cell(&object, &column("string", ".spec.size"), now), json!("3"));
        assert_eq!(cell(&object, &column("string", ".spec.names[*]"), now), json!("a"));
        assert_eq!(cell(&object, &column("string", ".spec.names"), now), json!("[\"a\",\"b\"]"));
        assert_eq!(cell(&object, &column("boolean", ".spec.on"), now), json!(true));
        assert_eq!(cell(&object, &column("integer", ".spec.names"), now), Value::Null);
        assert_eq!(cell(&object, &column("date", ".spec.when"), now), json!("60m"));
        assert_eq!(cell(&object, &column("string", ".spec.missing"), now), Value::Null);
    }

    #[test]
    fn every_listable_builtin_kind_has_its_printer() {
        // kube-apiserver has no printer for these: they get the default columns.
        let default = ["Role", "ClusterRole", "CustomResourceDefinition"];
        for resource in crate::model::resources::Resources::default().all() {
            if !resource.verbs.iter().any(|v| v == "list") {
                continue;
            }
            let printer = builtin(&resource.group, &resource.kind);
            assert_eq!(printer.is_none(), default.contains(&resource.kind.as_str()), "{}", resource.kind);
            let columns = (printer.unwrap_or_else(default_printer).columns)();
            let name = columns.iter().find(|c| c["name"] == "Name").expect("a Name column");
            assert_eq!(name["format"], "name", "{}", resource.kind);
            assert!(!format::text(&name["description"]).is_empty(), "{}", resource.kind);
            for column in &columns {
                assert!(["string", "integer", "boolean", "date"].contains(&format::text(&column["type"])), "{column}");
            }
        }
    }

    #[test]
    fn descriptions_are_the_documentation_of_the_fields_shown() {
        let columns = (builtin("", "Service").expect("a printer").columns)();
        assert!(columns.iter().all(|c| !format::text(&c["description"]).is_empty()), "{columns:?}");
        assert!(format::text(&columns[2]["description"]).starts_with("clusterIP is the IP address of the service"));
        assert!(format::text(&columns[5]["description"]).starts_with("CreationTimestamp is a timestamp"));
    }

    #[test]
    fn kinds_without_a_printer_get_the_default_columns() {
        let role = json!({"metadata": {"name": "reader", "creationTimestamp": "2026-03-01T10:00:00Z"}});
        let (columns, cells) = printed("rbac.authorization.k8s.io", "Role", &role, "2026-03-01T12:00:00Z");
        assert_eq!(columns, [("Name".into(), "string".into(), 0), ("Created At".into(), "date".into(), 0)]);
        assert_eq!(cells, [json!("reader"), json!("2026-03-01T10:00:00Z")]);
        let definition = &(default_printer().columns)()[0];
        assert!(format::text(&definition["description"]).starts_with("Name must be unique within a namespace."));
        assert_eq!(definition["format"], "name");
    }
}
