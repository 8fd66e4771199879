//! The deployment configuration a user gives an operator's Deployments: OLM v0's Subscription `spec.config` and
//! OLM v1's `deploymentConfig`, with the same fields and meaning, so that a configuration written for either applies
//! unchanged. How each field is merged is `bundle::deployment_config`; this is only its shape and schema.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::api::nullable::null_as_default;
use crate::api::v1alpha1::SubscriptionConfig;

/// Changes applied to every Deployment of an operator bundle, with OLM's merge rules.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentConfig {
    /// Accepted as OLM accepts it, and ignored as OLM v0 and v1 ignore it: the configuration applies to every
    /// Deployment of the bundle.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// Replaces the pods' node selector; an empty map removes it.
    #[serde(default)]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Added to the pods' tolerations, unless an equal toleration is there.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Replaces the resource requirements of every container.
    #[serde(default)]
    pub resources: Option<ResourceRequirements>,
    /// Added to every container's environment sources, unless an equal source is there.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    /// Set in every container: a variable of the same name is replaced in place, others are appended.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub env: Vec<EnvVar>,
    /// Set in the pods: a volume of the same name is replaced, others are appended.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub volumes: Vec<Volume>,
    /// Set in every container: a mount of the same volume name is replaced, others are appended.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// Replaces the pods' affinity: `{}` removes it; within it, a node, pod or pod anti-affinity given replaces
    /// the pods' own, and an empty one (`{}`) removes it.
    #[serde(default)]
    pub affinity: Option<Affinity>,
    /// Added to the Deployments and their pod templates; annotations they already carry keep their value.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl DeploymentConfig {
    /// Whether the configuration changes nothing.
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// A Subscription's `spec.config` is the same configuration: the legacy Subscription loop applies it with the same
/// function as an Install.
impl From<&SubscriptionConfig> for DeploymentConfig {
    fn from(config: &SubscriptionConfig) -> Self {
        Self {
            selector: config.selector.clone(),
            node_selector: config.node_selector.clone(),
            tolerations: config.tolerations.clone().unwrap_or_default(),
            resources: config.resources.clone(),
            env_from: config.env_from.clone().unwrap_or_default(),
            env: config.env.clone().unwrap_or_default(),
            volumes: config.volumes.clone().unwrap_or_default(),
            volume_mounts: config.volume_mounts.clone().unwrap_or_default(),
            affinity: config.affinity.clone(),
            annotations: config.annotations.clone().unwrap_or_default(),
        }
    }
}

/// And back, for a Subscription made again from an Operator (`olmv2 migrate revert`): what is empty is left out.
impl From<&DeploymentConfig> for SubscriptionConfig {
    fn from(config: &DeploymentConfig) -> Self {
        fn some<T: Clone>(items: &[T]) -> Option<Vec<T>> {
            (!items.is_empty()).then(|| items.to_vec())
        }
        Self {
            selector: config.selector.clone(),
            node_selector: config.node_selector.clone(),
            tolerations: some(&config.tolerations),
            resources: config.resources.clone(),
            env_from: some(&config.env_from),
            env: some(&config.env),
            volumes: some(&config.volumes),
            volume_mounts: some(&config.volume_mounts),
            affinity: config.affinity.clone(),
            annotations: (!config.annotations.is_empty()).then(|| config.annotations.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_configuration_goes_to_a_subscription_and_back_unchanged() {
        let config: DeploymentConfig = serde_json::from_value(json!({"env": [{"name": "A", "value": "b"}],
            "nodeSelector": {}, "annotations": {"x": "y"}}))
        .expect("config");
        let subscription = SubscriptionConfig::from(&config);
        assert_eq!(subscription.volumes, None, "nothing empty is written");
        assert_eq!(subscription.node_selector, Some(BTreeMap::new()), "an empty selector still means something");
        assert_eq!(DeploymentConfig::from(&subscription), config);
    }

    #[test]
    fn null_lists_and_maps_read_as_absent_and_empty_ones_stay_distinct_where_they_mean_something() {
        let config: DeploymentConfig = serde_json::from_value(
            json!({"env": null, "volumes": null, "annotations": null, "nodeSelector": {}, "affinity": {}}),
        )
        .expect("config");
        assert!(config.env.is_empty() && config.volumes.is_empty() && config.annotations.is_empty());
        // An empty node selector or affinity removes the pods' own: it is not the same as none.
        assert_eq!(config.node_selector, Some(BTreeMap::new()));
        assert_eq!(config.affinity, Some(Affinity::default()));
        assert!(!config.is_empty());
        assert!(DeploymentConfig::default().is_empty());
    }

    #[test]
    fn a_subscription_config_converts_field_for_field() {
        let subscription: SubscriptionConfig = serde_json::from_value(json!({
            "env": [{"name": "HTTP_PROXY", "value": "http://proxy:3128"}],
            "envFrom": [{"configMapRef": {"name": "settings"}}],
            "volumes": [{"name": "certs", "secret": {"secretName": "ca"}}],
            "volumeMounts": [{"name": "certs", "mountPath": "/certs"}],
            "tolerations": [{"key": "infra", "operator": "Exists"}],
            "resources": {"limits": {"memory": "1Gi"}},
            "nodeSelector": {"role": "infra"},
            "affinity": {},
            "annotations": {"team": "a"},
            "selector": {"matchLabels": {"app": "x"}},
        }))
        .expect("subscription config");
        let config = DeploymentConfig::from(&subscription);
        let expected: DeploymentConfig =
            serde_json::from_value(serde_json::to_value(&subscription).expect("json")).expect("same shape");
        assert_eq!(config, expected);
        assert_eq!(DeploymentConfig::from(&SubscriptionConfig::default()), DeploymentConfig::default());
    }
}
