//! The discovery documents kube-apiserver serves for the resources it serves: `/api`, `/apis` (groups with their
//! versions in Kubernetes' priority order), each group-version's resource list with subresources, short names,
//! categories and verbs, and the aggregated form (`apidiscovery.k8s.io/v2`) kubectl asks for first.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions, GroupVersionForDiscovery,
};
use serde_json::Value;

use super::resources::{version_priority, ResourceType, Resources};

impl Resources {
    /// `/api`.
    pub fn core_versions(&self) -> APIVersions {
        APIVersions { versions: vec!["v1".into()], server_address_by_client_cidrs: Vec::new() }
    }

    /// `/apis`: every group but the core one, each with its versions (highest first) and preferred version.
    pub fn groups(&self) -> APIGroupList {
        let mut versions: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for resource in self.all().filter(|r| !r.group.is_empty()) {
            versions.entry(resource.group.as_str()).or_default().insert(resource.version.as_str());
        }
        let groups = versions
            .into_iter()
            .map(|(group, versions)| {
                let mut ordered: Vec<&str> = versions.into_iter().collect();
                ordered.sort_by_key(|version| std::cmp::Reverse(version_priority(version)));
                let entries: Vec<GroupVersionForDiscovery> = ordered
                    .iter()
                    .map(|version| GroupVersionForDiscovery {
                        group_version: format!("{group}/{version}"),
                        version: (*version).into(),
                    })
                    .collect();
                APIGroup {
                    name: group.into(),
                    preferred_version: entries.first().cloned(),
                    versions: entries,
                    server_address_by_client_cidrs: None,
                }
            })
            .collect();
        APIGroupList { groups }
    }

    /// `/api/v1` or `/apis/<group>/<version>`, with a `<plural>/<subresource>` entry per subresource.
    pub fn resource_list(&self, group: &str, version: &str) -> Option<APIResourceList> {
        let mut resources = Vec::new();
        for resource in self.all().filter(|r| r.group == group && r.version == version) {
            resources.push(APIResource {
                name: resource.plural.clone(),
                singular_name: resource.singular.clone(),
                namespaced: resource.namespaced,
                kind: resource.kind.clone(),
                verbs: resource.verbs.clone(),
                short_names: (!resource.short_names.is_empty()).then(|| resource.short_names.clone()),
                categories: (!resource.categories.is_empty()).then(|| resource.categories.clone()),
                ..Default::default()
            });
            for subresource in &resource.subresources {
                let (kind, verbs, subresource_group, subresource_version): (
                    &str,
                    &[&str],
                    Option<String>,
                    Option<String>,
                ) = match subresource.as_str() {
                    "scale" => ("Scale", &["get", "patch", "update"], Some("autoscaling".into()), Some("v1".into())),
                    "token" => ("TokenRequest", &["create"], Some("authentication.k8s.io".into()), Some("v1".into())),
                    "log" => ("Pod", &["get"], None, None),
                    "finalize" => (resource.kind.as_str(), &["update"], None, None),
                    _ => (resource.kind.as_str(), &["get", "patch", "update"], None, None),
                };
                resources.push(APIResource {
                    name: format!("{}/{subresource}", resource.plural),
                    singular_name: String::new(),
                    namespaced: resource.namespaced,
                    kind: kind.into(),
                    verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                    group: subresource_group,
                    version: subresource_version,
                    ..Default::default()
                });
            }
        }
        (!resources.is_empty()).then(|| APIResourceList {
            group_version: if group.is_empty() { version.into() } else { format!("{group}/{version}") },
            resources,
        })
    }
}

