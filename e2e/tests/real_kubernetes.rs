//! The real control plane (`olmv2_e2e::kubernetes`): etcd, kube-apiserver and kube-controller-manager start, kubectl
//! and the project's CRDs work on them, the controller-manager's controllers run, and RBAC refusals reach the audit
//! log; and the README's walkthrough runs on it, the controller in-process as `deploy/`'s ServiceAccount, with its
//! webhooks and aggregated API reached by kube-apiserver through their Services; and the gate's attacks of
//! `tests/project/attacks/gate.rs` run on it. One control plane for the file's checks and the walkthrough, started by
//! the first test that needs it; each attack starts one of its own, one attack at a time.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::future::Future;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use olmv2::api::v2alpha1::{Install, InstallState, Operator, OperatorState};
use olmv2_e2e::kubernetes::RealControlPlane;
use olmv2_e2e::real::{self, ServicePorts};
use olmv2_e2e::registry::Registry;
use olmv2_e2e::walkthrough::{self, Rollouts};
use serde_json::json;
use tokio::sync::OnceCell;

static PLANE: OnceCell<RealControlPlane> = OnceCell::const_new();

/// The file's control plane. Being in a `static`, it is never dropped: its reaper stops it when the test process
/// exits, and removes its directory unless a test panicked while holding [`RealControlPlane::keep_logs_on_panic`].
async fn plane() -> &'static RealControlPlane {
    PLANE
        .get_or_init(|| async {
            let plane = RealControlPlane::start("tests").await.expect("the real control plane starts");
            eprintln!(
                "real control plane (Kubernetes {}, etcd {}) ready at {} in {:.1?}",
                plane.binaries.kubernetes_version, plane.binaries.etcd_version, plane.url, plane.start_time
            );
            plane
        })
        .await
}

/// Runs kubectl with `kubeconfig`, its discovery cache in the control plane's directory; stdout, or the failure.
fn kubectl(plane: &RealControlPlane, kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--cache-dir={}", plane.dir().join("kubectl-cache").display()))
        .args(args)
        .output()
        .map_err(|error| format!("kubectl does not run: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!("kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr)))
    }
}

/// Polls `check` every 100 ms until it answers `Some`, for at most `timeout`; the answer and how long it took.
async fn eventually<T, F, Fut>(timeout: Duration, mut check: F) -> Option<(T, Duration)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(answer) = check().await {
            return Some((answer, started.elapsed()));
        }
        if started.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn kubectl_lists_namespaces_and_api_resources() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let admin = plane.admin_kubeconfig();
    let namespaces = kubectl(plane, &admin, &["get", "ns", "-o", "name"]).expect("get ns");
    for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(namespaces.contains(&format!("namespace/{namespace}\n")), "{namespace} missing: {namespaces}");
    }
    let resources = kubectl(plane, &admin, &["api-resources", "-o", "name"]).expect("api-resources");
    for resource in ["pods", "deployments.apps", "customresourcedefinitions.apiextensions.k8s.io"] {
        assert!(resources.lines().any(|line| line == resource), "{resource} missing: {resources}");
    }
    eprintln!("kubectl api-resources: {} resources", resources.lines().count());
}

#[tokio::test]
async fn the_projects_crds_are_established_and_served() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let crds: Api<CustomResourceDefinition> = Api::all(plane.client().await.expect("admin client"));
    let generated = olmv2::crdgen::all_crds();
    for crd in &generated {
        let name = crd.metadata.name.clone().expect("named");
        crds.patch(&name, &PatchParams::apply("olmv2-e2e").force(), &Patch::Apply(crd)).await.expect("applied");
    }
    for crd in &generated {
        let name = crd.metadata.name.clone().expect("named");
        let established = eventually(Duration::from_secs(30), || async {
            let crd = crds.get(&name).await.ok()?;
            let conditions = crd.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        })
        .await;
        assert!(established.is_some(), "{name} is not Established");
    }
    // Discovery may lag the Established condition: kubectl is given a few seconds to see the new resources.
    let admin = plane.admin_kubeconfig();
    let served = eventually(Duration::from_secs(15), || async {
        kubectl(plane, &admin, &["get", "installs,operators,csv", "-A"]).ok()
    })
    .await;
    let (_, took) = served.expect("kubectl get installs,operators,csv -A succeeds");
    eprintln!("{} CRDs applied; kubectl served them {took:.1?} after they were Established", generated.len());
}

