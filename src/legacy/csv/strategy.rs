//! The deployment install strategy as OLM v0's `StrategyDeploymentInstaller` renders and checks it: each Deployment
//! of the CSV, owned by the CSV without blocking its deletion, labelled with its owner (`olm.owner*`), `olm.managed`
//! and a spec hash, its pod template annotated with the CSV's annotations (so `olm.targetNamespaces` reaches the
//! operator), `OPERATOR_CONDITION_NAME` in every container's environment and one old ReplicaSet kept; and whether
//! the Deployments on the cluster are that and healthy, with OLM's messages.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{json, Value};

use super::super::hash::fnv64a_hex;
use super::super::roles::{MANAGED_LABEL, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::v1::TARGET_NAMESPACES_ANNOTATION;
use crate::api::v1alpha1::{ClusterServiceVersion, StrategyDeploymentSpec};
use crate::api::v2alpha1::CREATOR_ANNOTATION;

/// The label holding the hash of the Deployment spec the CSV asked for.
pub const SPEC_HASH_LABEL: &str = "olm.deployment-spec-hash";

/// CSV annotations not carried to pod templates: the client's copy of the whole object, and the author record.
const NOT_COPIED: &[&str] = &["kubectl.kubernetes.io/last-applied-configuration", CREATOR_ANNOTATION];

/// The Deployments of `csv`, ready to apply.
pub fn deployments(csv: &ClusterServiceVersion) -> Vec<Value> {
    deployments_with(csv, &BTreeMap::new())
}

/// The Deployments of `csv`, those serving APIServices or webhooks with their certificate mounted (`cas`: the hash
/// of the CA of each serving Deployment, by name; `certs::mount`).
pub fn deployments_with(csv: &ClusterServiceVersion, cas: &BTreeMap<String, String>) -> Vec<Value> {
    csv.spec.install.spec.deployments.iter().map(|spec| deployment(csv, spec, cas.get(&spec.name))).collect()
}

fn deployment(csv: &ClusterServiceVersion, spec: &StrategyDeploymentSpec, ca_hash: Option<&String>) -> Value {
    let name = csv.metadata.name.clone().unwrap_or_default();
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let mut body = serde_json::to_value(&spec.spec).unwrap_or_else(|_| json!({}));
    if let Some(ca_hash) = ca_hash {
        let secret = super::certs::secret_name(&super::certs::service_name(&spec.name));
        super::certs::mount(&mut body, &secret, ca_hash);
    }
    let template = &mut body["template"];
    let mut annotations: serde_json::Map<String, Value> =
        template["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
    for (key, value) in csv.metadata.annotations.iter().flatten() {
        if !NOT_COPIED.contains(&key.as_str()) {
            annotations.insert(key.clone(), json!(value));
        }
    }
    template["metadata"]["annotations"] = Value::Object(annotations);
    for container in template["spec"]["containers"].as_array_mut().into_iter().flatten() {
        let env = container["env"].as_array().cloned().unwrap_or_default();
        let mut env: Vec<Value> = env.into_iter().filter(|var| var["name"] != "OPERATOR_CONDITION_NAME").collect();
        env.push(json!({"name": "OPERATOR_CONDITION_NAME", "value": name}));
        container["env"] = Value::Array(env);
    }
    body["revisionHistoryLimit"] = json!(1);
    let hash = spec_hash(&body);
    let mut labels: BTreeMap<String, String> = spec.label.clone().unwrap_or_default();
    labels.insert(MANAGED_LABEL.into(), "true".into());
    labels.insert(OWNER_LABEL.into(), name.clone());
    labels.insert(OWNER_NAMESPACE_LABEL.into(), namespace.clone());
    labels.insert(OWNER_KIND_LABEL.into(), "ClusterServiceVersion".into());
    labels.insert(SPEC_HASH_LABEL.into(), hash);
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": spec.name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "ClusterServiceVersion",
                "name": name,
                "uid": csv.metadata.uid.clone().unwrap_or_default(),
                "controller": false,
                "blockOwnerDeletion": false,
            }],
        },
        "spec": body,
    })
}

/// The hash of a Deployment spec: FNV-1a 64 of its JSON (keys sorted). OLM hashes Go's printed structure, which
/// nothing outside Go can reproduce; only this loop compares the label, to see that a Deployment is what it applied.
fn spec_hash(spec: &Value) -> String {
    fnv64a_hex(&spec.to_string())
}

