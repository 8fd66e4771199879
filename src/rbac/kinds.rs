//! Which resource, and which scope, a kind is served as: the mapping RBAC needs, since rules name resources while
//! manifests name kinds. It is built from discovery (the API server's resource lists), from the
//! CustomResourceDefinitions the content itself brings, or from the kinds every Kubernetes cluster serves.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use serde_json::Value;

/// How a kind is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceInfo {
    /// The API group; `""` for the core group.
    pub group: String,
    /// The plural resource name RBAC rules use.
    pub plural: String,
    /// Whether objects of the kind live in a namespace.
    pub namespaced: bool,
}

/// A lookup from (group, kind) to resource.
#[derive(Clone, Debug, Default)]
pub struct KindIndex {
    kinds: HashMap<(String, String), ResourceInfo>,
}

/// The group of an `apiVersion`: the part before `/`, or `""` for the core `v1`.
pub fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

/// Kinds every conformant Kubernetes cluster serves (group, kind, plural, namespaced), for use without a cluster.
const KUBERNETES_KINDS: &[(&str, &str, &str, bool)] = &[
    ("", "Namespace", "namespaces", false),
    ("", "Node", "nodes", false),
    ("", "PersistentVolume", "persistentvolumes", false),
    ("", "ServiceAccount", "serviceaccounts", true),
    ("", "Secret", "secrets", true),
    ("", "ConfigMap", "configmaps", true),
    ("", "Service", "services", true),
    ("", "Pod", "pods", true),
    ("", "Event", "events", true),
    ("", "Endpoints", "endpoints", true),
    ("", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    ("", "LimitRange", "limitranges", true),
    ("", "ResourceQuota", "resourcequotas", true),
    ("", "ReplicationController", "replicationcontrollers", true),
    ("apps", "Deployment", "deployments", true),
    ("apps", "ReplicaSet", "replicasets", true),
    ("apps", "StatefulSet", "statefulsets", true),
    ("apps", "DaemonSet", "daemonsets", true),
    ("batch", "Job", "jobs", true),
    ("batch", "CronJob", "cronjobs", true),
    ("autoscaling", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true),
    ("policy", "PodDisruptionBudget", "poddisruptionbudgets", true),
    ("networking.k8s.io", "NetworkPolicy", "networkpolicies", true),
    ("networking.k8s.io", "Ingress", "ingresses", true),
    ("networking.k8s.io", "IngressClass", "ingressclasses", false),
    ("discovery.k8s.io", "EndpointSlice", "endpointslices", true),
    ("events.k8s.io", "Event", "events", true),
    ("coordination.k8s.io", "Lease", "leases", true),
    ("rbac.authorization.k8s.io", "Role", "roles", true),
    ("rbac.authorization.k8s.io", "RoleBinding", "rolebindings", true),
    ("rbac.authorization.k8s.io", "ClusterRole", "clusterroles", false),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings", false),
    ("apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", false),
    ("apiregistration.k8s.io", "APIService", "apiservices", false),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", false),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", false),
    ("scheduling.k8s.io", "PriorityClass", "priorityclasses", false),
    ("storage.k8s.io", "StorageClass", "storageclasses", false),
    ("storage.k8s.io", "CSIDriver", "csidrivers", false),
    ("storage.k8s.io", "VolumeAttachment", "volumeattachments", false),
    ("node.k8s.io", "RuntimeClass", "runtimeclasses", false),
    ("certificates.k8s.io", "CertificateSigningRequest", "certificatesigningrequests", false),
];

impl KindIndex {
    /// The kinds every Kubernetes cluster serves.
    pub fn kubernetes() -> Self {
        let mut index = Self::default();
        for (group, kind, plural, namespaced) in KUBERNETES_KINDS {
            index.insert(
                group,
                kind,
                ResourceInfo { group: (*group).into(), plural: (*plural).into(), namespaced: *namespaced },
            );
        }
        index
    }

