//! The OpenAPI extensions kube-openapi derives from the markers of the built-in Go types, which k8s-openapi's
//! schemas leave out: `x-kubernetes-patch-strategy` and `x-kubernetes-patch-merge-key` (from `patchStrategy` and
//! `patchMergeKey` tags: kubectl's client-side apply computes its strategic merge patch from them),
//! `x-kubernetes-list-type` and `x-kubernetes-list-map-keys` (`+listType`, `+listMapKey`) and
//! `x-kubernetes-map-type` (`+mapType`, and `+structType` on a type). The table lists the fields of the definitions
//! the served kinds reach (Kubernetes 1.33's types), and the types themselves under an empty field name.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

#[derive(Clone, Copy)]
struct Ext {
    list_type: Option<&'static str>,
    map_keys: &'static [&'static str],
    map_type: Option<&'static str>,
    merge_key: Option<&'static str>,
    strategy: Option<&'static str>,
}

const NONE: Ext = Ext { list_type: None, map_keys: &[], map_type: None, merge_key: None, strategy: None };
const ATOMIC: Ext = Ext { list_type: Some("atomic"), ..NONE };
const ATOMIC_MAP: Ext = Ext { map_type: Some("atomic"), ..NONE };
const RETAIN_KEYS: Ext = Ext { strategy: Some("retainKeys"), ..NONE };
const SET: Ext = Ext { list_type: Some("set"), ..NONE };
const MERGED_SET: Ext = Ext { strategy: Some("merge"), ..SET };

/// An associative list, not merged by strategic merge patch (no patch strategy).
const fn keyed(keys: &'static [&'static str]) -> Ext {
    Ext { list_type: Some("map"), map_keys: keys, ..NONE }
}

/// An associative list that strategic merge patch merges by its first key.
const fn merged(keys: &'static [&'static str]) -> Ext {
    Ext { merge_key: Some(keys[0]), strategy: Some("merge"), ..keyed(keys) }
}

/// As `merged`, items also keeping only the keys a patch retains (`$retainKeys`, for volume sources).
const fn merged_retaining(keys: &'static [&'static str]) -> Ext {
    Ext { strategy: Some("merge,retainKeys"), ..merged(keys) }
}

