//! The `run` command as a process: it connects to the API server in KUBECONFIG, serves /healthz, /readyz and
//! /metrics, and exits cleanly on SIGTERM. The API server here answers `/version` only, so the controllers never
//! start and `/readyz` says so; the controllers themselves are tested on the test control plane (`e2e/`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Serves `GET /version` like kube-apiserver, on a loopback port, from a background thread.
fn version_only_api_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            thread::spawn(move || answer_version(stream));
        }
    });
    port
}

fn answer_version(mut stream: TcpStream) {
    let mut buffer = [0u8; 4096];
    while let Ok(read) = stream.read(&mut buffer) {
        if read == 0 {
            return;
        }
        let request = String::from_utf8_lossy(&buffer[..read]);
        let (status, body) = if request.starts_with("GET /version") {
            (
                "200 OK",
                r#"{"major":"1","minor":"33","gitVersion":"v1.33.0","gitCommit":"","gitTreeState":"clean","buildDate":"2025-04-23T00:00:00Z","goVersion":"go1.24","compiler":"gc","platform":"linux/amd64"}"#,
            )
        } else {
            (
                "404 Not Found",
                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#,
            )
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn kubeconfig_for(port: u16, name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("olmv2-run-{name}-{}.kubeconfig", std::process::id()));
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: http://127.0.0.1:{port}\n\
         users:\n- name: test\n  user:\n    token: test\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n\
         current-context: test\n"
    );
    std::fs::write(&path, config).expect("write kubeconfig");
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
    Some((status, body))
}

fn start_run(kubeconfig: &PathBuf, health_port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_olmv2"))
        .args(["run", "--health-address", &format!("127.0.0.1:{health_port}"), "--webhook-address", "127.0.0.1:0"])
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn olmv2")
}

fn wait_for_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn run_serves_health_and_metrics_and_stops_on_sigterm() {
    let kubeconfig = kubeconfig_for(version_only_api_server(), "ok");
    let health_port = free_port();
    let mut child = start_run(&kubeconfig, health_port);

    let deadline = Instant::now() + Duration::from_secs(30);
    let alive = loop {
        match http_get(health_port, "/healthz") {
            Some((200, body)) => break body,
            _ if Instant::now() > deadline => {
                let _ = child.kill();
                panic!("/healthz never answered 200");
            }
            _ => thread::sleep(Duration::from_millis(100)),
        }
    };
    assert_eq!(alive, "ok");
    // This API server serves no SelfSubjectReview: the controllers cannot start, keep retrying, and the process is
    // alive but not ready.
    thread::sleep(Duration::from_millis(500));
    assert_eq!(http_get(health_port, "/readyz"), Some((503, "not ready".to_owned())));
    let (status, metrics) = http_get(health_port, "/metrics").expect("metrics answer");
    assert_eq!(status, 200);
    assert!(metrics.contains("olmv2_build_info"), "{metrics}");

    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(killed.success());
    let status = wait_for_exit(&mut child, Duration::from_secs(10)).expect("exits within 10 s of SIGTERM");
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
    assert!(status.success(), "exit status {status:?}; stderr:\n{stderr}");
    assert!(stderr.contains("connected") && stderr.contains("SIGTERM") && stderr.contains("stopped"), "{stderr}");
    assert!(stderr.contains("SelfSubjectReview") && stderr.contains("retrying"), "{stderr}");
    let _ = std::fs::remove_file(kubeconfig);
}

#[test]
fn run_fails_clearly_when_the_cluster_is_unreachable() {
    let kubeconfig = kubeconfig_for(free_port(), "unreachable");
    let mut child = start_run(&kubeconfig, free_port());
    let status = wait_for_exit(&mut child, Duration::from_secs(60)).expect("gives up within a minute");
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error: failed to reach the Kubernetes API server"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_file(kubeconfig);
}

#[test]
fn json_logs_are_one_object_per_line_with_the_error_category() {
    let kubeconfig = kubeconfig_for(free_port(), "json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_olmv2"))
        .args(["--log-format", "json", "run", "--health-address", &format!("127.0.0.1:{}", free_port())])
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn olmv2");
    let status = wait_for_exit(&mut child, Duration::from_secs(60)).expect("gives up within a minute");
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
    assert!(!status.success());
    let lines: Vec<serde_json::Value> =
        stderr.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}"))).collect();
    let failure = lines
        .iter()
        .find(|line| line["level"] == "ERROR" && line["target"] == "olmv2")
        .expect("the binary's error line");
    assert_eq!(failure["category"], "ClusterUnreachable");
    let _ = std::fs::remove_file(kubeconfig);
}

#[test]
fn printing_into_a_closed_pipe_ends_quietly() {
    // The reader closes at once, as kubectl does when it cannot reach a cluster.
    let mut child = Command::new(env!("CARGO_BIN_EXE_olmv2"))
        .args(["crds", "print"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn olmv2");
    drop(child.stdout.take());
    let status = wait_for_exit(&mut child, Duration::from_secs(30)).expect("exits");
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