#[tokio::test]
async fn the_controller_manager_fills_namespaces_and_aggregates_roles() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let client = plane.client().await.expect("admin client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "controller-manager-check"}})).unwrap();
    let created = Instant::now();
    namespaces.create(&PostParams::default(), &namespace).await.expect("namespace created");

    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "controller-manager-check");
    let account = eventually(Duration::from_secs(30), || async { accounts.get_opt("default").await.ok()? }).await;
    assert!(account.is_some(), "no default ServiceAccount; see {}", plane.log("kube-controller-manager").display());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "controller-manager-check");
    let root_ca = eventually(Duration::from_secs(30), || async { config_maps.get_opt("kube-root-ca.crt").await.ok()? })
        .await
        .expect("kube-root-ca.crt published");
    let ca = std::fs::read_to_string(plane.dir().join("ca.crt")).unwrap();
    assert_eq!(root_ca.0.data.unwrap_or_default().get("ca.crt"), Some(&ca), "the cluster CA is published");
    eprintln!("default ServiceAccount and kube-root-ca.crt within {:.1?}", created.elapsed());

    let roles: Api<ClusterRole> = Api::all(client);
    let aggregated: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "olmv2-e2e-widgets-view",
                     "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["widgets.olmv2.example"], "resources": ["widgets"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    roles.create(&PostParams::default(), &aggregated).await.expect("ClusterRole created");
    let view = eventually(Duration::from_secs(30), || async {
        let view = roles.get("view").await.ok()?;
        view.rules?.iter().any(|rule| rule.resources.as_deref() == Some(&["widgets".to_owned()][..])).then_some(())
    })
    .await;
    let (_, took) = view.expect("the aggregate-to-view rules are aggregated into view");
    eprintln!("aggregated into view in {took:.1?}");
}

#[tokio::test]
async fn a_refused_user_is_in_the_audit_log() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let mallory = plane.user_client("mallory").await.expect("mallory's client");
    let secrets: Api<Secret> = Api::namespaced(mallory, "kube-system");
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("mallory listed secrets: {other:?}"),
    }
    let kubeconfig = plane.user_kubeconfig("mallory").expect("mallory's kubeconfig");
    let refused = kubectl(plane, &kubeconfig, &["get", "secrets", "-n", "kube-system"]).expect_err("refused");
    assert!(refused.contains("Forbidden") && refused.contains(r#"User "mallory""#), "{refused}");
    assert!(plane.user_kubeconfig("nobody").is_err(), "users are fixed at start");

    let recorded = eventually(Duration::from_secs(10), || async {
        let records = plane.audit_records().expect("audit log readable");
        let refusals: Vec<_> = records
            .into_iter()
            .filter(|r| r.user == "mallory" && r.verb == "list" && r.resource.as_deref() == Some("secrets"))
            .collect();
        (refusals.len() >= 2).then_some(refusals)
    })
    .await;
    let (refusals, _) = recorded.expect("both refusals audited");
    for refusal in refusals {
        assert_eq!(refusal.code, Some(403));
        assert_eq!(refusal.namespace.as_deref(), Some("kube-system"));
        assert_eq!(refusal.impersonated_user, None);
    }
}

#[tokio::test]
async fn a_dropped_control_plane_stops_its_processes_and_removes_its_directory() {
    let plane = RealControlPlane::start_with_users("dropped", &["zed"]).await.expect("a second control plane starts");
    eprintln!("second control plane ready in {:.1?}", plane.start_time);
    let dir = plane.dir().to_owned();
    let processes = plane.processes();
    let names: Vec<&str> = processes.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, ["etcd", "kube-apiserver", "kube-controller-manager"]);
    let zed = plane.user_client("zed").await.expect("zed's client");
    let review = kube::Api::<Namespace>::all(zed).list(&ListParams::default()).await.expect_err("zed is refused");
    assert!(matches!(review, kube::Error::Api(ref status) if status.code == 403), "{review:?}");
    assert!(plane.user_kubeconfig("alice").is_err(), "only the users given at start");

    let stopping = Instant::now();
    drop(plane);
    eprintln!("stopped in {:.1?}", stopping.elapsed());
    assert!(!dir.exists(), "{} is removed", dir.display());
    for (name, pid) in processes {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "{name} ({pid}) still runs");
    }
}

