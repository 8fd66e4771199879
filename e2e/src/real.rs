//! The project on the real control plane ([`RealControlPlane`]), as [`crate::project`] installs it on the emulator:
//! its CRDs, `deploy/`'s namespace, RBAC and Services, and a ServiceAccount token for the controller; and a stand-in
//! kubelet, since no node runs pods.
//!
//! The controller runs in-process and serves its webhooks and aggregated API on loopback ports. kube-apiserver
//! reaches a webhook or an APIService through its Service, which its default resolver turns into an address: for a
//! Service of type ExternalName, `https://<externalName>:<port>`, the port being the one the webhook configuration or
//! APIService names. So `deploy/`'s Services become ExternalName Services of `localhost`, and the controller is told
//! that the Services' ports are the ports it listens on (`--webhook-service-port`, `--api-service-port`); kube-apiserver
//! still checks the serving certificate against `<service>.<namespace>.svc`, the names the controller issues its own
//! certificate for.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde::Deserialize as _;
use serde_json::{json, Value};

use crate::kubernetes::{config_from, RealControlPlane};
use crate::project::{self, ProjectError};

/// The field manager of what is applied here.
const MANAGER: &str = "olmv2-e2e";

/// The loopback address and ports the controller listens on, which its Services name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServicePorts {
    /// The loopback address: replicas of one controller listen on the same ports (the webhook configurations and the
    /// APIService name the port, and a replica takes another's port for a changed configuration), each on its own
    /// address, as pods do on their own IPs.
    pub host: std::net::Ipv4Addr,
    pub health: u16,
    pub webhook: u16,
    pub api: u16,
}

impl ServicePorts {
    /// Three loopback ports free at the time of asking.
    pub fn free() -> Result<Self, ProjectError> {
        let bind = || std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(ProjectError::ReservePort);
        let listeners = [bind()?, bind()?, bind()?];
        let port = |index: usize| listeners[index].local_addr().map(|a| a.port()).map_err(ProjectError::ReservePort);
        Ok(Self { host: std::net::Ipv4Addr::LOCALHOST, health: port(0)?, webhook: port(1)?, api: port(2)? })
    }

    /// The same ports on another loopback address, `127.0.0.<last>`.
    pub fn on_loopback(self, last: u8) -> Self {
        Self { host: std::net::Ipv4Addr::new(127, 0, 0, last), ..self }
    }

    /// The name an ExternalName Service gives for [`Self::host`]: `localhost`, or the address itself (four numeric
    /// labels are a DNS name to kube-apiserver's validation, and its resolver dials them as given).
    pub fn external_name(&self) -> String {
        external_name_of(self.host)
    }

    /// The port `deploy/`'s Service `name` leads to.
    fn of_service(&self, name: &str) -> Option<u16> {
        match name {
            "olmv2-webhook" => Some(self.webhook),
            project::API_SERVICE => Some(self.api),
            "olmv2-metrics" => Some(self.health),
            _ => None,
        }
    }
}

/// The ExternalName of a Service leading to `host`: see [`ServicePorts::external_name`].
pub fn external_name_of(host: std::net::Ipv4Addr) -> String {
    if host == std::net::Ipv4Addr::LOCALHOST {
        "localhost".to_owned()
    } else {
        host.to_string()
    }
}

fn api_error(action: &str) -> impl FnOnce(kube::Error) -> ProjectError + '_ {
    move |error| ProjectError::Api(format!("{action}: {error}"))
}

/// The resource of `object`'s kind, found by discovery.
pub async fn resource_for(admin: &kube::Client, object: &Value) -> Result<ApiResource, ProjectError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, _) = kube::discovery::pinned_kind(admin, &gvk)
        .await
        .map_err(|e| ProjectError::Api(format!("discovering {kind} ({api_version}): {e}")))?;
    Ok(resource)
}

/// The API of `resource` (`object`'s kind), in `object`'s namespace if it names one.
pub fn api_in(admin: kube::Client, object: &Value, resource: &ApiResource) -> Api<DynamicObject> {
    match object["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(admin, namespace, resource),
        None => Api::all_with(admin, resource),
    }
}

/// The API of `object`'s kind, found by discovery, in its namespace if it names one.
pub async fn api_for(admin: &kube::Client, object: &Value) -> Result<Api<DynamicObject>, ProjectError> {
    Ok(api_in(admin.clone(), object, &resource_for(admin, object).await?))
}

/// Applies `object` (server-side, as [`MANAGER`]), its resource found by discovery.
async fn apply(admin: &kube::Client, object: &Value) -> Result<(), ProjectError> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    api_for(admin, object)
        .await?
        .patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(object))
        .await
        .map_err(|e| ProjectError::Api(format!("applying {kind} {name}: {e}")))?;
    Ok(())
}

/// Applies the project's CRDs and waits until each is Established (30 s at most).
pub async fn install_crds(admin: &kube::Client) -> Result<usize, ProjectError> {
    apply_crds(admin, &olmv2::crdgen::all_crds()).await
}

/// The CustomResourceDefinitions of the YAML files in `dir` (OLM v0's release, as `scripts/install-olm` copies them).
pub fn read_crds(dir: &std::path::Path) -> Result<Vec<CustomResourceDefinition>, ProjectError> {
    let unreadable =
        |e: &dyn std::fmt::Display| ProjectError::Api(format!("reading the CRDs of {}: {e}", dir.display()));
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| unreadable(&e))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|extension| extension == "yaml"))
        .collect();
    paths.sort();
    let mut crds = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|e| unreadable(&e))?;
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = Value::deserialize(document).map_err(|e| unreadable(&e))?;
            if value["kind"] == "CustomResourceDefinition" {
                crds.push(serde_json::from_value(value).map_err(|e| unreadable(&e))?);
            }
        }
    }
    Ok(crds)
}