impl Resources {
    /// The aggregated discovery document (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) of the core group
    /// (`core`) or of every other group: each group's versions, highest priority first, with their resources.
    pub fn aggregated(&self, core: bool) -> Value {
        let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<&ResourceType>>> = BTreeMap::new();
        for resource in self.all().filter(|r| r.group.is_empty() == core) {
            groups
                .entry(resource.group.as_str())
                .or_default()
                .entry(resource.version.as_str())
                .or_default()
                .push(resource);
        }
        let items: Vec<Value> = groups
            .into_iter()
            .map(|(group, versions)| {
                let mut ordered: Vec<(&str, Vec<&ResourceType>)> = versions.into_iter().collect();
                ordered.sort_by_key(|(version, _)| std::cmp::Reverse(version_priority(version)));
                let versions: Vec<Value> = ordered
                    .into_iter()
                    .map(|(version, resources)| {
                        let resources: Vec<Value> = resources.into_iter().map(aggregated_resource).collect();
                        serde_json::json!({"version": version, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                serde_json::json!({"metadata": {"name": group}, "versions": versions})
            })
            .collect();
        serde_json::json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
    }
}

fn aggregated_resource(resource: &ResourceType) -> Value {
    let kind =
        |group: &str, version: &str, kind: &str| serde_json::json!({"group": group, "version": version, "kind": kind});
    let subresources: Vec<Value> = resource
        .subresources
        .iter()
        .map(|subresource| {
            let (response, verbs): (Value, &[&str]) = match subresource.as_str() {
                "scale" => (kind("autoscaling", "v1", "Scale"), &["get", "patch", "update"]),
                "token" => (kind("authentication.k8s.io", "v1", "TokenRequest"), &["create"]),
                "log" => (kind("", "v1", "Pod"), &["get"]),
                "finalize" => (kind(&resource.group, &resource.version, &resource.kind), &["update"]),
                _ => (kind(&resource.group, &resource.version, &resource.kind), &["get", "patch", "update"]),
            };
            serde_json::json!({"subresource": subresource, "responseKind": response, "verbs": verbs})
        })
        .collect();
    let mut entry = serde_json::json!({
        "resource": resource.plural,
        "responseKind": kind(&resource.group, &resource.version, &resource.kind),
        "scope": if resource.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": resource.singular,
        "verbs": resource.verbs,
    });
    if !resource.short_names.is_empty() {
        entry["shortNames"] = serde_json::json!(resource.short_names);
    }
    if !resource.categories.is_empty() {
        entry["categories"] = serde_json::json!(resource.categories);
    }
    if !subresources.is_empty() {
        entry["subresources"] = Value::Array(subresources);
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn operators_crd(versions: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "operators.operators.coreos.com"},
            "spec": {"group": "operators.coreos.com", "scope": "Cluster", "names": {"kind": "Operator", "plural": "operators", "singular": "operator", "categories": ["olm"]},
                "versions": versions}})
    }

    #[test]
    fn builtin_discovery_lists_resources_and_subresources() {
        let resources = Resources::default();
        assert_eq!(resources.core_versions().versions, ["v1"]);
        let apps = resources.resource_list("apps", "v1").expect("apps/v1");
        let names: Vec<&str> = apps.resources.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale"
            ]
        );
        let scale = apps.resources.iter().find(|r| r.name == "deployments/scale").expect("scale");
        assert_eq!((scale.kind.as_str(), scale.group.as_deref()), ("Scale", Some("autoscaling")));
        let core = resources.resource_list("", "v1").expect("v1");
        assert_eq!(core.group_version, "v1");
        assert!(core
            .resources
            .iter()
            .any(|r| r.name == "configmaps" && r.short_names.as_deref() == Some(&["cm".to_owned()][..])));
        assert!(resources.resource_list("nothing.example", "v1").is_none());
    }

    #[test]
    fn a_crd_serves_its_served_versions_until_removed() {
        let mut resources = Resources::default();
        let crd = operators_crd(json!([
            {"name": "v2alpha1", "served": true, "storage": true, "subresources": {"status": {}}},
            {"name": "v1", "served": true, "storage": false},
            {"name": "v0", "served": false, "storage": false},
        ]));
        resources.register_crd(&crd).expect("registered");
        let group = resources.groups().groups.into_iter().find(|g| g.name == "operators.coreos.com").expect("group");
        let versions: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(versions, ["v1", "v2alpha1"], "GA is preferred over alpha; unserved versions are absent");
        assert_eq!(group.preferred_version.map(|v| v.version), Some("v1".into()));
        let list = resources.resource_list("operators.coreos.com", "v2alpha1").expect("served");
        assert_eq!(
            list.resources.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["operators", "operators/status"]
        );
        assert_eq!(list.resources[0].categories.as_deref(), Some(&["olm".to_owned()][..]));
        assert!(!list.resources[0].namespaced);
        resources.unregister_crd(&crd);
        assert!(resources.lookup("operators.coreos.com", "v2alpha1", "operators").is_none());
        assert!(!resources.groups().groups.iter().any(|g| g.name == "operators.coreos.com"));
    }

    #[test]
    fn aggregated_discovery_lists_groups_versions_and_resources() {
        let mut resources = Resources::default();
        resources.register_crd(&operators_crd(json!([{"name": "v2alpha1", "served": true, "storage": true, "subresources": {"status": {}}}, {"name": "v1", "served": true, "storage": false}]))).expect("registered");
        let groups = resources.aggregated(false);
        assert_eq!(groups["kind"], "APIGroupDiscoveryList");
        let operators = groups["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|g| g["metadata"]["name"] == "operators.coreos.com")
            .expect("group");
        assert_eq!(operators["versions"][0]["version"], "v1", "the preferred version first");
        let resource = &operators["versions"][1]["resources"][0];
        assert_eq!(
            (resource["resource"].clone(), resource["scope"].clone(), resource["categories"].clone()),
            (json!("operators"), json!("Cluster"), json!(["olm"]))
        );
        assert_eq!(resource["subresources"][0]["subresource"], "status");
        let core = resources.aggregated(true);
        assert_eq!(core["items"].as_array().map(Vec::len), Some(1));
        assert_eq!(core["items"][0]["metadata"]["name"], "");
    }
}
