//! The Operator controller at scale: 200 Operators with 10 components each (6 ConfigMaps, 2 Secrets, 2 Deployments)
//! on the test control plane, the controller running as its own process (`olmv2 run`, production build) with
//! `deploy/`'s identity. Prints the time from a component change to the Operator status showing it (median, p99),
//! the API requests the controller made per reconcile (from the control plane's audit record and the controller's
//! own reconcile counter), and the controller's peak RSS. Run with `cargo bench -p olmv2-e2e --bench operators`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

#[path = "support/scale.rs"]
mod scale;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube_emulator::ControlPlane;
use olmv2::api::v2alpha1::Operator;
use olmv2_e2e::project;
use serde_json::{json, Value};

const OPERATORS: usize = 200;
const CHANGES: usize = 200;
const CONTROLLER_USER: &str = "system:serviceaccount:olmv2-system:olmv2-controller";

fn free_address() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn components(operator: &str) -> Vec<Value> {
    let labels = json!({ format!("v2alpha1.operators.coreos.com/{operator}"): "" });
    let mut objects = Vec::new();
    for index in 0..6 {
        objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{operator}-config-{index}"), "namespace": "operators", "labels": labels},
            "data": {"generation": "0"}}));
    }
    for index in 0..2 {
        objects.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{operator}-secret-{index}"), "namespace": "operators", "labels": labels},
            "stringData": {"token": "t"}}));
        let app = format!("{operator}-{index}");
        objects.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": format!("{operator}-deployment-{index}"), "namespace": "operators", "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": app}}, "template": {"metadata": {"labels": {"app": app}},
                     "spec": {"containers": [{"name": "c", "image": "example:1"}]}}}}));
    }
    objects
}

/// A plain HTTP GET of the controller's health endpoint: (status line, body).
fn http_get(address: SocketAddr, path: &str) -> Option<(String, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_owned(), body.to_owned()))
}

fn reconciles(health: SocketAddr) -> f64 {
    let Some((_, text)) = http_get(health, "/metrics") else { return f64::NAN };
    text.lines()
        .find(|line| line.starts_with("olmv2_reconciles_total{controller=\"operator\"}"))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
        .unwrap_or(f64::NAN)
}

fn controller_requests(plane: &ControlPlane) -> usize {
    plane.api.audit.records().iter().filter(|record| record.acting_user() == CONTROLLER_USER).count()
}

fn peak_rss_kib(child: &Child) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The binary cargo built, wherever the target directory is.
    let binary = project::build_controller(env!("CARGO")).expect("the olmv2 binary");

    let plane = scale::plane_with_operators_namespace().await;
    let dir = std::env::temp_dir().join(format!("olmv2-operators-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("controller.kubeconfig");
    std::fs::write(&kubeconfig, project::controller_kubeconfig(&plane).await.expect("identity")).unwrap();
    let (health, webhook) = (free_address(), free_address());
    plane.api.endpoints.set("olmv2-system", "olmv2-webhook", webhook);
    let mut child = Command::new(binary)
        .args(["run", "--enable-v2alpha1", "--health-address", &health.to_string()])
        .args(["--webhook-address", &webhook.to_string()])
        .args(["--cache", &dir.join("cache").display().to_string()])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("olmv2 run starts");
    let ready = async {
        loop {
            if http_get(health, "/readyz").is_some_and(|(status, _)| status.contains(" 200 ")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), ready).await.expect("controller ready");

    let setup = Instant::now();
    let mut objects = Vec::new();
    for index in 0..OPERATORS {
        let name = format!("op-{index:03}");
        objects.push(json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
                            "metadata": {"name": name}, "spec": {}}));
        objects.extend(components(&name));
    }
    futures_util::stream::iter(objects)
        .map(|object| {
            let plane = &plane;
            async move { project::create(plane, &object).await.expect("created") }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let admin = plane.client().await.expect("admin");
    let operators = Api::<Operator>::all(admin.clone());
    let gathered = |operator: &Operator| {
        operator.status.as_ref().and_then(|s| s.components.as_ref()).is_some_and(|c| c.refs.len() == 10)
    };
    loop {
        let list = operators.list(&Default::default()).await.expect("list");
        if list.items.iter().filter(|o| gathered(o)).count() == OPERATORS {
            break;
        }
        assert!(setup.elapsed() < Duration::from_secs(300), "Operators never gathered their components");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("setup: {OPERATORS} Operators, {} components, all gathered in {:.1?}", OPERATORS * 10, setup.elapsed());
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut watch = watcher::watcher(operators.clone(), watcher::Config::default()).applied_objects().boxed();
    let configmaps = Api::<ConfigMap>::namespaced(admin, "operators");
    let (requests_before, reconciles_before) = (controller_requests(&plane), reconciles(health));
    let mut latencies = Vec::with_capacity(CHANGES);
    for change in 0..CHANGES {
        let operator = format!("op-{:03}", change % OPERATORS);
        let name = format!("{operator}-config-{}", change % 6);
        let patch = json!({"data": {"generation": change.to_string()}});
        let started = Instant::now();
        let changed = configmaps.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patched");
        let version = changed.metadata.resource_version.clone();
        scale::until_status_shows(&mut watch, &operator, &name, version.as_ref()).await;
        latencies.push(started.elapsed());
    }
    let (requests, reconciled) =
        (controller_requests(&plane) - requests_before, reconciles(health) - reconciles_before);
    let (peak, resident) = peak_rss_kib(&child);
    latencies.sort();
    println!("component change -> Operator status, over {CHANGES} changes:");
    println!(
        "  median {:.1?}  p99 {:.1?}  max {:.1?}",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );
    println!(
        "API requests by the controller: {requests} for {reconciled} Operator reconciles = {:.2} per reconcile",
        requests as f64 / reconciled
    );
    println!("controller RSS: peak {:.1} MiB, now {:.1} MiB", peak as f64 / 1024.0, resident as f64 / 1024.0);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
}