/// The walkthrough of `olmv2-control-plane --kubernetes real`: the controller's ServiceAccount and token, `deploy/`'s
/// Services as ExternalName Services of the controller's loopback ports, and a stand-in kubelet. What kube-apiserver
/// did is checked afterwards: the mutating webhook recorded the creator, the aggregation layer serves the Installed
/// API, the real Deployment controller made the Deployments Available, and the approval webhook refuses a user
/// lacking the pending rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_walkthrough_installs_plumbus_and_the_grumbo_operator_on_real_kubernetes() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let admin = plane.client().await.expect("admin client");
    let registry = Registry::start("walkthrough-real").expect("docker-registry starts");
    let started = Instant::now();
    real::install_crds(&admin).await.expect("the project's CRDs are established");
    let ports = ServicePorts::free().expect("free ports");
    let config = real::controller_config(plane, &admin, &ports).await.expect("deploy/ applied, a token issued");
    let mut options = olmv2_e2e::project::controller_options(
        vec![registry.host.clone()],
        plane.dir().join("bundle-cache"),
        Duration::from_secs(30),
    );
    options.webhook.address = ([127, 0, 0, 1], ports.webhook).into();
    options.webhook.service_port = i32::from(ports.webhook);
    options.api.address = ([127, 0, 0, 1], ports.api).into();
    options.api.service_port = i32::from(ports.api);
    let health = std::sync::Arc::new(olmv2::server::Health::default());
    let controllers = olmv2::process::start(config, options, health).await.expect("the controllers start");
    let kubelet = real::spawn_kubelet(admin.clone(), "operators");
    let set_up = started.elapsed();
    let bundles = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundles");
    let registry = walkthrough::run(admin.clone(), &bundles, registry, Rollouts::ByTheCluster, None)
        .await
        .expect("the walkthrough runs to its end");
    eprintln!("set up in {set_up:.1?}; walkthrough done {:.1?} after the start", started.elapsed());

    let installs: Api<Install> = Api::all(admin.clone());
    let plumbus = installs.get("plumbus").await.unwrap();
    assert_eq!(plumbus.status.as_ref().and_then(|s| s.state), Some(InstallState::Installed));
    let creator = plumbus.metadata.annotations.unwrap_or_default();
    let creator = creator.get(olmv2::api::v2alpha1::CREATOR_ANNOTATION).expect("the mutating webhook ran");
    assert!(creator.contains(r#""username":"admin""#), "{creator}");
    let grumbo = Api::<Operator>::all(admin.clone()).get("grumbo").await.unwrap();
    let status = grumbo.status.unwrap();
    assert_eq!(status.state, Some(OperatorState::Installed));
    let kinds: Vec<String> = status.components.unwrap().refs.into_iter().map(|r| r.kind).collect();
    for kind in ["Install", "ClusterServiceVersion", "Deployment", "CustomResourceDefinition"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} among {kinds:?}");
    }
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(admin.clone(), "operators");
    for name in ["plumbus-operator", "grumbo-operator"] {
        let deployment = deployments.get(name).await.unwrap();
        assert_eq!(deployment.status.and_then(|s| s.available_replicas), Some(1), "{name} is available");
    }
    let replica_sets: Api<k8s_openapi::api::apps::v1::ReplicaSet> = Api::namespaced(admin.clone(), "operators");
    let owners: Vec<String> = replica_sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .flat_map(|rs| rs.metadata.owner_references.unwrap_or_default())
        .map(|owner| owner.name)
        .collect();
    assert!(owners.iter().any(|o| o == "grumbo-operator"), "the Deployment controller made ReplicaSets: {owners:?}");
    let installed = kubectl(plane, &plane.admin_kubeconfig(), &["get", "installed"]).expect("the Installed API");
    assert!(installed.contains("grumbo.v1.0.0") && installed.contains("plumbus.v2.0.0-alpha"), "{installed}");

    // An Install of its own, pending; mallory may patch Installs but holds none of the pending rules.
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "refused"}})).unwrap();
    namespaces.create(&PostParams::default(), &namespace).await.expect("namespace refused");
    let image = registry.reference("grumbo-bundle:v1.0.0");
    let body = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "refused"},
        "spec": {"namespaces": [{"from": "default", "to": "refused"}],
                 "content": [{"type": "ManifestImage", "manifestImage": image}]}});
    installs.patch("refused", &PatchParams::apply("olmv2-e2e"), &Patch::Apply(&body)).await.expect("Install created");
    let pending = eventually(Duration::from_secs(60), || async {
        let install = installs.get("refused").await.ok()?;
        let status = install.status?;
        (status.state == Some(InstallState::PendingApproval)).then_some(())
    })
    .await;
    assert!(pending.is_some(), "Install refused is pending: {:?}", installs.get("refused").await.unwrap().status);
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "olmv2-e2e-install-patcher"},
        "rules": [{"apiGroups": ["operators.coreos.com"], "resources": ["installs"], "verbs": ["get", "patch"]}]}))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.expect("ClusterRole created");
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let binding = serde_json::from_value(json!({"metadata": {"name": "olmv2-e2e-install-patcher"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "olmv2-e2e-install-patcher"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "mallory"}]}))
    .unwrap();
    bindings.create(&PostParams::default(), &binding).await.expect("ClusterRoleBinding created");
    let mallory: Api<Install> = Api::all(plane.user_client("mallory").await.expect("mallory's client"));
    let approve = json!({"spec": {"approval": "Approved"}});
    // RBAC may take a moment to let mallory patch at all; the webhook's refusal is what is waited for.
    let refused = eventually(Duration::from_secs(10), || async {
        match mallory.patch("refused", &PatchParams::default(), &Patch::Merge(&approve)).await {
            Err(kube::Error::Api(status)) if status.message.contains("may not approve Install refused") => Some(status),
            Err(_) => None,
            Ok(_) => panic!("mallory approved Install refused"),
        }
    })
    .await;
    let (status, _) = refused.expect("the approval webhook refuses mallory");
    assert!(status.message.contains(r#"user "mallory""#), "{status:?}");
    let refused = installs.get("refused").await.unwrap();
    assert_ne!(format!("{:?}", refused.spec.approval), "Approved", "the approval was not stored");

    kubelet.abort();
    controllers.stop().await;
    drop(registry);
}

// The gate's attacks (`e2e/tests/project/attacks/gate.rs`) on real Kubernetes: the same users, objects and checks,
// the attacker holding the real kubectl, each on a control plane of its own (an InstallPolicy is cluster-wide, so two
// attacks on one cluster would see each other's ceilings), one at a time (each runs a kube-apiserver).

/// One gate attack at a time.
static GATE_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A control plane of its own with the controller running on it as in the walkthrough (as `deploy/`'s ServiceAccount,
/// its webhooks reached through ExternalName Services), re-reading every 2 s as the emulator's attacks do, and the
/// namespace `operators`.
/// Its fields drop in order: the controller, then the control plane, then the turn.
struct Gate {
    controllers: Option<olmv2::process::Controllers>,
    plane: RealControlPlane,
    admin: kube::Client,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

/// A failed attack keeps its control plane's logs and audit log.
impl Drop for Gate {
    fn drop(&mut self) {
        let _keep = self.plane.keep_logs_on_panic();
    }
}

impl Gate {
    async fn start(name: &str) -> Self {
        let turn = GATE_TURN.lock().await;
        let started = Instant::now();
        let plane = RealControlPlane::start(name).await.expect("a control plane for the attack starts");
        let admin = plane.client().await.expect("admin client");
        real::install_crds(&admin).await.expect("the project's CRDs are established");
        let ports = ServicePorts::free().expect("free ports");
        let config = real::controller_config(&plane, &admin, &ports).await.expect("deploy/ applied, a token issued");
        let mut options = olmv2_e2e::project::controller_options(
            Vec::new(),
            plane.dir().join("bundle-cache"),
            Duration::from_secs(2),
        );
        options.webhook.address = ([127, 0, 0, 1], ports.webhook).into();
        options.webhook.service_port = i32::from(ports.webhook);
        options.api.address = ([127, 0, 0, 1], ports.api).into();
        options.api.service_port = i32::from(ports.api);
        let health = std::sync::Arc::new(olmv2::server::Health::default());
        let controllers = olmv2::process::start(config, options, health).await.expect("the controllers start");
        let gate = Self { plane, admin, controllers: Some(controllers), _turn: turn };
        gate.create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "operators"}}));
        // Discovery may lag the Established condition: kubectl must know the project's kinds before the attack.
        let admin = gate.plane.admin_kubeconfig();
        let known = eventually(Duration::from_secs(15), || async {
            kubectl(&gate.plane, &admin, &["get", "installs,installpolicies,operatorgroups,subscriptions", "-A"]).ok()
        })
        .await;
        assert!(known.is_some(), "kubectl knows the project's kinds");
        eprintln!("{name}: control plane and controller ready in {:.1?}", started.elapsed());
        gate
    }

    /// Stops the controller cleanly; the control plane stops when the gate is dropped.
    async fn stop(mut self) {
        if let Some(controllers) = self.controllers.take() {
            controllers.stop().await;
        }
    }

    fn admin_kubeconfig(&self) -> std::path::PathBuf {
        self.plane.admin_kubeconfig()
    }

    /// kubectl as the holder of `kubeconfig`, `input` on its stdin; stdout, or the failure.
    fn kubectl(&self, kubeconfig: &Path, args: &[&str], input: Option<&str>) -> Result<String, String> {
        use std::io::Write as _;
        let mut child = Command::new("kubectl")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--cache-dir={}", self.plane.dir().join("kubectl-cache").display()))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|error| format!("kubectl does not run: {error}"))?;
        let mut stdin = child.stdin.take().expect("kubectl's stdin");
        stdin.write_all(input.unwrap_or_default().as_bytes()).map_err(|error| format!("kubectl's stdin: {error}"))?;
        drop(stdin);
        let output = child.wait_with_output().map_err(|error| format!("kubectl does not end: {error}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!("kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr)))
        }
    }

    fn admin_kubectl(&self, args: &[&str], input: Option<&str>) -> Result<String, String> {
        self.kubectl(&self.admin_kubeconfig(), args, input)
    }

    /// `kubectl apply` of `manifest` as the holder of `kubeconfig`, which must succeed.
    fn apply(&self, kubeconfig: &Path, manifest: &str) {
        if let Err(refused) = self.kubectl(kubeconfig, &["apply", "-f", "-"], Some(manifest)) {
            panic!("{refused}");
        }
    }

    /// The administrator creates `object`.
    fn create(&self, object: &serde_json::Value) {
        if let Err(refused) = self.admin_kubectl(&["create", "-f", "-"], Some(&object.to_string())) {
            panic!("{refused}");
        }
    }

    fn installs(&self) -> Api<Install> {
        Api::all(self.admin.clone())
    }

    /// The Install `name` once `done` holds of it (60 s at most).
    async fn wait(&self, name: &str, what: &str, done: impl Fn(&Install) -> bool) -> Install {
        let installs = self.installs();
        let reached =
            eventually(Duration::from_secs(60), || async { installs.get(name).await.ok().filter(|i| done(i)) }).await;
        match reached {
            Some((install, _)) => install,
            None => panic!("Install {name} is not {what}: {:?}", installs.get(name).await.map(|i| i.status)),
        }
    }

    async fn wait_state(&self, name: &str, state: InstallState) -> Install {
        self.wait(name, &format!("{state:?}"), |i| i.status.as_ref().and_then(|s| s.state) == Some(state)).await
    }

    /// kube-apiserver's audit log: the successful writes (create, update, patch) of `resource`/`name`, by anyone.
    fn writes(&self, resource: &str, name: &str) -> Vec<olmv2_e2e::kubernetes::AuditRecord> {
        let records = self.plane.audit_records().expect("audit log readable");
        records
            .into_iter()
            .filter(|r| r.resource.as_deref() == Some(resource) && r.name.as_deref() == Some(name))
            .filter(|r| r.code.is_some_and(|code| code < 300))
            .filter(|r| matches!(r.verb.as_str(), "create" | "update" | "patch"))
            .collect()
    }

    /// No successful write of `resource`/`name` happened, by anyone.
    fn never_written(&self, resource: &str, name: &str) {
        let writes = self.writes(resource, name);
        assert!(writes.is_empty(), "{resource}/{name} was written: {writes:?}");
    }

    /// No ClusterRoleBinding binds `user` to cluster-admin: they did not become it.
    async fn not_bound(&self, user: &str) {
        let bindings: Api<ClusterRoleBinding> = Api::all(self.admin.clone());
        for binding in bindings.list(&ListParams::default()).await.unwrap() {
            let subjects = binding.subjects.unwrap_or_default();
            let admin = binding.role_ref.name == "cluster-admin" && subjects.iter().any(|s| s.name == user);
            assert!(!admin, "{user} was made cluster-admin by {:?}", binding.metadata.name);
        }
    }

    /// Gives `user` the verbs on a resource of `operators.coreos.com` cluster-wide; answers their kubeconfig.
    fn may(&self, user: &str, resource: &str, verbs: &[&str]) -> std::path::PathBuf {
        let role = format!("{resource}-{}", verbs.join("-"));
        self.create(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": [{"apiGroups": ["operators.coreos.com"], "resources": [resource], "verbs": verbs}]}));
        self.create(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{role}-{user}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]}));
        self.plane.user_kubeconfig(user).expect("a test user of the control plane")
    }

    /// A user who may create, read and update Installs, and nothing else: the attacker.
    fn install_author(&self, user: &str) -> std::path::PathBuf {
        self.may(user, "installs", &["create", "get", "list", "watch", "update", "patch"])
    }

    /// A Role in `namespace` with `rules`, bound to `user`.
    fn role_for(&self, user: &str, namespace: &str, rules: serde_json::Value) {
        self.create(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": format!("{user}-role"), "namespace": namespace}, "rules": rules}));
        self.create(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("{user}-role"), "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{user}-role")},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]}));
    }

    /// The admin applies a ConfigMap `name` through an Install of that name, approves it, and waits until it is
    /// installed.
    async fn installed_by_admin(&self, name: &str, value: &str) -> Install {
        self.apply(&self.admin_kubeconfig(), &raw_install(name, &config_map(name, value), "operators"));
        self.wait_state(name, InstallState::PendingApproval).await;
        let approved = self.admin_kubectl(&["patch", "install", name, "--type", "merge", "-p", APPROVE], None);
        approved.expect("the admin approves");
        self.wait_state(name, InstallState::Installed).await
    }

    /// The controller still works: a fresh Install waits for approval, is approved by the admin and installed.
    async fn controller_healthy(&self, name: &str) {
        self.installed_by_admin(name, "ok").await;
        let accounts = Api::<ServiceAccount>::namespaced(self.admin.clone(), "olmv2-system");
        let controller = accounts.get("olmv2-controller").await.expect("the controller's own account is still there");
        assert!(controller.metadata.owner_references.unwrap_or_default().is_empty(), "nobody owns the controller");
    }
}

