//! The cluster an end-to-end test runs the project on: the test control plane (the default, in-process) or real
//! Kubernetes (etcd, kube-apiserver and kube-controller-manager, [`RealControlPlane`]), chosen by
//! `OLMV2_E2E_KUBERNETES` (`emulator` or `real`). Either way the project's CRDs are installed and the controllers run
//! in-process as `deploy/`'s ServiceAccount; what differs between the two (how kube-apiserver reaches the controller's
//! webhooks and aggregated API, who rolls Deployments out, where the audit log is) is answered here, so that a test
//! reads the same on both.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube_emulator::audit::Record;
use kube_emulator::faults::Faults;
use kube_emulator::outbound::ClientIdentity;
use kube_emulator::{ControlPlane, Options};
use serde_json::{json, Value};

use crate::fault_proxy::FaultProxy;
use crate::kubernetes::{AuditRecord, ControllerManager, RealControlPlane, RealError, DEFAULT_USERS};
use crate::project::{self, ProjectError};
use crate::real::{self, ServicePorts};

/// The environment variable that chooses the backend.
pub const BACKEND_VARIABLE: &str = "OLMV2_E2E_KUBERNETES";

/// Which Kubernetes a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kubernetes {
    /// The test control plane (`kube-emulator`).
    Emulator,
    /// etcd, kube-apiserver and kube-controller-manager, as `scripts/install-kubernetes` builds them.
    Real,
}

