//! The resource types the emulator serves: the built-in kinds, the kinds of established CustomResourceDefinitions
//! and the resources of available aggregated API servers, by group, version and plural (`Resources`, shared as
//! `Served`). The discovery documents that describe them to clients are `discovery`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use serde_json::Value;

use super::events;
use crate::storage::selectors;
use crate::storage::store::ResourceId;

/// One resource of one API version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Subresources such as `status`, `scale`, `log`.
    pub subresources: Vec<String>,
    pub verbs: Vec<String>,
    pub list_kind: String,
    /// The structural schema of a custom resource's version; `None` for built-in kinds. Shared: every request
    /// copies its resource type, and a schema can be hundreds of kilobytes.
    pub schema: Option<std::sync::Arc<Value>>,
    pub printer_columns: Vec<Value>,
    /// Served by an aggregated API server: requests are proxied to it.
    pub proxied: bool,
    /// Where the `scale` subresource reads and writes: `specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`.
    pub scale: Option<Value>,
}

const CRUD: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
const CREATE_ONLY: &[&str] = &["create"];

impl ResourceType {
    fn builtin(
        group: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        subresources: &[&str],
        verbs: &[&str],
        short: &[&str],
    ) -> Self {
        Self {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            namespaced,
            short_names: short.iter().map(|s| (*s).to_owned()).collect(),
            categories: Vec::new(),
            subresources: subresources.iter().map(|s| (*s).to_owned()).collect(),
            verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
            list_kind: format!("{kind}List"),
            schema: None,
            printer_columns: Vec::new(),
            proxied: false,
            scale: subresources.contains(&"scale").then(|| {
                serde_json::json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"})
            }),
        }
    }

    /// In kubectl's `all` category (`kubectl get all`), as kube-apiserver lists the workload kinds.
    fn in_all(mut self) -> Self {
        self.categories = vec!["all".to_owned()];
        self
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s == "status")
    }

    /// Where objects of this resource are stored: its own place, but for `events.k8s.io` Events, which
    /// kube-apiserver stores as core Events (`events`).
    pub fn id(&self) -> ResourceId {
        if events::is_events_api(&self.group, &self.plural) {
            return ResourceId::new("", "events");
        }
        ResourceId::new(&self.group, &self.plural)
    }

    /// Whether objects are stored in another API's form (`events.k8s.io` Events as core Events).
    pub fn stored_converted(&self) -> bool {
        events::is_events_api(&self.group, &self.plural)
    }

    /// The stored field a selector on this resource names by `field`, or None when the resource cannot be selected
    /// by it: every resource by `metadata.name` and `metadata.namespace`, Events by more.
    pub fn selectable_field(&self, field: &str) -> Option<String> {
        if self.plural == "events" && (self.group.is_empty() || self.stored_converted()) {
            return events::selectable_field(self.stored_converted(), field);
        }
        selectors::metadata_field(field)
    }

    /// `group/version`, or `v1` for the core group.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