const APPROVE: &str = r#"{"spec":{"approval":"Approved"}}"#;

/// Raw content binding `user` to cluster-admin: what an attacker wants applied.
fn escalation(user: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {user}-is-admin\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: User\n  name: {user}\n"
    )
}

fn raw_install(name: &str, raw: &str, to: &str) -> String {
    let indented: String = raw.lines().map(|line| format!("      {line}\n")).collect();
    format!(
        "apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata:\n  name: {name}\nspec:\n  namespaces:\n  - from: default\n    to: {to}\n  content:\n  - type: Raw\n    raw: |\n{indented}"
    )
}

fn config_map(name: &str, value: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: \"{value}\"\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_groups_account_lends_nothing_when_whoever_named_it_could_not_run_as_it() {
    use olmv2::api::v1::ACCOUNT_NAMED_BY_ANNOTATION;
    let gate = Gate::start("attack-og-named").await;
    let started = Instant::now();
    // An admin's account, made for something else, bound to cluster-admin.
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "backup", "namespace": "lab"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "backup-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "backup", "namespace": "lab"}]}),
    ] {
        gate.create(&object);
    }
    // The audit log names what is created: the admin's binding is there, so an absence below means something.
    assert_eq!(gate.writes("clusterrolebindings", "backup-admin").len(), 1, "the audit log records creations");
    // Mallory may write OperatorGroups and create Subscriptions in `lab` (OLM v0's proxy for using its group's
    // account) and create Installs; not create pods, not impersonate.
    let mallory = gate.install_author("mallory");
    gate.role_for(
        "mallory",
        "lab",
        json!([{"apiGroups": ["operators.coreos.com"], "resources": ["operatorgroups", "subscriptions"],
                "verbs": ["create", "get", "list", "update", "patch"]}]),
    );
    // The group she writes names the admin's account, and claims the admin named it.
    let claimed = json!({"username": "admin", "groups": ["system:masters"]}).to_string();
    let group = format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: lab\n  namespace: lab\n  annotations:\n    {ACCOUNT_NAMED_BY_ANNOTATION}: '{claimed}'\nspec:\n  serviceAccountName: backup\n  targetNamespaces: [lab]\n"
    );
    // RBAC may take a moment to let mallory write at all.
    let applied = eventually(Duration::from_secs(10), || async {
        gate.kubectl(&mallory, &["apply", "-f", "-"], Some(&group)).ok()
    })
    .await;
    assert!(applied.is_some(), "{:?}", gate.kubectl(&mallory, &["apply", "-f", "-"], Some(&group)));
    let written = gate.admin_kubectl(&["get", "operatorgroup", "lab", "-n", "lab", "-o", "json"], None).unwrap();
    let written: serde_json::Value = serde_json::from_str(&written).expect("json");
    let namer = written["metadata"]["annotations"][ACCOUNT_NAMED_BY_ANNOTATION].as_str().unwrap_or_default();
    assert!(namer.contains("\"username\":\"mallory\""), "the webhook records who named it: {namer}");

    gate.apply(&mallory, &raw_install("grab", &escalation("mallory"), "lab"));
    let pending = gate.wait_state("grab", InstallState::PendingApproval).await;
    let status = pending.status.unwrap();
    let account = status.service_account_ref.unwrap();
    assert_eq!((account.namespace.as_str(), account.name.as_str()), ("lab", "backup"));
    assert!(status.pending.unwrap().count > 0, "backup's cluster-admin is not lent for mallory's naming it");
    // A later write keeping the account keeps the record, whatever it claims.
    let relabel = json!({"metadata": {"annotations": {ACCOUNT_NAMED_BY_ANNOTATION: claimed}, "labels": {"x": "y"}}});
    let patched = gate.kubectl(
        &mallory,
        &["patch", "operatorgroup", "lab", "-n", "lab", "--type", "merge", "-p", &relabel.to_string()],
        None,
    );
    patched.expect("mallory relabels her group");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = gate.installs().get("grab").await.unwrap();
    assert_eq!(still.status.and_then(|s| s.state), Some(InstallState::PendingApproval));
    gate.never_written("clusterrolebindings", "mallory-is-admin");
    gate.not_bound("mallory").await;
    gate.installs().delete("grab", &DeleteParams::default()).await.unwrap();

    // Named by someone who may run as the account (the admin), it lends its rights as before: an Install of a
    // subscriber of `lab` applies with nothing pending.
    gate.admin_kubectl(&["delete", "operatorgroup", "lab", "-n", "lab"], None).expect("the admin deletes the group");
    gate.apply(&gate.admin_kubeconfig(), &group);
    gate.apply(&mallory, &raw_install("settings", &config_map("settings", "1"), "lab"));
    let installed = gate.wait_state("settings", InstallState::Installed).await;
    assert_eq!(installed.status.unwrap().pending.map(|p| p.count), Some(0));
    gate.controller_healthy("after-og-named").await;
    eprintln!("attack done in {:.1?}", started.elapsed());
    gate.stop().await;
}