const FIELDS: &[(&str, &[(&str, Ext)])] = &[
    (
        "io.k8s.api.admissionregistration.v1.MutatingWebhook",
        &[("admissionReviewVersions", ATOMIC), ("matchConditions", merged(&["name"])), ("rules", ATOMIC)],
    ),
    ("io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration", &[("webhooks", merged(&["name"]))]),
    (
        "io.k8s.api.admissionregistration.v1.RuleWithOperations",
        &[("apiGroups", ATOMIC), ("apiVersions", ATOMIC), ("operations", ATOMIC), ("resources", ATOMIC)],
    ),
    (
        "io.k8s.api.admissionregistration.v1.ValidatingWebhook",
        &[("admissionReviewVersions", ATOMIC), ("matchConditions", merged(&["name"])), ("rules", ATOMIC)],
    ),
    ("io.k8s.api.admissionregistration.v1.ValidatingWebhookConfiguration", &[("webhooks", merged(&["name"]))]),
    ("io.k8s.api.apps.v1.DaemonSetStatus", &[("conditions", merged(&["type"]))]),
    ("io.k8s.api.apps.v1.DeploymentSpec", &[("strategy", RETAIN_KEYS)]),
    ("io.k8s.api.apps.v1.DeploymentStatus", &[("conditions", merged(&["type"]))]),
    ("io.k8s.api.apps.v1.ReplicaSetStatus", &[("conditions", merged(&["type"]))]),
    ("io.k8s.api.apps.v1.StatefulSetSpec", &[("volumeClaimTemplates", ATOMIC)]),
    ("io.k8s.api.apps.v1.StatefulSetStatus", &[("conditions", merged(&["type"]))]),
    ("io.k8s.api.authentication.v1.TokenRequestSpec", &[("audiences", ATOMIC)]),
    ("io.k8s.api.authentication.v1.TokenReviewSpec", &[("audiences", ATOMIC)]),
    ("io.k8s.api.authentication.v1.TokenReviewStatus", &[("audiences", ATOMIC)]),
    ("io.k8s.api.authentication.v1.UserInfo", &[("groups", ATOMIC)]),
    ("io.k8s.api.authorization.v1.FieldSelectorAttributes", &[("requirements", ATOMIC)]),
    ("io.k8s.api.authorization.v1.LabelSelectorAttributes", &[("requirements", ATOMIC)]),
    ("io.k8s.api.authorization.v1.NonResourceRule", &[("nonResourceURLs", ATOMIC), ("verbs", ATOMIC)]),
    (
        "io.k8s.api.authorization.v1.ResourceRule",
        &[("apiGroups", ATOMIC), ("resourceNames", ATOMIC), ("resources", ATOMIC), ("verbs", ATOMIC)],
    ),
    ("io.k8s.api.authorization.v1.SubjectAccessReviewSpec", &[("groups", ATOMIC)]),
    (
        "io.k8s.api.authorization.v1.SubjectRulesReviewStatus",
        &[("nonResourceRules", ATOMIC), ("resourceRules", ATOMIC)],
    ),
    ("io.k8s.api.batch.v1.CronJobStatus", &[("active", ATOMIC)]),
    (
        "io.k8s.api.batch.v1.JobStatus",
        &[("conditions", Ext { merge_key: Some("type"), strategy: Some("merge"), ..ATOMIC })],
    ),
    ("io.k8s.api.batch.v1.PodFailurePolicy", &[("rules", ATOMIC)]),
    ("io.k8s.api.batch.v1.PodFailurePolicyOnExitCodesRequirement", &[("values", SET)]),
    ("io.k8s.api.batch.v1.PodFailurePolicyRule", &[("onPodConditions", ATOMIC)]),
    ("io.k8s.api.batch.v1.SuccessPolicy", &[("rules", ATOMIC)]),
    ("io.k8s.api.batch.v1.UncountedTerminatedPods", &[("failed", SET), ("succeeded", SET)]),
    ("io.k8s.api.core.v1.Capabilities", &[("add", ATOMIC), ("drop", ATOMIC)]),
    ("io.k8s.api.core.v1.CephFSPersistentVolumeSource", &[("monitors", ATOMIC)]),
    ("io.k8s.api.core.v1.CephFSVolumeSource", &[("monitors", ATOMIC)]),
    ("io.k8s.api.core.v1.ConfigMapKeySelector", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.ConfigMapProjection", &[("items", ATOMIC)]),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", &[("items", ATOMIC)]),
    (
        "io.k8s.api.core.v1.Container",
        &[
            ("args", ATOMIC),
            ("command", ATOMIC),
            ("env", merged(&["name"])),
            ("envFrom", ATOMIC),
            ("ports", merged(&["containerPort", "protocol"])),
            ("resizePolicy", ATOMIC),
            ("volumeDevices", merged(&["devicePath"])),
            ("volumeMounts", merged(&["mountPath"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.ContainerStatus",
        &[("allocatedResourcesStatus", merged(&["name"])), ("volumeMounts", merged(&["mountPath"]))],
    ),
    ("io.k8s.api.core.v1.DownwardAPIProjection", &[("items", ATOMIC)]),
    ("io.k8s.api.core.v1.DownwardAPIVolumeSource", &[("items", ATOMIC)]),
    ("io.k8s.api.core.v1.EndpointAddress", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.EndpointPort", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.EndpointSubset", &[("addresses", ATOMIC), ("notReadyAddresses", ATOMIC), ("ports", ATOMIC)]),
    ("io.k8s.api.core.v1.Endpoints", &[("subsets", ATOMIC)]),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        &[
            ("args", ATOMIC),
            ("command", ATOMIC),
            ("env", merged(&["name"])),
            ("envFrom", ATOMIC),
            ("ports", merged(&["containerPort", "protocol"])),
            ("resizePolicy", ATOMIC),
            ("volumeDevices", merged(&["devicePath"])),
            ("volumeMounts", merged(&["mountPath"])),
        ],
    ),
    ("io.k8s.api.core.v1.ExecAction", &[("command", ATOMIC)]),
    ("io.k8s.api.core.v1.FCVolumeSource", &[("targetWWNs", ATOMIC), ("wwids", ATOMIC)]),
    ("io.k8s.api.core.v1.HTTPGetAction", &[("httpHeaders", ATOMIC)]),
    ("io.k8s.api.core.v1.HostAlias", &[("hostnames", ATOMIC)]),
    ("io.k8s.api.core.v1.ISCSIPersistentVolumeSource", &[("portals", ATOMIC)]),
    ("io.k8s.api.core.v1.ISCSIVolumeSource", &[("portals", ATOMIC)]),
    ("io.k8s.api.core.v1.LinuxContainerUser", &[("supplementalGroups", ATOMIC)]),
    ("io.k8s.api.core.v1.LoadBalancerIngress", &[("ports", ATOMIC)]),
    ("io.k8s.api.core.v1.LoadBalancerStatus", &[("ingress", ATOMIC)]),
    ("io.k8s.api.core.v1.LocalObjectReference", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.NamespaceSpec", &[("finalizers", ATOMIC)]),
    ("io.k8s.api.core.v1.NamespaceStatus", &[("conditions", merged(&["type"]))]),
    ("io.k8s.api.core.v1.NodeAffinity", &[("preferredDuringSchedulingIgnoredDuringExecution", ATOMIC)]),
    ("io.k8s.api.core.v1.NodeSelector", &[("", ATOMIC_MAP), ("nodeSelectorTerms", ATOMIC)]),
    ("io.k8s.api.core.v1.NodeSelectorRequirement", &[("values", ATOMIC)]),
    ("io.k8s.api.core.v1.NodeSelectorTerm", &[("", ATOMIC_MAP), ("matchExpressions", ATOMIC), ("matchFields", ATOMIC)]),
    ("io.k8s.api.core.v1.ObjectFieldSelector", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.ObjectReference", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.PersistentVolumeClaimSpec", &[("accessModes", ATOMIC)]),
    (
        "io.k8s.api.core.v1.PersistentVolumeClaimStatus",
        &[
            ("accessModes", ATOMIC),
            ("allocatedResourceStatuses", Ext { map_type: Some("granular"), ..NONE }),
            ("conditions", merged(&["type"])),
        ],
    ),
    ("io.k8s.api.core.v1.PersistentVolumeSpec", &[("accessModes", ATOMIC), ("mountOptions", ATOMIC)]),
    (
        "io.k8s.api.core.v1.PodAffinity",
        &[
            ("preferredDuringSchedulingIgnoredDuringExecution", ATOMIC),
            ("requiredDuringSchedulingIgnoredDuringExecution", ATOMIC),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodAffinityTerm",
        &[("matchLabelKeys", ATOMIC), ("mismatchLabelKeys", ATOMIC), ("namespaces", ATOMIC)],
    ),
    (
        "io.k8s.api.core.v1.PodAntiAffinity",
        &[
            ("preferredDuringSchedulingIgnoredDuringExecution", ATOMIC),
            ("requiredDuringSchedulingIgnoredDuringExecution", ATOMIC),
        ],
    ),
    ("io.k8s.api.core.v1.PodDNSConfig", &[("nameservers", ATOMIC), ("options", ATOMIC), ("searches", ATOMIC)]),
    ("io.k8s.api.core.v1.PodSecurityContext", &[("supplementalGroups", ATOMIC), ("sysctls", ATOMIC)]),
    (
        "io.k8s.api.core.v1.PodSpec",
        &[
            ("containers", merged(&["name"])),
            ("ephemeralContainers", merged(&["name"])),
            ("hostAliases", merged(&["ip"])),
            ("imagePullSecrets", merged(&["name"])),
            ("initContainers", merged(&["name"])),
            ("nodeSelector", ATOMIC_MAP),
            ("readinessGates", ATOMIC),
            ("resourceClaims", merged_retaining(&["name"])),
            ("schedulingGates", merged(&["name"])),
            ("tolerations", ATOMIC),
            ("topologySpreadConstraints", merged(&["topologyKey", "whenUnsatisfiable"])),
            ("volumes", merged_retaining(&["name"])),
        ],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        &[
            ("conditions", merged(&["type"])),
            ("containerStatuses", ATOMIC),
            ("ephemeralContainerStatuses", ATOMIC),
            ("hostIPs", Ext { merge_key: Some("ip"), strategy: Some("merge"), ..ATOMIC }),
            ("initContainerStatuses", ATOMIC),
            ("podIPs", merged(&["ip"])),
            ("resourceClaimStatuses", merged_retaining(&["name"])),
        ],
    ),
    ("io.k8s.api.core.v1.ProjectedVolumeSource", &[("sources", ATOMIC)]),
    ("io.k8s.api.core.v1.RBDPersistentVolumeSource", &[("monitors", ATOMIC)]),
    ("io.k8s.api.core.v1.RBDVolumeSource", &[("monitors", ATOMIC)]),
    ("io.k8s.api.core.v1.ReplicationControllerSpec", &[("selector", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.ReplicationControllerStatus", &[("conditions", merged(&["type"]))]),
    ("io.k8s.api.core.v1.ResourceFieldSelector", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.ResourceRequirements", &[("claims", keyed(&["name"]))]),
    ("io.k8s.api.core.v1.ResourceStatus", &[("resources", keyed(&["resourceID"]))]),
    ("io.k8s.api.core.v1.SecretKeySelector", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.SecretProjection", &[("items", ATOMIC)]),
    ("io.k8s.api.core.v1.SecretReference", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.core.v1.SecretVolumeSource", &[("items", ATOMIC)]),
    ("io.k8s.api.core.v1.ServiceAccount", &[("imagePullSecrets", ATOMIC), ("secrets", merged(&["name"]))]),
    (
        "io.k8s.api.core.v1.ServiceSpec",
        &[
            ("clusterIPs", ATOMIC),
            ("externalIPs", ATOMIC),
            ("ipFamilies", ATOMIC),
            ("loadBalancerSourceRanges", ATOMIC),
            ("ports", merged(&["port", "protocol"])),
            ("selector", ATOMIC_MAP),
        ],
    ),
    ("io.k8s.api.core.v1.ServiceStatus", &[("conditions", merged(&["type"]))]),
    ("io.k8s.api.core.v1.TopologySpreadConstraint", &[("matchLabelKeys", ATOMIC)]),
    ("io.k8s.api.core.v1.TypedLocalObjectReference", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.networking.v1.HTTPIngressRuleValue", &[("paths", ATOMIC)]),
    ("io.k8s.api.networking.v1.IngressLoadBalancerIngress", &[("ports", ATOMIC)]),
    ("io.k8s.api.networking.v1.IngressLoadBalancerStatus", &[("ingress", ATOMIC)]),
    ("io.k8s.api.networking.v1.IngressSpec", &[("rules", ATOMIC), ("tls", ATOMIC)]),
    ("io.k8s.api.networking.v1.IngressTLS", &[("hosts", ATOMIC)]),
    ("io.k8s.api.networking.v1.ServiceBackendPort", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.rbac.v1.AggregationRule", &[("clusterRoleSelectors", ATOMIC)]),
    ("io.k8s.api.rbac.v1.ClusterRole", &[("rules", ATOMIC)]),
    ("io.k8s.api.rbac.v1.ClusterRoleBinding", &[("subjects", ATOMIC)]),
    (
        "io.k8s.api.rbac.v1.PolicyRule",
        &[
            ("apiGroups", ATOMIC),
            ("nonResourceURLs", ATOMIC),
            ("resourceNames", ATOMIC),
            ("resources", ATOMIC),
            ("verbs", ATOMIC),
        ],
    ),
    ("io.k8s.api.rbac.v1.Role", &[("rules", ATOMIC)]),
    ("io.k8s.api.rbac.v1.RoleBinding", &[("subjects", ATOMIC)]),
    ("io.k8s.api.rbac.v1.RoleRef", &[("", ATOMIC_MAP)]),
    ("io.k8s.api.rbac.v1.Subject", &[("", ATOMIC_MAP)]),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionNames",
        &[("categories", ATOMIC), ("shortNames", ATOMIC)],
    ),
    ("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionSpec", &[("versions", ATOMIC)]),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus",
        &[("conditions", keyed(&["type"])), ("storedVersions", ATOMIC)],
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion",
        &[("additionalPrinterColumns", ATOMIC), ("selectableFields", ATOMIC)],
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
        &[
            ("allOf", ATOMIC),
            ("anyOf", ATOMIC),
            ("enum", ATOMIC),
            ("oneOf", ATOMIC),
            ("required", ATOMIC),
            ("x-kubernetes-list-map-keys", ATOMIC),
            ("x-kubernetes-validations", merged(&["rule"])),
        ],
    ),
    (
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.WebhookConversion",
        &[("conversionReviewVersions", ATOMIC)],
    ),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", &[("dryRun", ATOMIC)]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.FieldSelectorRequirement", &[("values", ATOMIC)]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector", &[("", ATOMIC_MAP), ("matchExpressions", ATOMIC)]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement", &[("values", ATOMIC)]),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        &[("finalizers", MERGED_SET), ("managedFields", ATOMIC), ("ownerReferences", merged(&["uid"]))],
    ),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference", &[("", ATOMIC_MAP)]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Status", &[("details", ATOMIC)]),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails", &[("causes", ATOMIC)]),
    ("io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec", &[("caBundle", ATOMIC)]),
    ("io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceStatus", &[("conditions", merged(&["type"]))]),
];

impl Ext {
    fn to_map(self) -> Map<String, Value> {
        let mut map = Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                map.insert(key.to_owned(), value);
            }
        };
        put("x-kubernetes-list-type", self.list_type.map(Value::from));
        put("x-kubernetes-list-map-keys", (!self.map_keys.is_empty()).then(|| json!(self.map_keys)));
        put("x-kubernetes-map-type", self.map_type.map(Value::from));
        put("x-kubernetes-patch-merge-key", self.merge_key.map(Value::from));
        put("x-kubernetes-patch-strategy", self.strategy.map(Value::from));
        map
    }
}

/// Adds the extensions to the definitions (v2 form: beside a property's `$ref`).
pub fn apply(definitions: &mut BTreeMap<String, Value>) {
    for (name, fields) in FIELDS {
        let Some(definition) = definitions.get_mut(*name) else { continue };
        for (field, ext) in *fields {
            let target = if field.is_empty() {
                Some(&mut *definition)
            } else {
                definition.get_mut("properties").and_then(|p| p.get_mut(*field))
            };
            if let Some(Value::Object(schema)) = target {
                schema.extend(ext.to_map());
            }
        }
    }
}