fn builtins() -> Vec<ResourceType> {
    use ResourceType as R;
    vec![
        R::builtin("", "Namespace", "namespaces", false, &["status", "finalize"], CRUD, &["ns"]),
        R::builtin("", "ServiceAccount", "serviceaccounts", true, &["token"], CRUD, &["sa"]),
        R::builtin("", "Secret", "secrets", true, &[], CRUD, &[]),
        R::builtin("", "ConfigMap", "configmaps", true, &[], CRUD, &["cm"]),
        R::builtin("", "Service", "services", true, &["status"], CRUD, &["svc"]).in_all(),
        R::builtin("", "Pod", "pods", true, &["status", "log"], CRUD, &["po"]).in_all(),
        R::builtin("", "Event", "events", true, &[], CRUD, &["ev"]),
        R::builtin("", "Endpoints", "endpoints", true, &[], CRUD, &["ep"]),
        R::builtin("apps", "Deployment", "deployments", true, &["status", "scale"], CRUD, &["deploy"]).in_all(),
        R::builtin("apps", "ReplicaSet", "replicasets", true, &["status", "scale"], CRUD, &["rs"]).in_all(),
        R::builtin("rbac.authorization.k8s.io", "Role", "roles", true, &[], CRUD, &[]),
        R::builtin("rbac.authorization.k8s.io", "RoleBinding", "rolebindings", true, &[], CRUD, &[]),
        R::builtin("rbac.authorization.k8s.io", "ClusterRole", "clusterroles", false, &[], CRUD, &[]),
        R::builtin("rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", false, &[], CRUD, &[]),
        R::builtin(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["status"],
            CRUD,
            &["crd", "crds"],
        ),
        R::builtin("apiregistration.k8s.io", "APIService", "apiservices", false, &["status"], CRUD, &[]),
        R::builtin(
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            &[],
            CRUD,
            &[],
        ),
        R::builtin(
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
            &[],
            CRUD,
            &[],
        ),
        // The other workload and storage kinds kubectl's `apply --prune` looks up by default.
        R::builtin("", "PersistentVolumeClaim", "persistentvolumeclaims", true, &["status"], CRUD, &["pvc"]),
        R::builtin("", "PersistentVolume", "persistentvolumes", false, &["status"], CRUD, &["pv"]),
        R::builtin("", "ReplicationController", "replicationcontrollers", true, &["status", "scale"], CRUD, &["rc"])
            .in_all(),
        R::builtin("apps", "DaemonSet", "daemonsets", true, &["status"], CRUD, &["ds"]).in_all(),
        R::builtin("apps", "StatefulSet", "statefulsets", true, &["status", "scale"], CRUD, &["sts"]).in_all(),
        R::builtin("batch", "Job", "jobs", true, &["status"], CRUD, &[]).in_all(),
        R::builtin("batch", "CronJob", "cronjobs", true, &["status"], CRUD, &["cj"]).in_all(),
        R::builtin("networking.k8s.io", "Ingress", "ingresses", true, &["status"], CRUD, &["ing"]),
        R::builtin("coordination.k8s.io", "Lease", "leases", true, &[], CRUD, &[]),
        R::builtin("events.k8s.io", "Event", "events", true, &[], CRUD, &["ev"]),
        R::builtin("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews", false, &[], CREATE_ONLY, &[]),
        R::builtin(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            false,
            &[],
            CREATE_ONLY,
            &[],
        ),
        R::builtin(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            true,
            &[],
            CREATE_ONLY,
            &[],
        ),
        R::builtin(
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            false,
            &[],
            CREATE_ONLY,
            &[],
        ),
        R::builtin("authentication.k8s.io", "TokenReview", "tokenreviews", false, &[], CREATE_ONLY, &[]),
        R::builtin("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews", false, &[], CREATE_ONLY, &[]),
    ]
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the CustomResourceDefinition is not usable: {0}")]
pub struct CrdError(pub String);

/// The served resource types, by (group, version, plural).
#[derive(Clone, Debug)]
pub struct Resources {
    types: BTreeMap<(String, String, String), ResourceType>,
    /// The built-in types' keys: kube-apiserver serves its own resources before any CustomResourceDefinition (the
    /// extensions server is its delegate), so a CRD naming one (`clusterroles.rbac.authorization.k8s.io`) never
    /// replaces it.
    builtin: BTreeSet<(String, String, String)>,
}

impl Default for Resources {
    fn default() -> Self {
        let mut resources = Self { types: BTreeMap::new(), builtin: BTreeSet::new() };
        for resource in builtins() {
            resources.builtin.insert((resource.group.clone(), resource.version.clone(), resource.plural.clone()));
            resources.insert(resource);
        }
        resources
    }
}

/// The resources served now, read by every request and changed as CustomResourceDefinitions are established or
/// removed and as aggregated API servers come and go.
#[derive(Debug, Default)]
pub struct Served(RwLock<Resources>);

impl Served {
    pub fn read(&self) -> RwLockReadGuard<'_, Resources> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, Resources> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Resources {
    fn insert(&mut self, resource: ResourceType) {
        self.types.insert((resource.group.clone(), resource.version.clone(), resource.plural.clone()), resource);
    }

    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types.get(&(group.to_owned(), version.to_owned(), plural.to_owned()))
    }

    /// The served type of a kind, in a given `apiVersion` (`v1`, `apps/v1`).
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<&ResourceType> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.types.values().find(|r| r.group == group && r.version == version && r.kind == kind)
    }

    /// Every served type of a resource (one per version), preferred version first.
    pub fn versions_of(&self, group: &str, plural: &str) -> Vec<&ResourceType> {
        let mut found: Vec<&ResourceType> =
            self.types.values().filter(|r| r.group == group && r.plural == plural).collect();
        found.sort_by_key(|r| std::cmp::Reverse(version_priority(&r.version)));
        found
    }

    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }

    /// The resource types of a CustomResourceDefinition's served versions.
    pub fn of_crd(crd: &Value) -> Result<Vec<ResourceType>, CrdError> {
        let spec = &crd["spec"];
        let text = |value: &Value, what: &str| {
            value.as_str().map(str::to_owned).ok_or_else(|| CrdError(format!("{what} is missing")))
        };
        let group = text(&spec["group"], "spec.group")?;
        let kind = text(&spec["names"]["kind"], "spec.names.kind")?;
        let plural = text(&spec["names"]["plural"], "spec.names.plural")?;
        let singular = spec["names"]["singular"].as_str().map_or_else(|| kind.to_lowercase(), str::to_owned);
        let strings = |value: &Value| -> Vec<String> {
            value.as_array().into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
        };
        let namespaced = spec["scope"].as_str() != Some("Cluster");
        let versions = spec["versions"].as_array().ok_or_else(|| CrdError("spec.versions is missing".into()))?;
        Ok(versions
            .iter()
            .filter(|version| version["served"].as_bool() == Some(true))
            .filter_map(|version| {
                let mut subresources = Vec::new();
                if version["subresources"]["status"].is_object() {
                    subresources.push("status".to_owned());
                }
                if version["subresources"]["scale"].is_object() {
                    subresources.push("scale".to_owned());
                }
                Some(ResourceType {
                    group: group.clone(),
                    version: version["name"].as_str()?.to_owned(),
                    kind: kind.clone(),
                    plural: plural.clone(),
                    singular: singular.clone(),
                    namespaced,
                    short_names: strings(&spec["names"]["shortNames"]),
                    categories: strings(&spec["names"]["categories"]),
                    subresources,
                    verbs: CRUD.iter().map(|v| (*v).to_owned()).collect(),
                    list_kind: spec["names"]["listKind"].as_str().map_or_else(|| format!("{kind}List"), str::to_owned),
                    schema: Some(version["schema"]["openAPIV3Schema"].clone())
                        .filter(|s| !s.is_null())
                        .map(std::sync::Arc::new),
                    printer_columns: version["additionalPrinterColumns"].as_array().cloned().unwrap_or_default(),
                    proxied: false,
                    scale: Some(version["subresources"]["scale"].clone()).filter(Value::is_object),
                })
            })
            .collect())
    }

    /// Serves a CRD's versions, replacing what it served before.
    pub fn register_crd(&mut self, crd: &Value) -> Result<(), CrdError> {
        let served = Self::of_crd(crd)?;
        self.unregister_crd(crd);
        for resource in served {
            let key = (resource.group.clone(), resource.version.clone(), resource.plural.clone());
            if !self.builtin.contains(&key) {
                self.insert(resource);
            }
        }
        Ok(())
    }

    /// Serves the resources an aggregated API server's discovery lists for its group-version, replacing earlier ones.
    pub fn register_aggregated(&mut self, group: &str, version: &str, list: &APIResourceList) {
        self.unregister_aggregated(group, version);
        for resource in list.resources.iter().filter(|r| !r.name.contains('/')) {
            let subresources = list
                .resources
                .iter()
                .filter_map(|r| r.name.strip_prefix(&format!("{}/", resource.name)).map(str::to_owned))
                .collect();
            self.insert(ResourceType {
                group: group.to_owned(),
                version: version.to_owned(),
                kind: resource.kind.clone(),
                plural: resource.name.clone(),
                singular: if resource.singular_name.is_empty() {
                    resource.kind.to_lowercase()
                } else {
                    resource.singular_name.clone()
                },
                namespaced: resource.namespaced,
                short_names: resource.short_names.clone().unwrap_or_default(),
                categories: resource.categories.clone().unwrap_or_default(),
                subresources,
                verbs: resource.verbs.clone(),
                list_kind: format!("{}List", resource.kind),
                schema: None,
                printer_columns: Vec::new(),
                proxied: true,
                scale: None,
            });
        }
    }

    /// Stops serving an aggregated group-version.
    pub fn unregister_aggregated(&mut self, group: &str, version: &str) {
        self.types.retain(|(g, v, _), r| !(r.proxied && g == group && v == version));
    }

    /// Stops serving a CRD's resource, in every version.
    pub fn unregister_crd(&mut self, crd: &Value) {
        let (Some(group), Some(plural)) = (crd["spec"]["group"].as_str(), crd["spec"]["names"]["plural"].as_str())
        else {
            return;
        };
        let builtin = &self.builtin;
        self.types.retain(|key, _| !(key.0 == group && key.2 == plural) || builtin.contains(key));
    }
}