/// A CRD named after the built-in ClusterRole API, and a ClusterRole granting `escalate` and `bind` on it.
const BUILTIN_CRD_AND_ESCALATE: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterroles.rbac.authorization.k8s.io
spec:
  group: rbac.authorization.k8s.io
  scope: Cluster
  names: {kind: ClusterRole, plural: clusterroles, singular: clusterrole, listKind: ClusterRoleList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: role-escalator
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  verbs: [escalate, bind, create, update]
";

/// A ceiling for operators that bring ConfigMaps, CRDs and ClusterRoles, but never `escalate` or `bind`.
const CONFIG_MAP_CEILING: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: narrow-ceiling
rules:
- apiGroups: [\"\"]
  resources: [configmaps]
  verbs: [\"*\"]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [\"*\"]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: operators.coreos.com/v2alpha1
kind: InstallPolicy
metadata:
  name: narrow
spec:
  ceiling:
    clusterRoles: [narrow-ceiling]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crd_named_after_a_built_in_resource_is_refused_and_never_widens_a_ceiling() {
    let gate = Gate::start("attack-builtin-crd").await;
    let started = Instant::now();
    gate.apply(&gate.admin_kubeconfig(), CONFIG_MAP_CEILING);
    let mallory = gate.install_author("mallory");
    let install = raw_install("escalator", BUILTIN_CRD_AND_ESCALATE, "operators");
    // RBAC may take a moment to let mallory write at all.
    let applied = eventually(Duration::from_secs(10), || async {
        gate.kubectl(&mallory, &["apply", "-f", "-"], Some(&install)).ok()
    })
    .await;
    assert!(applied.is_some(), "{:?}", gate.kubectl(&mallory, &["apply", "-f", "-"], Some(&install)));
    let refused = gate
        .wait("escalator", "refused as naming a served API", |install| {
            install.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.reason == "CrdNamesServedApi"))
        })
        .await;
    let status = refused.status.unwrap();
    let message = status.conditions.iter().find(|c| c.reason == "CrdNamesServedApi").unwrap().message.clone();
    assert!(message.contains("clusterroles.rbac.authorization.k8s.io"), "{message}");
    assert!(status.granted.is_empty(), "nothing granted: {:?}", status.granted);
    // Even approved by someone holding everything, nothing is granted or applied.
    let _ = gate.admin_kubectl(&["patch", "install", "escalator", "--type", "merge", "-p", APPROVE], None);
    tokio::time::sleep(Duration::from_secs(3)).await;
    gate.never_written("customresourcedefinitions", "clusterroles.rbac.authorization.k8s.io");
    gate.never_written("clusterroles", "role-escalator");
    assert_eq!(gate.writes("clusterroles", "narrow-ceiling").len(), 1, "the audit log records the admin's ceiling");

    // Created by hand, such a CRD does not replace the built-in API: ClusterRoles are still served as before.
    // kube-apiserver refuses it as it is (a group of `k8s.io` needs the API-approval annotation; the emulator took
    // it), so the admin creates it with the annotation saying it is unapproved, which kube-apiserver accepts.
    let first_crd = BUILTIN_CRD_AND_ESCALATE.split("---").next().unwrap();
    let refused = gate.admin_kubectl(&["apply", "-f", "-"], Some(first_crd)).expect_err("refused as it is");
    assert!(refused.contains("protected groups must have approval annotation"), "{refused}");
    let unapproved = first_crd.replace(
        "  name: clusterroles.rbac.authorization.k8s.io\n",
        "  name: clusterroles.rbac.authorization.k8s.io\n  annotations:\n    api-approved.kubernetes.io: \"unapproved, an attack\"\n",
    );
    assert_ne!(unapproved, first_crd, "annotated");
    gate.admin_kubectl(&["apply", "-f", "-"], Some(&unapproved)).expect("the admin creates the CRD");
    let crds: Api<CustomResourceDefinition> = Api::all(gate.admin.clone());
    let conditions = || async {
        let crd = crds.get("clusterroles.rbac.authorization.k8s.io").await.expect("the CRD");
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions
            .iter()
            .map(|c| format!("{}={} ({})", c.type_, c.status, c.reason.clone().unwrap_or_default()))
            .collect::<Vec<String>>()
    };
    // Established once the names are accepted; given 15 s, whatever the conditions then are is what is checked.
    let established = eventually(Duration::from_secs(15), || async {
        let conditions = conditions().await;
        conditions.iter().any(|c| c.starts_with("Established=True")).then_some(())
    })
    .await;
    if let Some((_, took)) = established {
        eprintln!("the CRD was Established in {took:.1?}");
    }
    let conditions = conditions().await;
    eprintln!("kube-apiserver's conditions of the CRD: {conditions:?}");
    // kube-apiserver takes the CRD as any other (no name conflict is seen with a built-in resource): it is live, and
    // still the built-in API answers, its handler being ahead of the extensions server it delegates to.
    for condition in ["NamesAccepted=True", "Established=True"] {
        assert!(conditions.iter().any(|c| c.starts_with(condition)), "{condition} among {conditions:?}");
    }
    let discovered =
        gate.admin_kubectl(&["api-resources", "--api-group=rbac.authorization.k8s.io", "-o", "name"], None);
    eprintln!("discovery of rbac.authorization.k8s.io with the CRD: {discovered:?}");
    let discovered = discovered.unwrap();
    assert_eq!(discovered.lines().filter(|r| r.starts_with("clusterroles.")).count(), 1, "{discovered}");
    let listed = gate.admin_kubectl(&["get", "clusterroles", "-o", "name"], None).unwrap();
    assert!(listed.lines().count() > 50, "the built-in ClusterRoles are listed: {listed}");
    let roles = Api::<ClusterRole>::all(gate.admin.clone()).get("cluster-admin").await.unwrap();
    assert!(roles.rules.unwrap_or_default().iter().any(|r| r.verbs.contains(&"*".to_owned())));
    let listed = gate.admin_kubectl(&["get", "clusterrole", "cluster-admin", "-o", "name"], None);
    assert_eq!(listed.as_deref(), Ok("clusterrole.rbac.authorization.k8s.io/cluster-admin\n"));
    let shown = gate.admin_kubectl(&["get", "clusterrole", "cluster-admin", "-o", "yaml"], None).unwrap();
    assert!(shown.contains("rules:") && shown.contains("'*'"), "kubectl shows the built-in role's rules: {shown}");
    gate.controller_healthy("after-builtin-crd").await;
    eprintln!("attack done in {:.1?}", started.elapsed());
    gate.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_clusterrole_an_install_applied_never_widens_an_aggregated_ceiling() {
    let gate = Gate::start("attack-widen").await;
    let started = Instant::now();
    // Approved before any policy existed: content bringing a ClusterRole labelled as the ceiling will select.
    let widening = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reads-secrets\n  labels:\n    ceiling.example.com/operators: \"true\"\nrules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get, list, watch]\n";
    gate.apply(&gate.admin_kubeconfig(), &raw_install("widen", widening, "operators"));
    gate.wait_state("widen", InstallState::PendingApproval).await;
    gate.admin_kubectl(&["patch", "install", "widen", "--type", "merge", "-p", APPROVE], None).expect("approved");
    gate.wait_state("widen", InstallState::Installed).await;
    // The admin's ceiling: an aggregated role gathering what admins label, and ConfigMaps.
    let ceiling = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: aggregated-ceiling\naggregationRule:\n  clusterRoleSelectors:\n  - matchLabels:\n      ceiling.example.com/operators: \"true\"\nrules: []\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: config-maps\n  labels:\n    ceiling.example.com/operators: \"true\"\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [\"*\"]\n- apiGroups: [rbac.authorization.k8s.io]\n  resources: [roles]\n  verbs: [\"*\"]\n---\napiVersion: operators.coreos.com/v2alpha1\nkind: InstallPolicy\nmetadata:\n  name: aggregated\nspec:\n  ceiling:\n    clusterRoles: [aggregated-ceiling]\n";
    gate.apply(&gate.admin_kubeconfig(), ceiling);
    // kube-controller-manager's aggregation controller has copied the Install's role's rules into the ceiling role.
    let roles: Api<ClusterRole> = Api::all(gate.admin.clone());
    let aggregated = eventually(Duration::from_secs(30), || async {
        let role = roles.get("aggregated-ceiling").await.ok()?;
        role.rules.iter().flatten().any(|rule| rule.resources.iter().flatten().any(|r| r == "secrets")).then_some(())
    })
    .await;
    let (_, took) = aggregated.expect("the controller-manager aggregates reads-secrets into aggregated-ceiling");
    eprintln!("aggregated by kube-controller-manager in {took:.1?}");
    // Content reading Secrets is over the ceiling: the Install's role does not count in it.
    let reader = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: secret-reader\nrules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]\n";
    gate.apply(&gate.admin_kubeconfig(), &raw_install("reader", reader, "operators"));
    let exceeds = gate.wait_state("reader", InstallState::ExceedsPolicy).await;
    let violations = serde_json::to_string(&exceeds.status.unwrap().policy).unwrap();
    assert!(violations.contains("secrets"), "{violations}");
    assert!(!violations.contains("\"roles\""), "applying the Role fits the admin's part: {violations}");
    gate.never_written("roles", "secret-reader");
    assert!(!gate.writes("clusterroles", "reads-secrets").is_empty(), "the audit log records what the Install applied");
    // Content within the admin's own part of the ceiling still passes it.
    gate.apply(&gate.admin_kubeconfig(), &raw_install("fits", &config_map("fits", "1"), "operators"));
    gate.wait_state("fits", InstallState::PendingApproval).await;
    gate.controller_healthy("after-widen").await;
    eprintln!("attack done in {:.1?}", started.elapsed());
    gate.stop().await;
}
