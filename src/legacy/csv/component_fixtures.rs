//! A CSV with an owned APIService and every kind of webhook, for the tests of the components' decisions.

use serde_json::json;

use crate::api::v1alpha1::ClusterServiceVersion;

/// `etcd.v1` in `ops`: Deployment `api` serves the APIService `v1alpha1.wizards.example.com` on 5443 and
/// Deployment `hooks` a validating, a mutating and a conversion webhook.
pub fn csv() -> ClusterServiceVersion {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "wizard.v1", "namespace": "ops", "uid": "csv-uid"},
        "spec": {
            "displayName": "Wizard",
            "installModes": [{"type": "AllNamespaces", "supported": true}, {"type": "OwnNamespace", "supported": false}],
            "customresourcedefinitions": {"owned": [{"name": "spells.example.com", "version": "v1", "kind": "Spell"}]},
            "apiservicedefinitions": {"owned": [{"name": "wizards", "group": "wizards.example.com", "version": "v1alpha1",
                "kind": "Wizard", "deploymentName": "api", "containerPort": 5443}]},
            "webhookdefinitions": [
                {"generateName": "vspell.example.com", "type": "ValidatingAdmissionWebhook", "deploymentName": "hooks",
                 "containerPort": 443, "targetPort": 9443, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                 "failurePolicy": "Fail", "webhookPath": "/validate",
                 "rules": [{"operations": ["CREATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["spells"]}]},
                {"generateName": "mspell.example.com", "type": "MutatingAdmissionWebhook", "deploymentName": "hooks",
                 "containerPort": 443, "targetPort": 9443, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                 "reinvocationPolicy": "Never", "webhookPath": "/mutate",
                 "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"], "apiVersions": ["v1"], "resources": ["spells"]}]},
                {"generateName": "cspell.example.com", "type": "ConversionWebhook", "deploymentName": "hooks",
                 "containerPort": 443, "targetPort": 9443, "sideEffects": "None", "admissionReviewVersions": ["v1", "v1beta1"],
                 "conversionCRDs": ["spells.example.com"]}
            ],
            "install": {"strategy": "deployment", "spec": {"deployments": [
                {"name": "api", "spec": {"selector": {"matchLabels": {"app": "api"}}, "template": {
                    "metadata": {"labels": {"app": "api"}},
                    "spec": {"serviceAccountName": "wizard", "containers": [{"name": "api", "image": "example.com/api"}]}}}},
                {"name": "hooks", "spec": {"selector": {"matchLabels": {"app": "hooks"}}, "template": {
                    "metadata": {"labels": {"app": "hooks"}, "annotations": {"kept": "yes"}},
                    "spec": {"volumes": [{"name": "webhook-cert", "emptyDir": {}}, {"name": "data", "emptyDir": {}}],
                        "containers": [{"name": "hooks", "image": "example.com/hooks", "volumeMounts": [
                            {"name": "certs", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
                            {"name": "data", "mountPath": "/data"}]}]}}}},
                {"name": "plain", "spec": {"selector": {"matchLabels": {"app": "plain"}}, "template": {
                    "metadata": {"labels": {"app": "plain"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
            ]}}
        }
    }))
    .expect("csv")
}
