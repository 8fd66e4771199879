//! The harness of the project's end-to-end suites: a cluster with the project's CRDs (the test control plane, or real
//! Kubernetes when `OLMV2_E2E_KUBERNETES=real`: `olmv2_e2e::cluster`), a real registry, the controllers running as
//! `deploy/`'s ServiceAccount, bundle pushes, the real kubectl, and polling until an object reaches a state.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use kube::api::{Api, ListParams};
use olmv2::bundle::image::{ImageClient, RegistryOptions};
use olmv2::runtime::ControllerOptions;
use olmv2_e2e::cluster::{Cluster, Kubernetes};
use olmv2_e2e::project;
use olmv2_e2e::real::ServicePorts;
use olmv2_e2e::registry::Registry;
use serde_json::{json, Value};

use super::emulator::kubectl::Kubectl;

/// The identity the controllers run as (`deploy/`'s ServiceAccount).
pub const CONTROLLER_USER: &str = "system:serviceaccount:olmv2-system:olmv2-controller";

/// Changes the controllers' options before each start; it gets the harness's directory.
pub type Configure = Box<dyn Fn(&mut ControllerOptions, &Path) + Send + Sync>;

pub struct Harness {
    pub plane: Cluster,
    pub admin: kube::Client,
    pub registry: Registry,
    controllers: Option<olmv2::process::Controllers>,
    /// The ports every replica of the controllers listens on (real Kubernetes names them in the webhook
    /// configurations), and the last loopback address a replica was given.
    ports: ServicePorts,
    replicas: std::sync::atomic::AtomicU8,
    resync: Duration,
    configure: Configure,
    pub dir: PathBuf,
}

/// Whether a harness starts the controllers, and whether they reach the API server where faults are injected.
#[derive(Clone, Copy)]
enum Controllers {
    Started,
    Idle,
    ThroughFaults,
    IdleThroughFaults,
}

impl Harness {
    /// A control plane, a registry named `<suite>-<name>`, the controllers (settled objects looked at again every
    /// `resync`), and `namespaces` created.
    pub async fn start(suite: &str, name: &str, namespaces: &[&str], resync: Duration) -> Self {
        Self::start_configured(suite, name, namespaces, resync, Box::new(|_, _| {})).await
    }

    /// As `start`, with the controllers' options changed by `configure`.
    pub async fn start_configured(
        suite: &str,
        name: &str,
        namespaces: &[&str],
        resync: Duration,
        configure: Configure,
    ) -> Self {
        Self::prepare(suite, name, namespaces, resync, configure, Controllers::Started).await
    }

    /// As `start`, but no controllers run until the test starts them (`start_controllers`, or its own replicas).
    pub async fn start_idle(suite: &str, name: &str, namespaces: &[&str], resync: Duration) -> Self {
        Self::prepare(suite, name, namespaces, resync, Box::new(|_, _| {}), Controllers::Idle).await
    }

    /// As `start_configured`, the controllers reaching the API server where faults are injected (`faults`,
    /// `restart_watches`): on real Kubernetes, through the fault proxy.
    pub async fn start_faulty(
        suite: &str,
        name: &str,
        namespaces: &[&str],
        resync: Duration,
        configure: Configure,
    ) -> Self {
        Self::prepare(suite, name, namespaces, resync, configure, Controllers::ThroughFaults).await
    }

    /// As `start_idle`, every replica reaching the API server where faults are injected.
    pub async fn start_faulty_idle(suite: &str, name: &str, namespaces: &[&str], resync: Duration) -> Self {
        Self::prepare(suite, name, namespaces, resync, Box::new(|_, _| {}), Controllers::IdleThroughFaults).await
    }

