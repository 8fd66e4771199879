//! `kubectl get installed` as the server answers it (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): a
//! `meta.k8s.io/v1` Table with seed 002's columns (kubectl prints each name upper-cased: NAME,
//! INSTALLATION_NAMESPACE, CHANNEL, CURRENT_VERSION, TARGET_VERSION, PHASE) and, as kubectl asks by default
//! (`includeObject=Metadata`), each row's object as PartialObjectMetadata. And seed 002's composite resourceVersion
//! of a list, `R0:RV0,R1:RV1,...`: one resourceVersion per tracked resource. Pure functions.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::synthesize::{installed, row, Tracked};
use crate::api::v1alpha1::ClusterServiceVersion;

/// The Table's columns: (name, type, format, description).
const COLUMNS: [(&str, &str, &str, &str); 6] = [
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

/// The Table of the Installed objects of `namespace` (those of `tracked` that watch it), listed at
/// `resource_version`.
pub fn table(
    tracked: &[Tracked<'_>],
    csvs: &[ClusterServiceVersion],
    namespace: &str,
    include: IncludeObject,
    resource_version: &str,
) -> Value {
    let columns: Vec<Value> = COLUMNS
        .iter()
        .map(|(name, kind, format, description)| {
            json!({"name": name, "type": kind, "format": format, "description": description, "priority": 0})
        })
        .collect();
    let rows: Vec<Value> = tracked
        .iter()
        .filter(|tracked| tracked.watches.includes(namespace))
        .map(|tracked| {
            let mut row_value = json!({"cells": row(tracked, csvs)});
            let object = installed(tracked, namespace);
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row_value["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": object["metadata"]});
                }
                IncludeObject::Object => row_value["object"] = object,
            }
            row_value
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    })
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
    use crate::api::v1alpha1::Subscription;
    use crate::installed::synthesize::tracked as tracked_of;
    use kube::ResourceExt;

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
        let tracked = tracked_of(&csvs, &subscriptions);
        let table = table(&tracked, &csvs, "default", IncludeObject::Metadata, "clusterserviceversions:7");
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
        let whole = super::table(&tracked, &csvs, "default", IncludeObject::Object, "");
        assert_eq!(whole["rows"][0]["object"]["kind"], "Installed");
        let bare = super::table(&tracked, &csvs, "default", IncludeObject::None, "");
        assert!(bare["rows"][0].get("object").is_none());
        let mut elsewhere = csv();
        elsewhere.annotations_mut().insert("olm.targetNamespaces".into(), "team-a".into());
        let only_team_a = [elsewhere];
        let tracked = tracked_of(&only_team_a, &subscriptions);
        let empty = super::table(&tracked, &only_team_a, "default", IncludeObject::Metadata, "");
        assert_eq!(empty["rows"], json!([]), "only the operators that watch the namespace");
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