/// Kubernetes' version priority: GA over beta over alpha, higher numbers first.
pub fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else { return (0, 0, 0) };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u32>() else { return (0, 0, 0) };
    let suffix = &rest[digits.len()..];
    let minor = |prefix: &str| suffix.strip_prefix(prefix).and_then(|n| n.parse::<u32>().ok());
    match suffix {
        "" => (3, major, 0),
        _ => match (minor("beta"), minor("alpha")) {
            (Some(n), _) => (2, major, n),
            (_, Some(n)) => (1, major, n),
            _ => (0, 0, 0),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn version_priority_follows_kubernetes() {
        let mut versions = vec!["v1alpha1", "v2", "v1beta2", "v1", "v1beta1", "v2alpha1", "foo"];
        versions.sort_by_key(|version| std::cmp::Reverse(version_priority(version)));
        assert_eq!(versions, ["v2", "v1", "v1beta2", "v1beta1", "v2alpha1", "v1alpha1", "foo"]);
    }

    #[test]
    fn an_incomplete_crd_is_an_error() {
        assert_eq!(Resources::of_crd(&json!({"spec": {}})), Err(CrdError("spec.group is missing".into())));
    }

    #[test]
    fn a_crd_naming_a_built_in_resource_never_replaces_it() {
        let mut resources = Resources::default();
        let builtin = resources.lookup("rbac.authorization.k8s.io", "v1", "clusterroles").cloned();
        assert!(builtin.as_ref().is_some_and(|r| r.schema.is_none()), "{builtin:?}");
        let crd = json!({"spec": {"group": "rbac.authorization.k8s.io", "scope": "Cluster",
            "names": {"kind": "ClusterRole", "plural": "clusterroles"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        resources.register_crd(&crd).expect("registered");
        assert_eq!(resources.lookup("rbac.authorization.k8s.io", "v1", "clusterroles").cloned(), builtin);
        resources.unregister_crd(&crd);
        assert_eq!(resources.lookup("rbac.authorization.k8s.io", "v1", "clusterroles").cloned(), builtin, "kept");
    }
}