    /// The kinds of discovery resource lists (`/api/v1`, `/apis/<group>/<version>`); subresources are skipped.
    pub fn from_discovery(lists: &[APIResourceList]) -> Self {
        let mut index = Self::default();
        for list in lists {
            let group = group_of(&list.group_version).to_owned();
            for resource in list.resources.iter().filter(|resource| !resource.name.contains('/')) {
                let info = ResourceInfo {
                    group: group.clone(),
                    plural: resource.name.clone(),
                    namespaced: resource.namespaced,
                };
                index.insert(&group, &resource.kind, info);
            }
        }
        index
    }

    fn insert(&mut self, group: &str, kind: &str, info: ResourceInfo) {
        self.kinds.insert((group.to_owned(), kind.to_owned()), info);
    }

    /// Adds the kinds defined by CustomResourceDefinitions among `objects` (apiextensions v1 or v1beta1).
    pub fn add_crds<'a>(&mut self, objects: impl IntoIterator<Item = &'a Value>) {
        for object in objects {
            if object.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition")
                || group_of(object.get("apiVersion").and_then(Value::as_str).unwrap_or_default())
                    != "apiextensions.k8s.io"
            {
                continue;
            }
            let spec = &object["spec"];
            let (Some(group), Some(kind), Some(plural)) =
                (spec["group"].as_str(), spec["names"]["kind"].as_str(), spec["names"]["plural"].as_str())
            else {
                continue;
            };
            let namespaced = spec["scope"].as_str() != Some("Cluster");
            self.insert(group, kind, ResourceInfo { group: group.into(), plural: plural.into(), namespaced });
        }
    }

    /// Adds every kind of `other` that this index lacks.
    pub fn merge(&mut self, other: &KindIndex) {
        for (key, info) in &other.kinds {
            self.kinds.entry(key.clone()).or_insert_with(|| info.clone());
        }
    }

    /// Whether a resource (its plural, as rules name it) is namespaced; `None` when no kind is served as it.
    pub fn namespaced_resource(&self, group: &str, plural: &str) -> Option<bool> {
        self.kinds.values().find(|info| info.group == group && info.plural == plural).map(|info| info.namespaced)
    }

    /// The resource a kind of an `apiVersion` is served as.
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<&ResourceInfo> {
        self.kinds.get(&(group_of(api_version).to_owned(), kind.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;
    use serde_json::json;

    #[test]
    fn core_and_grouped_kinds_resolve() {
        let index = KindIndex::kubernetes();
        assert_eq!(
            index.resolve("v1", "Secret"),
            Some(&ResourceInfo { group: "".into(), plural: "secrets".into(), namespaced: true })
        );
        assert_eq!(index.resolve("rbac.authorization.k8s.io/v1", "ClusterRole").map(|i| i.namespaced), Some(false));
        assert_eq!(index.resolve("apps/v1", "Secret"), None);
    }

    #[test]
    fn crds_in_content_define_their_kinds() {
        let mut index = KindIndex::kubernetes();
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "plumbai.how.theydoit.com"},
            "spec": {"group": "how.theydoit.com", "scope": "Cluster", "names": {"kind": "Plumbus", "plural": "plumbai"}}});
        index.add_crds([&crd]);
        assert_eq!(
            index.resolve("how.theydoit.com/v2alpha1", "Plumbus"),
            Some(&ResourceInfo { group: "how.theydoit.com".into(), plural: "plumbai".into(), namespaced: false })
        );
    }

    #[test]
    fn discovery_lists_define_kinds_without_subresources() {
        let list = APIResourceList {
            group_version: "monitoring.coreos.com/v1".into(),
            resources: vec![
                APIResource {
                    name: "servicemonitors".into(),
                    kind: "ServiceMonitor".into(),
                    namespaced: true,
                    ..Default::default()
                },
                APIResource {
                    name: "servicemonitors/status".into(),
                    kind: "ServiceMonitor".into(),
                    namespaced: true,
                    ..Default::default()
                },
            ],
        };
        let index = KindIndex::from_discovery(&[list]);
        assert_eq!(
            index.resolve("monitoring.coreos.com/v1", "ServiceMonitor").map(|i| i.plural.as_str()),
            Some("servicemonitors")
        );
    }
}