    async fn prepare(
        suite: &str,
        name: &str,
        namespaces: &[&str],
        resync: Duration,
        configure: Configure,
        controllers: Controllers,
    ) -> Self {
        if std::env::var_os("RUST_LOG").is_some() {
            olmv2::telemetry::init(olmv2::telemetry::LogFormat::Text);
        }
        let kubernetes = Kubernetes::from_env().expect("a known backend");
        let mut plane = Cluster::start(kubernetes, &format!("{suite}-{name}")).await.expect("the cluster starts");
        if matches!(controllers, Controllers::ThroughFaults | Controllers::IdleThroughFaults) {
            plane.put_faults_in_path().await.expect("the faults in the controllers' path");
        }
        if let Some(real) = plane.real() {
            eprintln!(
                "{suite}-{name}: real Kubernetes {} ready in {:.1?}",
                real.binaries.kubernetes_version, real.start_time
            );
        }
        let admin = plane.client().await.expect("admin client");
        let registry = Registry::start(&format!("{suite}-{name}")).expect("docker-registry starts");
        let dir = std::env::temp_dir().join(format!("olmv2-{suite}-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let ports = ServicePorts::free().expect("free ports");
        let replicas = std::sync::atomic::AtomicU8::new(1);
        let mut harness = Self { plane, admin, registry, controllers: None, ports, replicas, resync, configure, dir };
        if matches!(controllers, Controllers::Started | Controllers::ThroughFaults) {
            harness.start_controllers().await;
        }
        for namespace in namespaces {
            let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
            harness.create(&object).await;
        }
        harness
    }

    /// Starts the controllers again after `stop_controllers`, with the same image cache.
    pub async fn start_controllers(&mut self) {
        let mut options =
            project::controller_options(vec![self.registry.host.clone()], self.dir.join("cache"), self.resync);
        (self.configure)(&mut options, &self.dir);
        let controllers = self.plane.start_controllers(options, &self.ports).await.expect("controllers start");
        self.controllers = Some(controllers);
    }

    /// Starts controllers with `options` beside any running (another replica, on a loopback address of its own), as
    /// the controller's ServiceAccount; the API server's calls to the webhook and the aggregated API go to them from
    /// now on.
    pub async fn start_replica(&self, options: ControllerOptions) -> olmv2::process::Controllers {
        let last = self.replicas.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let ports = self.ports.on_loopback(last);
        self.plane.start_controllers(options, &ports).await.expect("controllers start")
    }

    /// Which Kubernetes the test runs on.
    pub fn kubernetes(&self) -> Kubernetes {
        self.plane.kubernetes()
    }

    /// The switch of write faults and cut-off clients between the controllers and the API server (a harness
    /// started with `start_faulty`).
    pub fn faults(&self) -> &kube_emulator::faults::Faults {
        self.plane.faults().expect("a harness started with the faults in the controllers' path")
    }

    /// Ends every watch of the controllers, as an API server's restart does; a watch resumed from before now is
    /// answered `410 Expired` (a harness started with `start_faulty`).
    pub async fn restart_watches(&self) {
        self.plane.restart_watches().await.expect("watches restarted");
    }

    /// How many of the controllers' watches were answered `410 Expired` so far.
    pub fn expired_watches(&self) -> u64 {
        self.plane.expired_watches()
    }

    /// Creates `object` as the administrator (on the test control plane, as the control plane itself).
    pub async fn create(&self, object: &Value) -> Value {
        self.plane.create(object).await.expect("created")
    }

    /// Creates `object` as [`Self::create`] does, answering the failure.
    pub async fn try_create(&self, object: &Value) -> Result<Value, olmv2_e2e::cluster::ClusterError> {
        self.plane.create(object).await
    }

    /// A webhook that makes every ConfigMap write take a while (40 ms), so that a controller can be stopped in the
    /// middle of an apply; on either backend.
    pub async fn slow_configmap_writes(&self) -> kube_emulator::backend::Backend {
        use super::emulator::workloads;
        if let Some(plane) = self.plane.emulator() {
            return workloads::slow_configmap_writes(plane).await;
        }
        let backend = workloads::slow_configmap_webhook().await;
        self.plane.point_service("default", "slow", backend.address).await.expect("Service pointed");
        let configuration = workloads::slow_configmap_configuration(&backend, Some(backend.address.port()));
        self.create(&configuration).await;
        backend
    }

    /// The API server's audit log so far, oldest first.
    pub fn audit_records(&self) -> Vec<kube_emulator::audit::Record> {
        self.plane.audit_records()
    }

    /// Stops the controllers where they are, as a killed process would.
    pub fn stop_controllers(&mut self) {
        drop(self.controllers.take());
    }

    /// The running controllers, handed over (to be stopped cleanly, as a process asked to stop).
    pub fn take_controllers(&mut self) -> Option<olmv2::process::Controllers> {
        self.controllers.take()
    }

    /// Where the running controllers' webhook listens.
    pub fn webhook_address(&self) -> Option<std::net::SocketAddr> {
        self.controllers.as_ref().map(|c| c.webhook.address)
    }

    /// What the running controllers recorded (reconciles per controller).
    pub fn metrics(&self) -> Option<std::sync::Arc<olmv2::metrics::Metrics>> {
        self.controllers.as_ref().map(|c| c.metrics.clone())
    }

    /// Where the controllers' aggregated API server listens, when it runs.
    pub fn api_address(&self) -> Option<std::net::SocketAddr> {
        self.controllers.as_ref().and_then(|c| c.api.as_ref()).map(|api| api.address)
    }

    /// The real kubectl with `kubeconfig`, as a command to spawn (for watches, which do not end by themselves).
    pub fn kubectl_command(&self, kubeconfig: &str, args: &[&str]) -> std::process::Command {
        Kubectl::with_kubeconfig(&self.dir, &kubeconfig_file(kubeconfig), kubeconfig).command(args)
    }

    pub fn images(&self) -> ImageClient {
        ImageClient::new(RegistryOptions {
            insecure_registries: vec![self.registry.host.clone()],
            ..RegistryOptions::default()
        })
    }

    /// Pushes the sample bundle `bundles/<bundle>` as `<repository>:<tag>`; answers the image reference.
    pub async fn push_bundle(&self, bundle: &str, repository: &str, tag: &str) -> String {
        let image = self.registry.reference(&format!("{repository}:{tag}"));
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundles").join(bundle);
        self.images().push_bundle(&dir, &image, false).await.expect("bundle pushed");
        image
    }

    /// Pushes the sample bundle `bundles/<bundle>` rewritten (each file's text by `text`, given its name and text;
    /// its name by `name`) as `reference` (`<repository>:<tag>`); answers the image.
    pub async fn push_rewritten_bundle(
        &self,
        bundle: &str,
        reference: &str,
        text: impl Fn(&str, &str) -> String,
        name: impl Fn(&str) -> String,
    ) -> String {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundles").join(bundle);
        let dir = self.dir.join(reference.replace([':', '/'], "-"));
        for sub in ["manifests", "metadata"] {
            std::fs::create_dir_all(dir.join(sub)).expect("bundle directory");
            for entry in std::fs::read_dir(source.join(sub)).expect("sample bundle") {
                let path = entry.expect("bundle file").path();
                let original = std::fs::read_to_string(&path).expect("bundle file read");
                let file = path.file_name().expect("a file name").to_string_lossy().into_owned();
                std::fs::write(dir.join(sub).join(name(&file)), text(&file, &original)).expect("bundle file written");
            }
        }
        let image = self.registry.reference(reference);
        self.images().push_bundle(&dir, &image, false).await.expect("bundle pushed");
        image
    }

    /// Writes `blobs` as a File-Based Catalog (`<configs>/index/catalog.json` in the test's directory); answers the
    /// directory to push.
    pub fn write_catalog(&self, configs: &str, blobs: &[Value]) -> PathBuf {
        let configs = self.dir.join(configs);
        std::fs::create_dir_all(configs.join("index")).expect("catalog directory");
        let lines: Vec<String> = blobs.iter().map(Value::to_string).collect();
        std::fs::write(configs.join("index/catalog.json"), lines.join("\n")).expect("catalog written");
        configs
    }

    /// Writes `blobs` as a File-Based Catalog and pushes it as `catalog:latest`; answers the image.
    pub async fn push_catalog(&self, configs: &str, blobs: &[Value]) -> String {
        let configs = self.write_catalog(configs, blobs);
        let image = self.registry.reference("catalog:latest");
        self.images().push_catalog(&configs, &image).await.expect("catalog pushed");
        image
    }

    /// Polls `name` through `api` until `done` holds, for up to thirty seconds.
    pub async fn wait_for<K>(&self, api: &Api<K>, name: &str, what: &str, done: impl Fn(&K) -> bool) -> K
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    {
        for _ in 0..600 {
            if let Some(object) = api.get_opt(name).await.expect("get") {
                if done(&object) {
                    return object;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let last = api.get_opt(name).await.expect("get");
        panic!("{name} never became {what}; last: {}", serde_json::to_string_pretty(&last).unwrap());
    }

    /// Polls `name` through `api` until it is gone, for up to thirty seconds.
    pub async fn wait_gone<K>(&self, api: &Api<K>, name: &str, why: &str)
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    {
        for _ in 0..600 {
            if api.get_opt(name).await.expect("get").is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let last = api.get_opt(name).await.expect("get");
        panic!("{name} never went ({why}); last: {}", serde_json::to_string_pretty(&last).unwrap());
    }

    /// Rolls out every Deployment of `namespace` (see `Cluster::roll_out`).
    pub async fn roll_out(&self, namespace: &str) {
        self.plane.roll_out(namespace).await.expect("Deployments rolled out");
    }

    /// The real kubectl with `kubeconfig`, `stdin` typed in.
    pub fn kubectl(&self, kubeconfig: &str, args: &[&str], stdin: Option<&str>) -> Output {
        Kubectl::with_kubeconfig(&self.dir, &kubeconfig_file(kubeconfig), kubeconfig).run(args, stdin)
    }

    pub fn admin_kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.kubectl(&self.plane.kubeconfig(), args, stdin)
    }

    /// Runs the admin's `kubectl <args>` until it succeeds with output (stdout and stderr) holding `expected`, for up to
    /// thirty seconds; answers that output.
    pub async fn wait_kubectl(&self, args: &[&str], expected: &str) -> String {
        let mut last = String::new();
        for _ in 0..300 {
            let output = self.admin_kubectl(args, None);
            last = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
            if output.status.success() && last.contains(expected) {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("kubectl {args:?} never showed {expected:?}; last:\n{last}");
    }

    /// The events recorded in `namespace` with `reason`, polled until one exists.
    pub async fn wait_event(&self, namespace: &str, reason: &str) -> k8s_openapi::api::events::v1::Event {
        let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(self.admin.clone(), namespace);
        for _ in 0..200 {
            let listed = events.list(&ListParams::default()).await.expect("events").items;
            if let Some(event) = listed.into_iter().find(|e| e.reason.as_deref() == Some(reason)) {
                return event;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no event {reason} in {namespace}");
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // The controllers stop before the cluster they talk to.
        drop(self.controllers.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The file name a kubeconfig is written under: one per kubeconfig, so that two users' kubectl never share one.
fn kubeconfig_file(kubeconfig: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    kubeconfig.hash(&mut hasher);
    format!("{:016x}.kubeconfig", hasher.finish())
}

/// The `olmv2` binary of this workspace, brought up to date (a test of this crate alone does not build it).
pub fn olmv2_binary() -> std::path::PathBuf {
    let status =
        std::process::Command::new(env!("CARGO")).args(["build", "-p", "olmv2", "--bin", "olmv2"]).status().unwrap();
    assert!(status.success());
    let target = std::env::current_exe().unwrap().parent().unwrap().parent().unwrap().to_path_buf();
    target.join("olmv2")
}