/// Applies `crds` and waits until each is Established (30 s at most).
pub async fn apply_crds(admin: &kube::Client, generated: &[CustomResourceDefinition]) -> Result<usize, ProjectError> {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in generated {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(crd))
            .await
            .map_err(|e| ProjectError::Api(format!("applying CRD {name}: {e}")))?;
    }
    for crd in generated {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut established = false;
        for _ in 0..300 {
            let current = crds.get(&name).await.map_err(api_error("reading a CRD"))?;
            let conditions = current.status.and_then(|s| s.conditions).unwrap_or_default();
            established = conditions.iter().any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !established {
            return Err(ProjectError::Api(format!("{name} was not established within 30 s")));
        }
    }
    Ok(generated.len())
}

/// `deploy/`'s Service as an ExternalName Service of `localhost` on the port the controller listens on.
fn external_name(mut service: Value, ports: &ServicePorts) -> Value {
    let name = service["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let port_name = service["spec"]["ports"][0]["name"].clone();
    let mut spec = json!({"type": "ExternalName", "externalName": ports.external_name()});
    if let Some(port) = ports.of_service(&name) {
        spec["ports"] = json!([{"name": port_name, "port": port, "targetPort": port}]);
    }
    service["spec"] = spec;
    service
}

/// Applies `deploy/`'s namespace, RBAC and Services (as ExternalName Services, see the module's documentation), and
/// returns a client configuration authenticated as the controller's ServiceAccount (a TokenRequest token, in the
/// kubeconfig `controller.kubeconfig` of the control plane's directory).
pub async fn controller_config(
    plane: &RealControlPlane,
    admin: &kube::Client,
    ports: &ServicePorts,
) -> Result<kube::Config, ProjectError> {
    for object in project::deploy_objects()? {
        let object = if object["kind"] == "Service" { external_name(object, ports) } else { object };
        apply(admin, &object).await?;
    }
    let token = project::controller_token(admin.clone()).await?;
    let path = plane.token_kubeconfig("controller", &token).map_err(|e| ProjectError::Config(e.to_string()))?;
    config_from(&path).await.map_err(|e| ProjectError::Config(e.to_string()))
}

/// Stands in for a scheduler and kubelet in `namespace`, as the administrator: every pod is bound to a node named
/// `stand-in` (which does not exist) and reported Running and Ready, every 200 ms, so that the real ReplicaSet and
/// Deployment controllers count it and report their Deployments Available. Stops when the task is aborted or its
/// runtime ends.
pub fn spawn_kubelet(admin: kube::Client, namespace: &str) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(admin, namespace);
    tokio::spawn(async move {
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for pod in list.items {
                    // A failure (the pod deleted meanwhile, a conflict) is retried on the next round.
                    let _ = run_pod(&pods, &pod).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// As [`spawn_kubelet`], for the pods of every namespace, listed every 500 ms (a benchmark's hundreds of namespaces
/// would be hundreds of lists otherwise).
pub fn spawn_kubelet_everywhere(admin: kube::Client) -> tokio::task::JoinHandle<()> {
    let all: Api<Pod> = Api::all(admin.clone());
    tokio::spawn(async move {
        loop {
            if let Ok(list) = all.list(&ListParams::default()).await {
                for pod in list.items {
                    let Some(namespace) = pod.metadata.namespace.as_deref() else { continue };
                    let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
                    // A failure (the pod deleted meanwhile, a conflict) is retried on the next round.
                    let _ = run_pod(&pods, &pod).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

async fn run_pod(pods: &Api<Pod>, pod: &Pod) -> Result<(), kube::Error> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
    if !bound {
        let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "stand-in"}});
        pods.create_subresource::<Value, Value>("binding", &name, &PostParams::default(), &binding).await?;
    }
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if ready && status.and_then(|s| s.phase.as_deref()) == Some("Running") {
        return Ok(());
    }
    let condition = |kind: &str| json!({"type": kind, "status": "True"});
    let status = json!({"status": {"phase": "Running", "conditions": [condition("PodScheduled"), condition("Initialized"), condition("ContainersReady"),
                       condition("Ready")]}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::expect_used)] // test code fails loudly by design
mod tests {
    use super::*;

    #[test]
    fn deploy_services_become_external_names_of_the_controllers_ports() {
        let ports = ServicePorts { host: std::net::Ipv4Addr::LOCALHOST, health: 1001, webhook: 1002, api: 1003 };
        let objects = project::deploy_objects().expect("deploy/ parses");
        assert!(objects.iter().all(|o| o["kind"] != "Deployment"), "the Deployment is the in-process controller");
        let services: Vec<Value> =
            objects.into_iter().filter(|o| o["kind"] == "Service").map(|o| external_name(o, &ports)).collect();
        let port_of = |name: &str| {
            let service = services.iter().find(|s| s["metadata"]["name"] == name).expect("deploy/ has the Service");
            assert_eq!(service["spec"]["type"], "ExternalName");
            assert_eq!(service["spec"]["externalName"], "localhost");
            assert!(service["spec"].get("selector").is_none(), "an ExternalName Service selects no pods");
            service["spec"]["ports"][0]["port"].as_u64()
        };
        assert_eq!(port_of("olmv2-webhook"), Some(1002));
        assert_eq!(port_of(project::API_SERVICE), Some(1003));
        assert_eq!(port_of("olmv2-metrics"), Some(1001));
    }

    #[test]
    fn free_ports_differ() {
        let ports = ServicePorts::free().expect("free ports");
        assert!(ports.health != ports.webhook && ports.webhook != ports.api && ports.api != ports.health);
    }
}
