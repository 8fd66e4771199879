//! The Installed API at scale (issue #22): 100 hand-applied AllNamespaces CSVs (each in its own namespace with a
//! global OperatorGroup) among N namespaces, copied CSVs disabled; the controller runs as its own process (`olmv2
//! run`, production build) with its aggregated API server behind the aggregation layer of the test control plane,
//! or of kube-apiserver with `OLMV2_E2E_KUBERNETES=real`. For each namespace count it prints the controller's RSS
//! once the API lists every operator, the latency (p50, p99) of listing one namespace's Installed objects through the
//! aggregation layer (JSON, and the Table `kubectl get` asks for) and straight to the server (with the front-proxy's
//! certificate: the server alone), of listing every namespace's (`-A`, JSON and Table), the RSS after those lists,
//! and the objects the copied-CSV approach would keep for the same cluster beside the copies this one holds. It
//! prints figures and the goal; it asserts no timing.
//!
//! Run with `cargo bench -p olmv2-e2e --bench installed_api`. Environment (defaults in brackets):
//! `OLMV2_BENCH_NAMESPACES` namespace counts [100,500,1000], `OLMV2_BENCH_CSVS` CSVs [100], `OLMV2_BENCH_REQUESTS`
//! one-namespace requests per figure [200], `OLMV2_BENCH_ALL_REQUESTS` all-namespace requests per figure [5].

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // a benchmark fails loudly by design

#[path = "support/plane.rs"]
mod plane;
#[path = "support/scale.rs"]
mod scale;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use kube_emulator::outbound::ClientIdentity;
use olmv2::api::v1alpha1::ClusterServiceVersion;

use plane::Plane;
use scale::{
    create_csvs, csv_namespace, env_namespace_counts, env_number, mib, prepare, report_log, rss_kib, start_controller,
    wait_succeeded, Copies,
};

const GOAL: &str = "goal (issue #22): RSS flat in the namespace count; a one-namespace list under 10 ms";
const BASE: &str = "/apis/packages.operators.coreos.com/v2alpha1";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

struct Settings {
    csvs: usize,
    namespace_counts: Vec<usize>,
    requests: usize,
    all_requests: usize,
}

impl Settings {
    fn from_env() -> Self {
        let number = |name: &str, default: u64| env_number(name, default) as usize;
        Self {
            csvs: number("OLMV2_BENCH_CSVS", 100),
            namespace_counts: env_namespace_counts(),
            requests: number("OLMV2_BENCH_REQUESTS", 200),
            all_requests: number("OLMV2_BENCH_ALL_REQUESTS", 5),
        }
    }
}

/// Latencies of one kind of request, and the size of the last answer.
struct Latency {
    sorted: Vec<Duration>,
    bytes: usize,
}

impl Latency {
    fn percentile(&self, p: f64) -> Duration {
        let index = ((self.sorted.len() as f64 * p).ceil() as usize).clamp(1, self.sorted.len()) - 1;
        self.sorted[index]
    }

    fn show(&self) -> String {
        format!(
            "p50 {:.2} ms, p99 {:.2} ms ({} requests, {} KiB each)",
            self.percentile(0.5).as_secs_f64() * 1000.0,
            self.percentile(0.99).as_secs_f64() * 1000.0,
            self.sorted.len(),
            self.bytes / 1024
        )
    }
}

struct Figures {
    namespaces: usize,
    operators_listed: usize,
    settled_kib: u64,
    after_kib: u64,
    peak_kib: u64,
    one: Latency,
    one_table: Latency,
    one_direct: Latency,
    all: Latency,
    all_table: Latency,
    copies_held: usize,
    copies_approach: usize,
}

/// A GET through the aggregation layer as the cluster admin: the status code and the body.
async fn get(admin: &kube::Client, path: &str, accept: &str) -> (u16, Vec<u8>) {
    let request = http::Request::get(path).header("accept", accept).body(Vec::new()).unwrap();
    let response = admin.send(request.map(kube::client::Body::from)).await.expect("answered");
    let code = response.status().as_u16();
    let body = http_body_util::BodyExt::collect(response.into_body()).await.expect("body").to_bytes();
    (code, body.to_vec())
}

/// A GET straight to the aggregated API server, as the aggregation layer makes it (front-proxy certificate,
/// `X-Remote-*` headers of the cluster admin).
async fn direct(identity: &ClientIdentity, api: SocketAddr, path: &str) -> (u16, Bytes) {
    let destination = kube_emulator::outbound::Destination {
        address: api,
        server_name: "olmv2-packages.olmv2-system.svc".into(),
        path_and_query: path.into(),
        display: path.into(),
    };
    let trust = kube_emulator::outbound::Trust { ca_bundle: None, client: Some(identity) };
    let request = http::Request::get("/")
        .header("accept", "application/json")
        .header("x-remote-user", "kubernetes-admin")
        .header("x-remote-group", "system:masters");
    kube_emulator::outbound::exchange(&destination, &trust, request, Bytes::new(), Duration::from_secs(60))
        .await
        .expect("answered")
}

async fn timed<F, Fut>(count: usize, mut request: F) -> Latency
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = (u16, usize)>,
{
    let mut sorted = Vec::with_capacity(count);
    let mut bytes = 0;
    for _ in 0..count {
        let start = Instant::now();
        let (code, size) = request().await;
        sorted.push(start.elapsed());
        assert_eq!(code, 200, "the list is answered");
        bytes = size;
    }
    sorted.sort();
    Latency { sorted, bytes }
}

