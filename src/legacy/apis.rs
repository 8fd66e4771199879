//! The APIs a CSV provides, as OLM v0 names them: a set of `Kind.version.group` keys written, sorted and
//! comma-joined, into an OperatorGroup's `olm.providedAPIs` annotation, and one `olm.api.<fnv64a>` label per provided
//! API on the CSV (what `kubectl get csv -l olm.api.<hash>` and OLM's own resolver select on).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::hash::fnv64a_hex;
use crate::api::v1alpha1::ClusterServiceVersion;

/// The prefix of a CSV's API label keys.
pub const API_LABEL_PREFIX: &str = "olm.api.";

/// One API: kind, version and group (OLM's `APIKey` without the plural, which its sets strip).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiKey {
    pub kind: String,
    pub version: String,
    pub group: String,
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.kind, self.version, self.group)
    }
}

/// A set of APIs, ordered as OLM writes them (it sorts the `Kind.version.group` strings).
pub type ApiSet = BTreeSet<ApiKey>;

/// A CSV whose APIs cannot be read: an owned or required CRD named without a group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("error parsing crd name: {0}")]
pub struct ApiSurfaceError(pub String);

/// The APIs `csv` provides: its owned CRDs (the group is the CRD name after its first dot) and owned APIServices.
pub fn provided_apis(csv: &ClusterServiceVersion) -> Result<ApiSet, ApiSurfaceError> {
    let mut set = ApiSet::new();
    for crd in csv.spec.custom_resource_definitions.iter().flat_map(|crds| &crds.owned) {
        let (_, group) = crd.name.split_once('.').ok_or_else(|| ApiSurfaceError(crd.name.clone()))?;
        set.insert(ApiKey { kind: crd.kind.clone(), version: crd.version.clone(), group: group.to_owned() });
    }
    for api in csv.spec.api_service_definitions.iter().flat_map(|apis| &apis.owned) {
        set.insert(ApiKey { kind: api.kind.clone(), version: api.version.clone(), group: api.group.clone() });
    }
    Ok(set)
}

/// The annotation value of a set: `Kind.version.group` strings, sorted, comma-joined, no spaces.
pub fn api_set_string(set: &ApiSet) -> String {
    let mut keys: Vec<String> = set.iter().map(ToString::to_string).collect();
    keys.sort();
    keys.join(",")
}

/// An annotation value read back as OLM reads it (`schema.ParseKindArg`): entries with fewer than two dots are
/// skipped; the first part is the kind, the second the version, the rest the group.
pub fn parse_api_set(value: &str) -> ApiSet {
    value
        .split(',')
        .filter_map(|entry| {
            let mut parts = entry.splitn(3, '.');
            let (kind, version, group) = (parts.next()?, parts.next()?, parts.next()?);
            Some(ApiKey { kind: kind.to_owned(), version: version.to_owned(), group: group.to_owned() })
        })
        .collect()
}

/// The APIs a group's `olm.providedAPIs` annotation lists.
pub fn group_provided_apis(group: &crate::api::v1::OperatorGroup) -> ApiSet {
    group
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(crate::api::v1::PROVIDED_APIS_ANNOTATION))
        .map(|value| parse_api_set(value))
        .unwrap_or_default()
}

/// The label key of one API: `olm.api.<fnv64a-hex("Kind.version.group")>`.
pub fn api_label_key(api: &ApiKey) -> String {
    format!("{API_LABEL_PREFIX}{}", fnv64a_hex(&api.to_string()))
}

/// The API labels of a CSV providing `provided`: each `provided`. (OLM never writes `required`: its API surface
/// leaves the required set unassigned, so neither does this.)
pub fn api_labels(provided: &ApiSet) -> BTreeMap<String, String> {
    provided.iter().map(|api| (api_label_key(api), "provided".to_owned())).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn csv(owned_crds: &[(&str, &str, &str)], owned_apis: &[(&str, &str, &str)]) -> ClusterServiceVersion {
        let crds: Vec<_> = owned_crds.iter().map(|(n, v, k)| json!({"name": n, "version": v, "kind": k})).collect();
        let apis: Vec<_> = owned_apis
            .iter()
            .map(|(g, v, k)| json!({"name": format!("{}s", k.to_lowercase()), "group": g, "version": v, "kind": k}))
            .collect();
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}},
                     "customresourcedefinitions": {"owned": crds}, "apiservicedefinitions": {"owned": apis}}}))
        .expect("csv")
    }

    #[test]
    fn provided_apis_come_from_owned_crds_and_apiservices() {
        let csv = csv(&[("plumbuses.example.com", "v1", "Plumbus")], &[("metrics.example.com", "v1beta1", "Metric")]);
        let set = provided_apis(&csv).expect("apis");
        assert_eq!(api_set_string(&set), "Metric.v1beta1.metrics.example.com,Plumbus.v1.example.com");
        assert_eq!(parse_api_set(&api_set_string(&set)), set);
    }

    #[test]
    fn a_crd_named_without_a_group_is_an_error() {
        let csv = csv(&[("plumbuses", "v1", "Plumbus")], &[]);
        assert_eq!(provided_apis(&csv), Err(ApiSurfaceError("plumbuses".into())));
    }

    #[test]
    fn the_annotation_is_sorted_as_strings() {
        let set: ApiSet = [("b", "v1", "x.io"), ("B", "v1", "x.io"), ("a", "v2", "y.io")]
            .iter()
            .map(|(k, v, g)| ApiKey { kind: (*k).into(), version: (*v).into(), group: (*g).into() })
            .collect();
        assert_eq!(api_set_string(&set), "B.v1.x.io,a.v2.y.io,b.v1.x.io");
        assert_eq!(api_set_string(&ApiSet::new()), "");
    }

    #[test]
    fn parsing_skips_what_is_not_a_kind_argument() {
        let set = parse_api_set("Plumbus.v1.example.com,,Broken.v1,Deep.v1.a.b.c");
        let keys: Vec<String> = set.iter().map(ToString::to_string).collect();
        assert_eq!(keys, ["Deep.v1.a.b.c", "Plumbus.v1.example.com"]);
    }

    #[test]
    fn api_labels_hash_the_kind_argument() {
        let api = ApiKey { kind: "Plumbus".into(), version: "v1".into(), group: "example.com".into() };
        let labels = api_labels(&[api.clone()].into());
        assert_eq!(labels.len(), 1);
        assert_eq!(labels.get(&api_label_key(&api)).map(String::as_str), Some("provided"));
        assert_eq!(api_label_key(&api), format!("olm.api.{}", fnv64a_hex("Plumbus.v1.example.com")));
    }
}
