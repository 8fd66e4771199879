//! The real kubectl against a control plane: run a command with a kubeconfig, expect success or failure, read
//! its JSON output; and any command run as kubectl is (`run`, `text`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use kube_emulator::{ControlPlane, Options, Target, WriteOptions};
use serde_json::Value;

pub struct Kubectl {
    pub kubeconfig: PathBuf,
}

impl Kubectl {
    /// A kubectl for `kubeconfig`, written into `dir` as `name`.
    pub fn with_kubeconfig(dir: &Path, name: &str, kubeconfig: &str) -> Self {
        let path = dir.join(name);
        std::fs::write(&path, kubeconfig).expect("kubeconfig written");
        Self { kubeconfig: path }
    }

    /// kubectl with this kubeconfig and a cache of discovery and HTTP answers of its own, beside the kubeconfig:
    /// the shared cache is keyed by host and port, and a port another test's control plane used before would have
    /// kubectl revalidate that plane's answers (a 304 where a test expects the document fetched).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.kubeconfig.with_extension("cache"))
            .env_remove("KUBERNETES_SERVICE_HOST");
        command
    }

    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        run(&mut self.command(args), stdin)
    }

    /// Runs kubectl and returns its standard output, failing the test when kubectl fails.
    pub fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let output = self.run(args, stdin);
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "kubectl {args:?} failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    /// Runs kubectl expecting it to fail; returns its standard error.
    pub fn fails(&self, args: &[&str], stdin: Option<&str>) -> String {
        let output = self.run(args, stdin);
        assert!(!output.status.success(), "kubectl {args:?} should fail:\n{}", String::from_utf8_lossy(&output.stdout));
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all, None)).expect("kubectl -o json prints JSON")
    }
}

/// A control plane with the repository's CRDs installed (`super::repository_crds`), and a kubectl for it whose
/// kubeconfig is written in `dir`.
pub async fn start_with_crds(dir: &Path) -> (ControlPlane, Kubectl) {
    let plane = ControlPlane::start(Options::default()).await.expect("control plane starts");
    let crd_type = plane
        .api
        .resources()
        .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .cloned()
        .expect("CRDs served");
    let target = Target { resource: crd_type, namespace: String::new(), name: None, subresource: None };
    let options = WriteOptions::internal("test");
    for crd in super::repository_crds() {
        plane.api.create(&target, crd, &options).await.expect("project CRD accepted");
    }
    let kubeconfig = dir.join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig).expect("kubeconfig written");
    (plane, Kubectl { kubeconfig })
}

/// A fresh directory for one test's files.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olmv2-kubectl-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Runs `command` (never as an in-cluster client), `stdin` typed in.
pub fn run(command: &mut Command, stdin: Option<&str>) -> Output {
    let mut child = command
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command runs (kubectl is a prerequisite)");
    if let Some(text) = stdin {
        child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("stdin");
    }
    child.wait_with_output().expect("output")
}

/// What a command printed, both streams.
pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}