/// Waits until the API lists every operator in `namespace`; answers how many it lists.
async fn wait_listed(admin: &kube::Client, namespace: &str, operators: usize) -> usize {
    let start = Instant::now();
    loop {
        let (code, body) = get(admin, &format!("{BASE}/namespaces/{namespace}/installed"), "application/json").await;
        let listed = if code == 200 {
            serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|l| l["items"].as_array().map(Vec::len))
        } else {
            None
        };
        if listed == Some(operators) || start.elapsed() > Duration::from_secs(120) {
            return listed.unwrap_or(0);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn copies_held(admin: &kube::Client) -> usize {
    let csvs = kube::Api::<ClusterServiceVersion>::all(admin.clone());
    csvs.list(&kube::api::ListParams::default().labels("olm.copiedFrom")).await.expect("copies").items.len()
}

async fn run(binary: &Path, settings: &Settings, namespaces: usize) -> Figures {
    let plane = Plane::start("installed-api-bench").await;
    println!("  {}", plane.describe());
    prepare(&plane, settings.csvs, namespaces, Copies::Disabled).await;
    let admin = plane.client().await;
    let dir = std::env::temp_dir().join(format!("olmv2-installed-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut controller = start_controller(&plane, binary, &dir, 300).await;
    let stand_in = plane.run_deployments(admin.clone());
    create_csvs(&admin, settings.csvs).await;
    let (succeeded, _) = wait_succeeded(&admin, settings.csvs, Instant::now()).await;
    println!("  {succeeded} CSVs Succeeded");
    // A namespace no CSV is in, the last one made.
    let tenant = format!("tenant-{}", namespaces.max(settings.csvs) - 1);
    let tenant = if namespaces > settings.csvs { tenant } else { csv_namespace(0) };
    let operators_listed = wait_listed(&admin, &tenant, settings.csvs).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, settled_kib) = rss_kib(&controller.child);

    let one_path = format!("{BASE}/namespaces/{tenant}/installed");
    let one = timed(settings.requests, || async {
        let (code, body) = get(&admin, &one_path, "application/json").await;
        (code, body.len())
    })
    .await;
    let one_table = timed(settings.requests, || async {
        let (code, body) = get(&admin, &one_path, TABLE).await;
        (code, body.len())
    })
    .await;
    let front_proxy = plane.front_proxy();
    let one_direct = timed(settings.requests, || async {
        let (code, body) = direct(&front_proxy, controller.api, &one_path).await;
        (code, body.len())
    })
    .await;
    let all_path = format!("{BASE}/installed");
    let all = timed(settings.all_requests, || async {
        let (code, body) = get(&admin, &all_path, "application/json").await;
        (code, body.len())
    })
    .await;
    let all_table = timed(settings.all_requests, || async {
        let (code, body) = get(&admin, &all_path, TABLE).await;
        (code, body.len())
    })
    .await;
    let (peak_kib, after_kib) = rss_kib(&controller.child);
    let held = copies_held(&admin).await;
    stand_in.abort();
    let _ = controller.child.kill();
    let _ = controller.child.wait();
    report_log(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let namespaces = namespaces.max(settings.csvs);
    Figures {
        namespaces,
        operators_listed,
        settled_kib,
        after_kib,
        peak_kib,
        one,
        one_table,
        one_direct,
        all,
        all_table,
        copies_held: held,
        // OLM v0 copies each AllNamespaces CSV into every namespace but its own.
        copies_approach: settings.csvs * (namespaces - 1),
    }
}

fn print_run(f: &Figures, settings: &Settings) {
    println!("{} namespaces, {} AllNamespaces CSVs, copied CSVs disabled:", f.namespaces, settings.csvs);
    println!("  Installed objects listed in one namespace: {}", f.operators_listed);
    println!(
        "  controller RSS: {} MiB once listed, {} MiB after the lists, peak {} MiB",
        mib(f.settled_kib),
        mib(f.after_kib),
        mib(f.peak_kib)
    );
    println!("  one namespace, JSON, through the aggregation layer: {}", f.one.show());
    println!("  one namespace, Table (kubectl get), through the aggregation layer: {}", f.one_table.show());
    println!("  one namespace, JSON, straight to the server: {}", f.one_direct.show());
    println!("  all namespaces, JSON, through the aggregation layer: {}", f.all.show());
    println!("  all namespaces, Table (kubectl get -A), through the aggregation layer: {}", f.all_table.show());
    println!(
        "  copied CSVs held: {}; the copied-CSV approach would keep {} CSV objects for the same view",
        f.copies_held, f.copies_approach
    );
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

fn print_table(all: &[Figures], settings: &Settings) {
    println!();
    println!("{} AllNamespaces operators, copied CSVs disabled", settings.csvs);
    println!(
        "| namespaces | RSS listed MiB | RSS after lists MiB | one ns p50 ms | one ns p99 ms | one ns Table p99 ms \
         | one ns direct p50 ms | one ns direct p99 ms | -A p50 ms | -A Table p50 ms | copies held | copies (OLM v0) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for f in all {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            f.namespaces,
            mib(f.settled_kib),
            mib(f.after_kib),
            ms(f.one.percentile(0.5)),
            ms(f.one.percentile(0.99)),
            ms(f.one_table.percentile(0.99)),
            ms(f.one_direct.percentile(0.5)),
            ms(f.one_direct.percentile(0.99)),
            ms(f.all.percentile(0.5)),
            ms(f.all_table.percentile(0.5)),
            f.copies_held,
            f.copies_approach,
        );
    }
    println!("{GOAL}");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let settings = Settings::from_env();
    let binary = olmv2_e2e::project::build_controller(env!("CARGO")).expect("the olmv2 binary");
    let mut all = Vec::new();
    for &namespaces in &settings.namespace_counts {
        let figures = run(&binary, &settings, namespaces).await;
        print_run(&figures, &settings);
        all.push(figures);
    }
    print_table(&all, &settings);
}
