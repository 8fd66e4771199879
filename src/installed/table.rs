//! `kubectl get installed` as the server answers it (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): a
//! `meta.k8s.io/v1` Table with seed 002's columns (kubectl prints each name upper-cased: NAME,
//! INSTALLATION_NAMESPACE, CHANNEL, CURRENT_VERSION, TARGET_VERSION, PHASE) and, as kubectl asks by default
//! (`includeObject=Metadata`), each row's object as PartialObjectMetadata. And seed 002's composite resourceVersion
//! of a list, `R0:RV0,R1:RV1,...`: one resourceVersion per tracked resource. The Table builder is shared with the
//! PackageManifest Table. Pure functions.

use std::collections::BTreeMap;

use serde_json::{json, Value};

/// The Table's columns: (name, type, format, description).
const COLUMNS: [Column; 6] = [
    ("Name", "string", "name", "Name of the installed operator's ClusterServiceVersion."),
    ("Installation_Namespace", "string", "", "Namespace the operator is installed in."),
    ("Channel", "string", "", "Channel of the Subscription that installed it."),
    ("Current_Version", "string", "", "Version installed."),
    ("Target_Version", "string", "", "Version its Subscription moves to."),
    ("Phase", "string", "", "Phase of its ClusterServiceVersion."),
];

/// What a Table row carries of its object: as kubectl asks by default, its metadata; none; or the whole object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    /// The `includeObject` parameter (`None`, `Metadata`, `Object`; Metadata when absent, as kube-apiserver).
    pub fn parse(parameter: Option<&str>) -> Option<Self> {
        match parameter {
            None | Some("Metadata") => Some(Self::Metadata),
            Some("None") => Some(Self::None),
            Some("Object") => Some(Self::Object),
            Some(_) => None,
        }
    }
}

/// A Table column: (name, type, format, description).
pub type Column = (&'static str, &'static str, &'static str, &'static str);

/// The column definitions of a Table.
pub fn column_definitions(columns: &[Column]) -> Value {
    columns
        .iter()
        .map(|(name, kind, format, description)| {
            json!({"name": name, "type": kind, "format": format, "description": description, "priority": 0})
        })
        .collect()
}

/// A Table row: its cells and its object as `include` asks (only the object's `metadata` is read unless the whole
/// object is asked for).
pub fn row_of(cells: Value, object: Value, include: IncludeObject) -> Value {
    let mut row_value = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            row_value["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]});
        }
        IncludeObject::Object => row_value["object"] = object,
    }
    row_value
}

/// A Table of `columns` with a row per (cells, object), listed at `resource_version`; each row carries its object
/// as `include` asks.
pub fn table_of(
    columns: &[Column],
    rows: impl IntoIterator<Item = (Value, Value)>,
    include: IncludeObject,
    resource_version: &str,
) -> Value {
    let rows: Vec<Value> = rows.into_iter().map(|(cells, object)| row_of(cells, object, include)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": column_definitions(columns),
        "rows": rows,
    })
}

/// A Table's text up to its first row, for a Table streamed a row at a time (`]}` closes it).
pub fn table_head(columns: &[Column], resource_version: &str) -> String {
    format!(
        r#"{{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{},"columnDefinitions":{},"rows":["#,
        json!({"resourceVersion": resource_version}),
        column_definitions(columns)
    )
}

/// Seed 002's columns of the Installed Table.
pub const INSTALLED_COLUMNS: &[Column] = &COLUMNS;

/// The Table of Installed objects: seed 002's columns, a row per (cells, object).
pub fn table(
    rows: impl IntoIterator<Item = ([String; 6], Value)>,
    include: IncludeObject,
    resource_version: &str,
) -> Value {
    table_of(&COLUMNS, rows.into_iter().map(|(cells, object)| (json!(cells), object)), include, resource_version)
}

/// Seed 002's composite resourceVersion: the resourceVersion of each tracked resource's list, by resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompositeVersion(pub BTreeMap<String, String>);

/// Why a resourceVersion a client sent is not a composite one.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("resourceVersion {given:?} is not of the form resource:version,resource:version,...")]
pub struct MalformedVersion {
    pub given: String,
}

impl CompositeVersion {
    /// `R0:RV0,R1:RV1,...`, resources in name order, so one state of the cluster has one string.
    pub fn format(&self) -> String {
        self.0.iter().map(|(resource, version)| format!("{resource}:{version}")).collect::<Vec<_>>().join(",")
    }