impl Kubernetes {
    /// The backend `OLMV2_E2E_KUBERNETES` names (the emulator when unset).
    pub fn from_env() -> Result<Self, ClusterError> {
        match std::env::var(BACKEND_VARIABLE).as_deref() {
            Err(_) | Ok("" | "emulator") => Ok(Self::Emulator),
            Ok("real") => Ok(Self::Real),
            Ok(other) => Err(ClusterError::UnknownBackend(other.to_owned())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{BACKEND_VARIABLE}={0} names no backend (emulator or real)")]
    UnknownBackend(String),
    #[error("failed to start the test control plane: {0}")]
    StartEmulator(String),
    #[error("failed to start real Kubernetes")]
    StartReal(#[source] RealError),
    #[error("failed to issue a client configuration")]
    Credentials(#[source] RealError),
    #[error(transparent)]
    Project(#[from] ProjectError),
    #[error("the project's kinds were not discovered within 30 s: {0}")]
    Discovery(String),
    #[error("{0}")]
    Api(String),
}

/// The CustomResourceDefinitions a cluster is started with.
pub enum Crds {
    /// The project's (`olmv2::crdgen`).
    Project,
    /// Those of the YAML files in a directory: OLM v0's own, to run OLM v0 (`olm_v0`).
    Files(PathBuf),
}

enum Backend {
    Emulator(Box<ControlPlane>),
    Real {
        plane: Box<RealControlPlane>,
        /// The stand-in kubelets started by [`Cluster::roll_out`], by namespace.
        kubelets: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    },
}

/// A cluster with the project's CRDs installed.
pub struct Cluster {
    backend: Backend,
    /// On real Kubernetes, the fault-injecting proxy the controllers reach it through, once asked for
    /// ([`Cluster::put_faults_in_path`]).
    fault_proxy: Option<FaultProxy>,
}

impl Cluster {
    /// Starts the backend `kubernetes` (`name` goes into a real control plane's directory name) and installs the
    /// project's CRDs; on real Kubernetes, waits until discovery serves them, as kubectl needs.
    pub async fn start(kubernetes: Kubernetes, name: &str) -> Result<Self, ClusterError> {
        Self::start_with_crds(kubernetes, name, &Crds::Project).await
    }

    /// As [`Cluster::start`], with `crds` rather than the project's (another release's CRDs run on real Kubernetes
    /// only).
    pub async fn start_with_crds(kubernetes: Kubernetes, name: &str, crds: &Crds) -> Result<Self, ClusterError> {
        let backend = match kubernetes {
            Kubernetes::Emulator if matches!(crds, Crds::Files(_)) => {
                return Err(ClusterError::Api("the test control plane runs with the project's CRDs only".into()))
            }
            Kubernetes::Emulator => {
                let options = Options { bookmark_interval: Duration::from_millis(300), ..Options::default() };
                let plane =
                    ControlPlane::start(options).await.map_err(|e| ClusterError::StartEmulator(e.to_string()))?;
                project::install_crds(&plane).await?;
                Backend::Emulator(Box::new(plane))
            }
            Kubernetes::Real => {
                // The CRDs before kube-controller-manager, as in a cluster the project was installed in: its garbage
                // collector knows their kinds from its start, not from its next discovery (30 s later).
                let plane = RealControlPlane::start_with(name, &DEFAULT_USERS, ControllerManager::Later)
                    .await
                    .map_err(ClusterError::StartReal)?;
                let admin = plane.client().await.map_err(ClusterError::StartReal)?;
                let crds = match crds {
                    Crds::Project => olmv2::crdgen::all_crds(),
                    Crds::Files(dir) => real::read_crds(dir)?,
                };
                real::apply_crds(&admin, &crds).await?;
                wait_discovered(&admin, &crds).await?;
                plane.start_controller_manager().map_err(ClusterError::StartReal)?;
                Backend::Real { plane: Box::new(plane), kubelets: Mutex::new(HashMap::new()) }
            }
        };
        Ok(Self { backend, fault_proxy: None })
    }

    /// Makes the controllers started from now on reach the API server where faults can be injected
    /// ([`Cluster::faults`], [`Cluster::restart_watches`]): the test control plane itself; on real Kubernetes, a
    /// [`FaultProxy`] in front of kube-apiserver.
    pub async fn put_faults_in_path(&mut self) -> Result<(), ClusterError> {
        let Backend::Real { plane, .. } = &self.backend else { return Ok(()) };
        if self.fault_proxy.is_none() {
            let ca = std::fs::read(plane.dir().join("ca.crt")).map_err(|e| ClusterError::Api(e.to_string()))?;
            let user =
                format!("system:serviceaccount:{}:{}", project::CONTROLLER_NAMESPACE, project::CONTROLLER_ACCOUNT);
            let proxy =
                FaultProxy::start(&plane.url, &ca, &user).await.map_err(|e| ClusterError::Api(e.to_string()))?;
            self.fault_proxy = Some(proxy);
        }
        Ok(())
    }

    /// The switch of write faults and cut-off clients: the test control plane's, or the fault proxy's (`None` on
    /// real Kubernetes until [`Cluster::put_faults_in_path`]).
    pub fn faults(&self) -> Option<&Faults> {
        match &self.backend {
            Backend::Emulator(plane) => Some(&plane.api.faults),
            Backend::Real { .. } => self.fault_proxy.as_ref().map(FaultProxy::faults),
        }
    }

    /// Ends every watch of the controllers, as an API server's restart does; a watch resumed from before now is
    /// answered `410 Expired`. On real Kubernetes, the watches through the fault proxy.
    pub async fn restart_watches(&self) -> Result<(), ClusterError> {
        match &self.backend {
            Backend::Emulator(plane) => plane.api.store.restart_watches(),
            Backend::Real { plane, .. } => {
                let proxy = self.fault_proxy.as_ref().ok_or_else(|| ClusterError::Api("no fault proxy".into()))?;
                // kube-apiserver's revision now: every resourceVersion a client has seen is at most this.
                let admin = plane.client().await.map_err(ClusterError::Credentials)?;
                let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(admin);
                let listed = namespaces
                    .list_metadata(&ListParams::default().limit(1))
                    .await
                    .map_err(|e| ClusterError::Api(e.to_string()))?;
                let revision = listed.metadata.resource_version.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                proxy.restart_watches(revision + 1);
            }
        }
        Ok(())
    }

    /// How many watches were answered `410 Expired` so far (on real Kubernetes, by the fault proxy).
    pub fn expired_watches(&self) -> u64 {
        match &self.backend {
            Backend::Emulator(plane) => plane.api.store.expired_watches(),
            Backend::Real { .. } => self.fault_proxy.as_ref().map_or(0, FaultProxy::expired_watches),
        }
    }

    pub fn kubernetes(&self) -> Kubernetes {
        match self.backend {
            Backend::Emulator(_) => Kubernetes::Emulator,
            Backend::Real { .. } => Kubernetes::Real,
        }
    }

    /// The test control plane, when that is the backend: for what only it can do (inject faults, expire watches).
    pub fn emulator(&self) -> Option<&ControlPlane> {
        match &self.backend {
            Backend::Emulator(plane) => Some(plane),
            Backend::Real { .. } => None,
        }
    }

    /// The real control plane, when that is the backend.
    pub fn real(&self) -> Option<&RealControlPlane> {
        match &self.backend {
            Backend::Emulator(_) => None,
            Backend::Real { plane, .. } => Some(plane),
        }
    }

    /// The administrator's kubeconfig (in `system:masters`), as text.
    pub fn kubeconfig(&self) -> String {
        self.user_kubeconfig("kubernetes-admin", &["system:masters"])
    }

    /// A kubeconfig (text) for `user` in `groups` (and `system:authenticated`): a client certificate of the cluster's
    /// CA on either backend. Empty if it could not be issued, which kubectl then reports.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str]) -> String {
        match &self.backend {
            Backend::Emulator(plane) => plane.user_kubeconfig(user, groups),
            Backend::Real { plane, .. } => plane.certificate_kubeconfig(user, groups).unwrap_or_default(),
        }
    }

    /// A client as the administrator, bound to the calling runtime.
    pub async fn client(&self) -> Result<kube::Client, ClusterError> {
        match &self.backend {
            Backend::Emulator(plane) => plane.client().await.map_err(|e| ClusterError::Api(e.to_string())),
            Backend::Real { plane, .. } => plane.client().await.map_err(ClusterError::Credentials),
        }
    }

    /// A client for the kubeconfig text `kubeconfig` (one of [`Self::user_kubeconfig`]).
    pub async fn client_for(kubeconfig: &str) -> Result<kube::Client, ClusterError> {
        ControlPlane::client_for(kubeconfig).await.map_err(|e| ClusterError::Api(e.to_string()))
    }

    /// Creates `object` as the administrator (on the test control plane, as the control plane itself: no admission).
    pub async fn create(&self, object: &Value) -> Result<Value, ClusterError> {
        match &self.backend {
            Backend::Emulator(plane) => Ok(project::create(plane, object).await?),
            Backend::Real { plane, .. } => {
                let admin = plane.client().await.map_err(ClusterError::Credentials)?;
                let objects = real::api_for(&admin, object).await?;
                let typed: DynamicObject =
                    serde_json::from_value(object.clone()).map_err(|e| ClusterError::Api(e.to_string()))?;
                let created = objects.create(&PostParams::default(), &typed).await.map_err(|e| {
                    let name = object["metadata"]["name"].as_str().unwrap_or_default();
                    ClusterError::Api(format!("creating {} {name}: {e}", object["kind"]))
                })?;
                serde_json::to_value(created).map_err(|e| ClusterError::Api(e.to_string()))
            }
        }
    }

    /// Applies `deploy/`'s namespace, RBAC and Services and answers a client configuration as the controller's
    /// ServiceAccount. `ports` are the loopback ports the controller will listen on (real Kubernetes reaches them
    /// through its Services); the test control plane is told the ports when the controller starts.
    pub async fn controller_config(&self, ports: &ServicePorts) -> Result<kube::Config, ClusterError> {
        match &self.backend {
            Backend::Emulator(plane) => Ok(project::controller_config(plane).await?),
            Backend::Real { plane, .. } => {
                let admin = plane.client().await.map_err(ClusterError::Credentials)?;
                let mut config = real::controller_config(plane, &admin, ports).await?;
                if let Some(proxy) = &self.fault_proxy {
                    config.cluster_url =
                        proxy.url().parse().map_err(|e: http::uri::InvalidUri| ClusterError::Api(e.to_string()))?;
                    config.root_cert = None;
                }
                Ok(config)
            }
        }
    }

    /// Starts the controllers with `options`, as the controller's ServiceAccount, reachable by the API server: on the
    /// test control plane by setting the Services' endpoints; on real Kubernetes, on `ports` (the Services' host
    /// becoming theirs), which the webhook configurations and the APIService then name. Replicas share the ports,
    /// each on a loopback address of its own.
    pub async fn start_controllers(
        &self,
        mut options: olmv2::runtime::ControllerOptions,
        ports: &ServicePorts,
    ) -> Result<olmv2::process::Controllers, ClusterError> {
        let config = self.controller_config(ports).await?;
        match &self.backend {
            Backend::Emulator(plane) => Ok(project::start_controllers(plane, config, options).await?),
            Backend::Real { .. } => {
                options.webhook.address = (ports.host, ports.webhook).into();
                options.webhook.service_port = i32::from(ports.webhook);
                options.api.address = (ports.host, ports.api).into();
                options.api.service_port = i32::from(ports.api);
                let health = std::sync::Arc::new(olmv2::server::Health::default());
                olmv2::process::start(config, options, health)
                    .await
                    .map_err(|e| ClusterError::Project(ProjectError::Controllers(e)))
            }
        }
    }

    /// Makes the API server reach the Service `namespace/name` at `address`. On the test control plane its endpoints
    /// are set. Real Kubernetes reaches a webhook or an APIService through an ExternalName Service at the port their
    /// configuration names: the Service becomes one whose host is loopback when `address` is, and a name that does
    /// not resolve otherwise (`127.0.0.1` as `localhost`, as `deploy/`'s Services are made); `address`'s port must be
    /// the one the configuration names (or stand for a dead end).
    pub async fn point_service(&self, namespace: &str, name: &str, address: SocketAddr) -> Result<(), ClusterError> {
        match &self.backend {
            Backend::Emulator(plane) => {
                plane.api.endpoints.set(namespace, name, address);
                Ok(())
            }
            Backend::Real { plane, .. } => {
                let admin = plane.client().await.map_err(ClusterError::Credentials)?;
                let host = match address.ip() {
                    std::net::IpAddr::V4(ip) if ip.is_loopback() => real::external_name_of(ip),
                    _ => "unreachable.invalid".to_owned(),
                };
                let services = Api::<k8s_openapi::api::core::v1::Service>::namespaced(admin, namespace);
                // A merge patch, whose nulls remove what a Service of another type had (kube-apiserver refuses an
                // ExternalName Service with a cluster IP or a selector).
                let patch = json!({"spec": {"type": "ExternalName", "externalName": host, "clusterIP": null,
                    "clusterIPs": null, "selector": null, "ipFamilies": null, "ipFamilyPolicy": null,
                    "internalTrafficPolicy": null, "sessionAffinity": null}});
                let failed = |e: kube::Error| ClusterError::Api(format!("pointing Service {namespace}/{name}: {e}"));
                if services.get_opt(name).await.map_err(failed)?.is_none() {
                    let mut service = json!({"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": name, "namespace": namespace}, "spec": patch["spec"].clone()});
                    service["spec"]["ports"] = json!([{"port": address.port(), "targetPort": address.port()}]);
                    service["spec"].as_object_mut().into_iter().for_each(|spec| spec.retain(|_, v| !v.is_null()));
                    let service = serde_json::from_value(service).map_err(|e| ClusterError::Api(e.to_string()))?;
                    services.create(&PostParams::default(), &service).await.map_err(failed)?;
                    return Ok(());
                }
                services.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(failed)?;
                Ok(())
            }
        }
    }

    /// The API server's audit log so far, oldest first, as the test control plane records it.
    pub fn audit_records(&self) -> Vec<Record> {
        match &self.backend {
            Backend::Emulator(plane) => plane.api.audit.records(),
            Backend::Real { plane, .. } => {
                plane.audit_records().unwrap_or_default().into_iter().map(record_of).collect()
            }
        }
    }

    /// The front proxy's identity: the client certificate the API server presents to an aggregated API server.
    pub fn front_proxy(&self) -> Result<ClientIdentity, ClusterError> {
        match &self.backend {
            Backend::Emulator(plane) => {
                plane.api.front_proxy.clone().ok_or_else(|| ClusterError::Api("no front-proxy identity".into()))
            }
            Backend::Real { plane, .. } => {
                let (cert, key) = plane.front_proxy_client().map_err(ClusterError::Credentials)?;
                ClientIdentity::from_pem(&cert, &key).map_err(ClusterError::Api)
            }
        }
    }

    /// Rolls out every Deployment of `namespace`: on the test control plane, which runs no Deployment controller, by
    /// reporting each available; on real Kubernetes by running a stand-in kubelet in `namespace` (from now on) and
    /// waiting until the real Deployment controller reports each Deployment there available at its generation.
    pub async fn roll_out(&self, namespace: &str) -> Result<(), ClusterError> {
        let admin = self.client().await?;
        if self.real().is_none() {
            return project::report_rollouts(&admin, namespace).await.map_err(|e| ClusterError::Api(e.to_string()));
        }
        self.run_pods(namespace).await?;
        let deployments = Api::<Deployment>::namespaced(admin, namespace);
        let mut last = String::new();
        for _ in 0..300 {
            let listed =
                deployments.list(&ListParams::default()).await.map_err(|e| ClusterError::Api(e.to_string()))?;
            let waiting: Vec<String> =
                listed.items.iter().filter(|d| !available(d)).filter_map(|d| d.metadata.name.clone()).collect();
            if waiting.is_empty() {
                return Ok(());
            }
            last = waiting.join(", ");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ClusterError::Api(format!("Deployments of {namespace} not available within 30 s: {last}")))
    }

    /// On real Kubernetes, runs a stand-in kubelet in `namespace` from now on (once per namespace): its pods are bound
    /// and reported Running and Ready. Nothing on the test control plane, which runs no pods.
    pub async fn run_pods(&self, namespace: &str) -> Result<(), ClusterError> {
        let Backend::Real { kubelets, .. } = &self.backend else { return Ok(()) };
        let admin = self.client().await?;
        if let Ok(mut kubelets) = kubelets.lock() {
            kubelets.entry(namespace.to_owned()).or_insert_with(|| real::spawn_kubelet(admin, namespace));
        }
        Ok(())
    }

    /// Stops running the pods of `namespace` (see [`Cluster::run_pods`]): the stand-in kubelet stops, so pods made
    /// from now on stay unready, as on a node that is gone. On the emulator, nothing.
    pub fn stop_pods(&self, namespace: &str) {
        let Backend::Real { kubelets, .. } = &self.backend else { return };
        if let Some(kubelet) = kubelets.lock().ok().and_then(|mut kubelets| kubelets.remove(namespace)) {
            kubelet.abort();
        }
    }

    /// The directory of the real control plane's files and logs.
    pub fn real_dir(&self) -> Option<PathBuf> {
        self.real().map(|plane| plane.dir().to_owned())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Backend::Real { plane, kubelets } = &self.backend {
            let _keep = plane.keep_logs_on_panic();
            if let Ok(kubelets) = kubelets.lock() {
                kubelets.values().for_each(tokio::task::JoinHandle::abort);
            }
        }
    }
}

/// A record of kube-apiserver's audit log as the test control plane records it: its times on this process's
/// monotonic clock (the audit log's are the system clock's), so that one reads the same on both backends. Except for
/// watches: kube-apiserver records a watch when it ends (`took` its whole life), the test control plane when it
/// starts.
pub fn record_of(record: AuditRecord) -> Record {
    let (now, clock) = (Instant::now(), SystemTime::now());
    // How long before now: zero for a time the system clock has not reached yet (it was stepped back).
    let before_now = |at: SystemTime| clock.duration_since(at).unwrap_or_default();
    let received = record.received.and_then(|at| now.checked_sub(before_now(at)));
    let took = match (record.received, record.completed) {
        (Some(received), Some(completed)) => completed.duration_since(received).unwrap_or_default(),
        _ => Duration::ZERO,
    };
    let (path, query) = record.request_uri.split_once('?').unwrap_or((&record.request_uri, ""));
    Record {
        path: path.to_owned(),
        dry_run: query.split('&').any(|parameter| parameter == "dryRun=All"),
        user: record.user,
        impersonated_user: record.impersonated_user,
        verb: record.verb,
        api_group: record.api_group.unwrap_or_default(),
        resource: record.resource.unwrap_or_default(),
        subresource: record.subresource.unwrap_or_default(),
        namespace: record.namespace.unwrap_or_default(),
        name: record.name.unwrap_or_default(),
        user_agent: record.user_agent,
        code: record.code.unwrap_or_default(),
        received,
        took,
    }
}

/// Available at its generation, with every replica updated.
fn available(deployment: &Deployment) -> bool {
    let Some(status) = &deployment.status else { return false };
    let observed = status.observed_generation.is_some() && status.observed_generation == deployment.metadata.generation;
    let condition = status.conditions.iter().flatten().any(|c| c.type_ == "Available" && c.status == "True");
    let wanted = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    observed && condition && status.updated_replicas.unwrap_or(0) >= wanted
}

/// Waits until discovery serves every kind of `crds` (it lags their Established condition).
async fn wait_discovered(
    admin: &kube::Client,
    crds: &[k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition],
) -> Result<(), ClusterError> {
    let mut last = String::new();
    for _ in 0..300 {
        let mut missing = Vec::new();
        for crd in crds {
            let spec = &crd.spec;
            for version in spec.versions.iter().filter(|v| v.served) {
                let gvk = GroupVersionKind::gvk(&spec.group, &version.name, &spec.names.kind);
                if kube::discovery::pinned_kind(admin, &gvk).await.is_err() {
                    missing.push(format!("{}/{} {}", spec.group, version.name, spec.names.kind));
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        last = missing.join(", ");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(ClusterError::Discovery(last))
}

#[cfg(test)]
#[allow(clippy::expect_used)] // test code fails loudly by design
mod tests {
    use super::*;

    #[test]
    fn a_real_record_reads_as_the_test_control_planes() {
        let received = SystemTime::now() - Duration::from_secs(5);
        let record = record_of(AuditRecord {
            user: "alice".into(),
            verb: "patch".into(),
            resource: Some("deployments".into()),
            request_uri: "/apis/apps/v1/namespaces/a/deployments/d?dryRun=All&fieldManager=x".into(),
            received: Some(received),
            completed: Some(received + Duration::from_millis(3)),
            ..AuditRecord::default()
        });
        assert_eq!(record.path, "/apis/apps/v1/namespaces/a/deployments/d");
        assert!(record.dry_run);
        assert_eq!(record.took, Duration::from_millis(3));
        let ago = record.received.expect("received").elapsed();
        assert!(ago >= Duration::from_secs(5) && ago < Duration::from_secs(60), "{ago:?} ago, not 5 s");
        let unknown = record_of(AuditRecord { request_uri: "/api/v1/pods".into(), ..AuditRecord::default() });
        assert_eq!((unknown.received, unknown.took, unknown.dry_run), (None, Duration::ZERO, false));
    }
}
