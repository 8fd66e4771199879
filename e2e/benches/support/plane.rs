//! The control plane a benchmark runs on, chosen by `OLMV2_E2E_KUBERNETES` as the end-to-end tests choose theirs: the
//! test control plane (in-process, the default) or real Kubernetes (etcd, kube-apiserver and kube-controller-manager,
//! `scripts/install-kubernetes`). The two share the machine's cores differently (the test control plane runs in the
//! bench's own process), so a figure is worth reading on both. What differs between them is answered here: how the
//! set-up's objects are created, how the API server reaches the controller's process, who runs the Deployments' pods,
//! and where the audit records come from (kube-apiserver's audit log, read as it grows).

#![allow(dead_code)] // each benchmark uses part of it

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use kube::api::{ApiResource, DynamicObject, PostParams};
use kube_emulator::audit::Record;
use kube_emulator::outbound::ClientIdentity;
use olmv2_e2e::cluster::{record_of, Cluster, Kubernetes};
use olmv2_e2e::kubernetes::AuditLogReader;
use olmv2_e2e::project;
use olmv2_e2e::real::{self, ServicePorts};
use serde_json::Value;

/// A control plane with the project's CRDs.
pub struct Plane {
    cluster: Cluster,
    /// The administrator's client, made once (on real Kubernetes each client reads its certificates anew).
    admin: tokio::sync::OnceCell<kube::Client>,
    /// The resources of the kinds created so far, by apiVersion and kind (real Kubernetes: found by discovery).
    resources: Mutex<HashMap<(String, String), ApiResource>>,
    /// The audit log read so far (real Kubernetes).
    audit: Mutex<AuditTail>,
    /// The ports the controller's processes listen on, the same for a restarted controller (on real Kubernetes its
    /// Services, webhook configurations and APIService name them).
    ports: OnceLock<ServicePorts>,
}

/// kube-apiserver's audit log, read from where the last reading stopped, and its records so far.
#[derive(Default)]
struct AuditTail {
    reader: AuditLogReader,
    records: Vec<Record>,
}

impl AuditTail {
    fn read(&mut self, path: &Path) {
        let added = self.reader.read_new(path).expect("the audit log reads");
        self.records.extend(added.into_iter().map(record_of));
    }
}

impl Plane {
    /// Starts the backend `OLMV2_E2E_KUBERNETES` names, with the project's CRDs (`name` goes into a real control
    /// plane's directory name).
    pub async fn start(name: &str) -> Self {
        let kubernetes = Kubernetes::from_env().expect("OLMV2_E2E_KUBERNETES names a backend");
        let cluster = Cluster::start(kubernetes, name).await.expect("the control plane starts");
        Self {
            cluster,
            admin: tokio::sync::OnceCell::new(),
            resources: Mutex::new(HashMap::new()),
            audit: Mutex::new(AuditTail::default()),
            ports: OnceLock::new(),
        }
    }