/// Why the strategy is not (yet) installed and healthy, each with OLM's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unhealthy {
    /// A Deployment is missing.
    Missing(String),
    /// A Deployment is not the one the CSV asks for (spec hash or template annotations): install again.
    Outdated(String),
    /// A Deployment is rolling out.
    Waiting(String),
    /// A Deployment exceeded its progress deadline: OLM gives up on it.
    TimedOut(String),
    /// An APIService or webhook is not in place (`availability::judge`): the whole message, and whether the
    /// install runs again.
    Component { reinstall: bool, message: String },
}

impl Unhealthy {
    pub fn message(&self) -> &str {
        match self {
            Self::Missing(message)
            | Self::Outdated(message)
            | Self::Waiting(message)
            | Self::TimedOut(message)
            | Self::Component { message, .. } => message,
        }
    }
}

/// Whether the Deployments `found` (by name) are those of `csv`, applied, and available (OLM's `CheckInstalled`).
pub fn check(csv: &ClusterServiceVersion, found: &BTreeMap<String, Deployment>) -> Result<(), Unhealthy> {
    check_with(csv, found, &BTreeMap::new())
}

/// [`check`] of the Deployments as [`deployments_with`] renders them.
pub fn check_with(
    csv: &ClusterServiceVersion,
    found: &BTreeMap<String, Deployment>,
    cas: &BTreeMap<String, String>,
) -> Result<(), Unhealthy> {
    for wanted in deployments_with(csv, cas) {
        let name = wanted["metadata"]["name"].as_str().unwrap_or_default();
        let Some(deployment) = found.get(name) else {
            return Err(Unhealthy::Missing(format!("missing deployment with name={name}")));
        };
        if let Some(message) = rollout(deployment)? {
            return Err(Unhealthy::Waiting(format!("waiting for deployment {name} to become ready: {message}")));
        }
        let targets = csv.metadata.annotations.as_ref().and_then(|a| a.get(TARGET_NAMESPACES_ANNOTATION));
        let template = deployment.spec.as_ref().and_then(|spec| spec.template.metadata.as_ref());
        let annotations = template.and_then(|metadata| metadata.annotations.as_ref());
        if let Some(targets) = targets {
            let Some(annotations) = annotations else {
                return Err(Unhealthy::Outdated("no annotations found on deployment".into()));
            };
            match annotations.get(TARGET_NAMESPACES_ANNOTATION) {
                None => {
                    return Err(Unhealthy::Outdated(format!(
                        "annotations on deployment does not contain expected key: {TARGET_NAMESPACES_ANNOTATION}"
                    )))
                }
                Some(found) if found != targets => {
                    return Err(Unhealthy::Outdated(format!(
                        "unexpected annotation on deployment. Expected {TARGET_NAMESPACES_ANNOTATION}:{targets}, found {TARGET_NAMESPACES_ANNOTATION}:{found}"
                    )))
                }
                Some(_) => {}
            }
        }
        let labels = deployment.metadata.labels.clone().unwrap_or_default();
        let wanted_hash = wanted["metadata"]["labels"][SPEC_HASH_LABEL].as_str().unwrap_or_default();
        match labels.get(SPEC_HASH_LABEL) {
            None => return Err(Unhealthy::Outdated(format!("deployment {name} doesn't have a spec hash, update it"))),
            Some(hash) if hash != wanted_hash => {
                return Err(Unhealthy::Outdated(format!("deployment changed old hash={hash}, new hash={wanted_hash}")))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// OLM's `DeploymentStatus`: None when the rollout is complete, the message of the rollout otherwise, an error when
/// it exceeded its progress deadline.
fn rollout(deployment: &Deployment) -> Result<Option<String>, Unhealthy> {
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let status = deployment.status.clone().unwrap_or_default();
    if deployment.metadata.generation.unwrap_or(0) > status.observed_generation.unwrap_or(0) {
        return Ok(Some(format!("waiting for spec update of deployment \"{name}\" to be observed...")));
    }
    let condition = |type_: &str| status.conditions.iter().flatten().find(|c| c.type_ == type_).cloned();
    if condition("Progressing").is_some_and(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded")) {
        return Err(Unhealthy::TimedOut(format!(
            "deployment {name} not ready before timeout: deployment \"{name}\" exceeded its progress deadline"
        )));
    }
    let (replicas, updated) = (status.replicas.unwrap_or(0), status.updated_replicas.unwrap_or(0));
    if replicas > updated {
        return Ok(Some(format!(
            "deployment \"{name}\" waiting for {} outdated replica(s) to be terminated",
            replicas - updated
        )));
    }
    match condition("Available") {
        Some(available) if available.status == "True" => Ok(None),
        Some(available) => {
            Ok(Some(format!("deployment \"{name}\" not available: {}", available.message.unwrap_or_default())))
        }
        None => Ok(Some(format!("deployment \"{name}\" not available: missing condition \"Available\""))),
    }
}