    /// Reads what `format` wrote; an empty string (no resourceVersion given) is the empty composite.
    pub fn parse(given: &str) -> Result<Self, MalformedVersion> {
        let malformed = || MalformedVersion { given: given.to_owned() };
        let mut parts = BTreeMap::new();
        for part in given.split(',').filter(|part| !part.is_empty()) {
            let (resource, version) = part.split_once(':').ok_or_else(malformed)?;
            if resource.is_empty()
                || version.is_empty()
                || parts.insert(resource.to_owned(), version.to_owned()).is_some()
            {
                return Err(malformed());
            }
        }
        Ok(Self(parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1alpha1::{ClusterServiceVersion, Subscription};
    use crate::installed::synthesize::{installed, row, tracked as tracked_of, Groups, Installs, Reach, Tracked};

    /// The rows of the operators of `tracked` that watch `namespace`, as the server lists them.
    fn rows(tracked: &[Tracked<'_>], csvs: &[ClusterServiceVersion], namespace: &str) -> Vec<([String; 6], Value)> {
        tracked
            .iter()
            .filter(|t| t.watches.includes(namespace))
            .map(|t| (row(t, csvs), installed(t, namespace)))
            .collect()
    }

    fn csv() -> ClusterServiceVersion {
        serde_json::from_value(json!({"metadata": {"name": "etcd.v0.9.4", "namespace": "operators",
            "annotations": {"olm.targetNamespaces": ""}},
            "spec": {"install": {"strategy": "deployment"}, "version": "0.9.4"}, "status": {"phase": "Succeeded"}}))
        .unwrap()
    }

    fn subscription() -> Subscription {
        serde_json::from_value(json!({"metadata": {"name": "etcd", "namespace": "operators"},
            "spec": {"source": "c", "sourceNamespace": "olm", "name": "etcd", "channel": "alpha"},
            "status": {"installedCSV": "etcd.v0.9.4", "currentCSV": "etcd.v0.9.4"}}))
        .unwrap()
    }

    #[test]
    fn the_table_has_seed_002s_columns_and_a_row_per_operator_with_its_metadata() {
        let (csvs, subscriptions) = (vec![csv()], vec![subscription()]);
        // The one group of `operators` targets every namespace.
        let groups: Groups = [(("operators".to_owned(), "global".to_owned()), vec![String::new()])].into();
        let tracked = tracked_of(&csvs, &subscriptions, Reach { groups: &groups, installs: &Installs::new() });
        let table = table(rows(&tracked, &csvs, "default"), IncludeObject::Metadata, "clusterserviceversions:7");
        assert_eq!((table["kind"].as_str(), table["apiVersion"].as_str()), (Some("Table"), Some("meta.k8s.io/v1")));
        let headers: Vec<String> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_uppercase())
            .collect();
        assert_eq!(
            headers,
            ["NAME", "INSTALLATION_NAMESPACE", "CHANNEL", "CURRENT_VERSION", "TARGET_VERSION", "PHASE"]
        );
        assert_eq!(table["columnDefinitions"][0]["format"], "name", "kubectl's -o name and sorting");
        let row = &table["rows"][0];
        assert_eq!(row["cells"], json!(["etcd.v0.9.4", "operators", "alpha", "0.9.4", "0.9.4", "Succeeded"]));
        assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(row["object"]["metadata"]["namespace"], "default");
        assert!(row["object"].get("status").is_none());
        assert_eq!(table["metadata"]["resourceVersion"], "clusterserviceversions:7");
        let whole = super::table(rows(&tracked, &csvs, "default"), IncludeObject::Object, "");
        assert_eq!(whole["rows"][0]["object"]["kind"], "Installed");
        let bare = super::table(rows(&tracked, &csvs, "default"), IncludeObject::None, "");
        assert!(bare["rows"][0].get("object").is_none());
        let empty = super::table(Vec::new(), IncludeObject::Metadata, "");
        assert_eq!(empty["rows"], json!([]), "a list, not null, when nothing watches the namespace");
    }

    #[test]
    fn a_table_streamed_row_by_row_is_the_table_built_whole() {
        let rows = vec![
            (json!(["a"]), json!({"metadata": {"name": "a"}})),
            (json!(["b"]), json!({"metadata": {"name": "b"}})),
        ];
        let columns: &[Column] = &[("Name", "string", "name", "")];
        let whole = table_of(columns, rows.clone(), IncludeObject::Metadata, "7");
        let streamed: Vec<String> = rows
            .into_iter()
            .map(|(cells, object)| row_of(cells, object, IncludeObject::Metadata).to_string())
            .collect();
        let text = format!("{}{}]}}", table_head(columns, "7"), streamed.join(","));
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), whole);
    }

    #[test]
    fn include_object_reads_as_kube_apiserver_reads_it() {
        assert_eq!(IncludeObject::parse(None), Some(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse(Some("None")), Some(IncludeObject::None));
        assert_eq!(IncludeObject::parse(Some("Object")), Some(IncludeObject::Object));
        assert_eq!(IncludeObject::parse(Some("everything")), None);
    }

    #[test]
    fn the_composite_resource_version_reads_back_what_it_wrote_and_refuses_anything_else() {
        let version = CompositeVersion(BTreeMap::from([
            ("subscriptions".to_owned(), "12".to_owned()),
            ("clusterserviceversions".to_owned(), "40".to_owned()),
        ]));
        assert_eq!(version.format(), "clusterserviceversions:40,subscriptions:12", "one string per state");
        assert_eq!(CompositeVersion::parse(&version.format()), Ok(version));
        assert_eq!(CompositeVersion::parse(""), Ok(CompositeVersion::default()));
        for malformed in ["40", "csvs:", ":40", "csvs:1,csvs:2"] {
            assert!(CompositeVersion::parse(malformed).is_err(), "{malformed}");
        }
    }
}