    /// Which backend this is, as the bench prints it.
    pub fn describe(&self) -> &'static str {
        match self.cluster.kubernetes() {
            Kubernetes::Emulator => "on the test control plane",
            Kubernetes::Real => "on real Kubernetes (etcd, kube-apiserver, kube-controller-manager)",
        }
    }

    /// A client as the administrator.
    pub async fn client(&self) -> kube::Client {
        let admin = self.admin.get_or_try_init(|| self.cluster.client()).await;
        admin.expect("the administrator's client").clone()
    }

    /// Creates `object`: on the test control plane as the control plane itself (no admission), on real Kubernetes as
    /// the administrator.
    pub async fn create(&self, object: &Value) {
        if let Some(plane) = self.cluster.emulator() {
            project::create(plane, object).await.expect("created");
            return;
        }
        let admin = self.client().await;
        let resource = self.resource(&admin, object).await;
        let typed: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
        if let Err(error) = real::api_in(admin, object, &resource).create(&PostParams::default(), &typed).await {
            panic!("creating {} {}: {error}", object["kind"], object["metadata"]["name"]);
        }
    }

    /// The resource of `object`'s kind, discovered once per kind (a discovery per object would double the requests
    /// of a set-up of thousands).
    async fn resource(&self, admin: &kube::Client, object: &Value) -> ApiResource {
        let key = (object["apiVersion"].to_string(), object["kind"].to_string());
        if let Some(resource) = self.resources.lock().unwrap().get(&key) {
            return resource.clone();
        }
        let resource = real::resource_for(admin, object).await.expect("the kind is served");
        self.resources.lock().unwrap().insert(key, resource.clone());
        resource
    }

    /// Every request's audit record so far, oldest first.
    pub fn records(&self) -> Vec<Record> {
        match self.cluster.real() {
            None => self.cluster.audit_records(),
            Some(real) => {
                let mut tail = self.audit.lock().unwrap();
                tail.read(&real.audit_log());
                tail.records.clone()
            }
        }
    }

    /// How many audit records so far `matches` holds for.
    pub fn count(&self, matches: impl Fn(&Record) -> bool) -> usize {
        match (self.cluster.emulator(), self.cluster.real()) {
            (Some(plane), _) => plane.api.audit.count(matches),
            (None, Some(real)) => {
                let mut tail = self.audit.lock().unwrap();
                tail.read(&real.audit_log());
                tail.records.iter().filter(|record| matches(record)).count()
            }
            (None, None) => 0,
        }
    }

    /// Whether the audit records may have lost their oldest (the test control plane keeps a bounded number; the
    /// audit log's file is not rotated).
    pub fn audit_full(&self) -> bool {
        self.cluster.emulator().is_some_and(|plane| plane.api.audit.count(|_| true) >= kube_emulator::audit::CAPACITY)
    }

    /// Writes the controller's kubeconfig (`deploy/`'s ServiceAccount) to `path`, makes the API server reach the
    /// webhook and the aggregated API at the controller's ports, and answers the arguments of `olmv2 run` that
    /// name them: (health address, aggregated API address, arguments).
    pub async fn controller_identity(&self, path: &Path) -> (SocketAddr, SocketAddr, Vec<String>) {
        let ports = *self.ports.get_or_init(|| ServicePorts::free().expect("free ports"));
        let [health, webhook, api] = [ports.health, ports.webhook, ports.api].map(|port| (ports.host, port).into());
        let mut arguments: Vec<String> = [("--health-address", health), ("--webhook-address", webhook)]
            .into_iter()
            .chain([("--api-address", api)])
            .flat_map(|(flag, address): (&str, SocketAddr)| [flag.to_owned(), address.to_string()])
            .collect();
        match self.cluster.emulator() {
            Some(plane) => {
                std::fs::write(path, project::controller_kubeconfig(plane).await.expect("identity")).unwrap();
                plane.api.endpoints.set(project::CONTROLLER_NAMESPACE, "olmv2-webhook", webhook);
                plane.api.endpoints.set(project::CONTROLLER_NAMESPACE, project::API_SERVICE, api);
            }
            None => {
                // deploy/ applied (again), the Services leading to the ports, a token for the ServiceAccount.
                self.cluster.controller_config(&ports).await.expect("deploy/ applied, the controller's token");
                let real = self.cluster.real().expect("real Kubernetes");
                std::fs::copy(real.dir().join("controller.kubeconfig"), path).expect("the controller's kubeconfig");
                // The webhook configurations and the APIService name these ports.
                for (flag, port) in [("--webhook-service-port", ports.webhook), ("--api-service-port", ports.api)] {
                    arguments.extend([flag.to_owned(), port.to_string()]);
                }
            }
        }
        (health, api, arguments)
    }

    /// Runs the pods of the Deployments the controller makes until aborted: on the test control plane, which runs
    /// no Deployment controller, a stand-in reports lagging Deployments rolled out; on real Kubernetes, a stand-in
    /// kubelet reports every pod Running and Ready, and kube-controller-manager does the rest.
    pub fn run_deployments(&self, admin: kube::Client) -> tokio::task::JoinHandle<()> {
        match self.cluster.kubernetes() {
            Kubernetes::Emulator => crate::scale::deployment_stand_in(admin),
            Kubernetes::Real => real::spawn_kubelet_everywhere(admin),
        }
    }

    /// The front proxy's identity: what the API server presents to the aggregated API server.
    pub fn front_proxy(&self) -> ClientIdentity {
        self.cluster.front_proxy().expect("the front proxy's identity")
    }
}
