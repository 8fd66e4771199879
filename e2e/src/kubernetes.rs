//! A real Kubernetes control plane for the end-to-end tests, beside the emulator (`kube-emulator`): etcd,
//! kube-apiserver and kube-controller-manager as `scripts/install-kubernetes` builds them, started on free loopback
//! ports from a temporary directory that holds everything they need (certificates, test users' tokens, an audit
//! policy), their logs and the audit log. What the emulator is checked against: flags and behaviours are those of
//! e2e/README.md, "Real Kubernetes binaries".
//!
//! Test users authenticate with static tokens, which kube-apiserver reads once at start: the users are fixed when the
//! control plane starts ([`DEFAULT_USERS`], or [`RealControlPlane::start_with_users`]).
//!
//! The processes are stopped when the [`RealControlPlane`] is dropped, and also when the test process exits without
//! dropping it (a control plane kept in a `static` is never dropped): a small shell "reaper", started first, stops
//! them and removes the directory once the test process's end of its standard input closes.

use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use serde_json::{json, Value};

/// The test users every control plane has, with no groups but `system:authenticated`, and so no grants beyond
/// what RBAC's bootstrap policy gives every authenticated user.
pub const DEFAULT_USERS: [&str; 5] = ["alice", "bob", "mallory", "eve", "dora"];

/// The controllers kube-controller-manager runs: what the tests need, and nothing that needs nodes.
const CONTROLLERS: &str = "garbage-collector-controller,namespace-controller,serviceaccount-controller,\
serviceaccount-token-controller,root-ca-certificate-publisher-controller,clusterrole-aggregation-controller,\
deployment-controller,replicaset-controller";

/// How long etcd and kube-apiserver may take to get ready (busy CI machines took over 30 s).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a process has between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Stops the processes whose ids it reads, one a line, once its standard input closes without `stop` (the last
/// started first, as [`stop`] does), and then removes the directory (its first argument) unless a `keep` file is in
/// it.
const REAPER: &str = r#"
pids=
while read -r line; do
  case "$line" in
    stop) exit 0 ;;
    *) pids="$line $pids" ;;
  esac
done
for p in $pids; do
  kill -TERM "$p" 2>/dev/null
  i=0
  while [ $i -lt 50 ] && kill -0 "$p" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "$p" 2>/dev/null
done
if [ -e "$1/keep" ]; then
  echo "real control plane stopped; its logs are kept in $1" >&2
else
  rm -rf "$1"
fi
"#;

#[derive(Debug, thiserror::Error)]
pub enum RealError {
    #[error("failed to run {script}")]
    RunInstallScript {
        script: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{script} failed ({status}): {stderr}")]
    InstallScriptFailed { script: PathBuf, status: ExitStatus, stderr: String },
    #[error("{script} printed no {key}= line")]
    FindBinary { script: PathBuf, key: &'static str },
    #[error("failed to create the directory {path}")]
    CreateDirectory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to generate {what}")]
    GenerateCertificate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("failed to write {path}")]
    WriteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to serialize a kubeconfig: {0}")]
    SerializeKubeconfig(String),
    #[error("failed to reserve a loopback port")]
    ReservePort(#[source] std::io::Error),
    #[error("failed to start the reaper (sh)")]
    StartReaper(#[source] std::io::Error),
    #[error("failed to start {process} ({binary})")]
    StartProcess {
        process: &'static str,
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{process} exited before it was ready ({status}); its log is {log}")]
    ExitedEarly { process: &'static str, status: ExitStatus, log: PathBuf },
    #[error("{process} was not ready within {timeout:?} (last answer: {last}); its log is {log}")]
    WaitReady { process: &'static str, timeout: Duration, last: String, log: PathBuf },
    #[error("failed to build a client from {path}: {message}")]
    BuildClient { path: PathBuf, message: String },
    #[error("{0} is not a test user of this control plane (users are fixed at start)")]
    UnknownUser(String),
    #[error("failed to read {path}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to read the audit log {path}")]
    ReadAuditLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The binaries `scripts/install-kubernetes` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub etcd: PathBuf,
    pub kubernetes_version: String,
    pub etcd_version: String,
}

/// Runs an install script of `scripts/` (which builds what is missing, and otherwise only prints where it is): its
/// standard output, its `KEY=value` lines.
pub fn run_install_script(script: &Path) -> Result<String, RealError> {
    let output = Command::new(script)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| RealError::RunInstallScript { script: script.to_owned(), source })?;
    if !output.status.success() {
        return Err(RealError::InstallScriptFailed {
            script: script.to_owned(),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

impl Binaries {
    /// Runs `scripts/install-kubernetes` (which builds what is missing, and otherwise only prints the paths).
    pub fn find() -> Result<Self, RealError> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-kubernetes");
        let stdout = run_install_script(&script)?;
        Self::parse(&stdout).map_err(|key| RealError::FindBinary { script, key })
    }

    /// The script's `KEY=value` lines; the key missing, if one is.
    pub fn parse(stdout: &str) -> Result<Self, &'static str> {
        let value = |key: &'static str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
                .ok_or(key)
        };
        Ok(Self {
            kube_apiserver: value("KUBE_APISERVER")?.into(),
            kube_controller_manager: value("KUBE_CONTROLLER_MANAGER")?.into(),
            etcd: value("ETCD")?.into(),
            kubernetes_version: value("KUBERNETES_VERSION")?,
            etcd_version: value("ETCD_VERSION")?,
        })
    }
}

/// An audit event's timestamp (RFC 3339, microseconds) as a time of the system clock.
fn time(value: &Value) -> Option<SystemTime> {
    let stamp: k8s_openapi::jiff::Timestamp = value.as_str()?.parse().ok()?;
    Some(SystemTime::from(stamp))
}

/// One request's record in the audit log (its `ResponseComplete` stage).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditRecord {
    pub user: String,
    pub impersonated_user: Option<String>,
    pub verb: String,
    pub api_group: Option<String>,
    pub resource: Option<String>,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub code: Option<u16>,
    /// The request's path and query (`requestURI`).
    pub request_uri: String,
    /// The client's `User-Agent`.
    pub user_agent: String,
    /// When the request arrived (`requestReceivedTimestamp`).
    pub received: Option<SystemTime>,
    /// When it was answered in full (the `ResponseComplete` stage's `stageTimestamp`; a watch's when it ended).
    pub completed: Option<SystemTime>,
}

impl AuditRecord {
    /// The record of one audit event (a JSON line), if it is of the `ResponseComplete` stage.
    pub fn parse(line: &str) -> Option<Self> {
        let event: Value = serde_json::from_str(line).ok()?;
        if event["stage"] != "ResponseComplete" {
            return None;
        }
        let text = |value: &Value| value.as_str().map(str::to_owned);
        let object = &event["objectRef"];
        Some(Self {
            user: text(&event["user"]["username"]).unwrap_or_default(),
            impersonated_user: text(&event["impersonatedUser"]["username"]),
            verb: text(&event["verb"]).unwrap_or_default(),
            api_group: text(&object["apiGroup"]),
            resource: text(&object["resource"]),
            subresource: text(&object["subresource"]),
            namespace: text(&object["namespace"]),
            name: text(&object["name"]),
            code: event["responseStatus"]["code"].as_u64().and_then(|code| u16::try_from(code).ok()),
            request_uri: text(&event["requestURI"]).unwrap_or_default(),
            user_agent: text(&event["userAgent"]).unwrap_or_default(),
            received: time(&event["requestReceivedTimestamp"]),
            completed: time(&event["stageTimestamp"]),
        })
    }
}

/// kube-apiserver's audit log read as it grows (the benchmarks poll it): each reading answers the records of the
/// lines written in full since the last; a line still being written is read whole the next time.
#[derive(Debug, Default)]
pub struct AuditLogReader {
    offset: u64,
}

impl AuditLogReader {
    /// The `ResponseComplete` records of the lines of `path` completed since the last reading (none while the log
    /// does not exist yet).
    pub fn read_new(&mut self, path: &Path) -> Result<Vec<AuditRecord>, RealError> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let failed = |source| RealError::ReadAuditLog { path: path.to_owned(), source };
        let mut file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(failed(source)),
        };
        file.seek(SeekFrom::Start(self.offset)).map_err(failed)?;
        let mut added = Vec::new();
        file.read_to_end(&mut added).map_err(failed)?;
        let whole = added.iter().rposition(|byte| *byte == b'\n').map_or(0, |last| last + 1);
        self.offset += whole as u64;
        Ok(String::from_utf8_lossy(&added[..whole]).lines().filter_map(AuditRecord::parse).collect())
    }
}

struct Process {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

/// Whether [`RealControlPlane::start_with`] starts kube-controller-manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControllerManager {
    Start,
    /// Left to [`RealControlPlane::start_controller_manager`], once the caller installed what it should find.
    Later,
}

/// etcd, kube-apiserver and kube-controller-manager on loopback, stopped on drop.
pub struct RealControlPlane {
    /// kube-apiserver's URL, `https://127.0.0.1:PORT`.
    pub url: String,
    pub binaries: Binaries,
    /// How long [`RealControlPlane::start`] took, the binaries' lookup included.
    pub start_time: Duration,
    dir: PathBuf,
    /// The test users and their tokens.
    users: Vec<(String, String)>,
    processes: Mutex<Vec<Process>>,
    reaper: Mutex<Option<(Child, ChildStdin)>>,
    /// The cluster CA, which issues the client certificates of [`Self::certificate_kubeconfig`].
    ca: Option<Authority>,
}

impl std::fmt::Debug for RealControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealControlPlane").field("url", &self.url).field("dir", &self.dir).finish_non_exhaustive()
    }
}

impl RealControlPlane {
    /// Starts a control plane with the [`DEFAULT_USERS`]. `name` goes into its directory's name.
    pub async fn start(name: &str) -> Result<Self, RealError> {
        Self::start_with_users(name, &DEFAULT_USERS).await
    }

    /// Starts a control plane whose test users are `users`, each with a token (see [`Self::user_kubeconfig`]).
    pub async fn start_with_users(name: &str, users: &[&str]) -> Result<Self, RealError> {
        Self::start_with(name, users, ControllerManager::Start).await
    }

    /// Starts etcd and kube-apiserver, and kube-controller-manager too unless asked to wait
    /// ([`Self::start_controller_manager`] then starts it).
    pub async fn start_with(
        name: &str,
        users: &[&str],
        controller_manager: ControllerManager,
    ) -> Result<Self, RealError> {
        let started = Instant::now();
        let binaries = Binaries::find()?;
        let dir = unique_dir(name);
        std::fs::create_dir_all(&dir).map_err(|source| RealError::CreateDirectory { path: dir.clone(), source })?;
        let reaper = start_reaper(&dir)?;
        let mut plane = Self {
            url: String::new(),
            binaries,
            start_time: Duration::ZERO,
            dir,
            users: users.iter().map(|user| ((*user).to_owned(), random_token())).collect(),
            processes: Mutex::new(Vec::new()),
            reaper: Mutex::new(Some(reaper)),
            ca: None,
        };
        // From here on, a failure drops `plane`, which stops what was started.
        plane.ca = Some(plane.write_files()?);
        let [etcd_port, peer_port, api_port] = free_ports()?;
        plane.url = format!("https://127.0.0.1:{api_port}");

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let data_dir = plane.path("etcd");
        let etcd = plane.binaries.etcd.clone();
        plane.spawn(
            "etcd",
            &etcd,
            &[
                "--name=default".to_owned(),
                format!("--data-dir={}", data_dir.display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=default={peer_url}"),
                "--initial-cluster-state=new".to_owned(),
                "--unsafe-no-fsync=true".to_owned(),
                "--log-level=warn".to_owned(),
            ],
        )?;
        plane.wait_etcd(etcd_port).await?;

        let file = |name: &str| plane.path(name).display().to_string();
        let apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={api_port}"),
            "--advertise-address=127.0.0.1".to_owned(),
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--tls-cert-file={}", file("apiserver.crt")),
            format!("--tls-private-key-file={}", file("apiserver.key")),
            format!("--client-ca-file={}", file("ca.crt")),
            format!("--token-auth-file={}", file("tokens.csv")),
            "--authorization-mode=RBAC".to_owned(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
            format!("--service-account-key-file={}", file("sa.pub")),
            format!("--service-account-signing-key-file={}", file("sa.key")),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            format!("--requestheader-client-ca-file={}", file("front-proxy-ca.crt")),
            "--requestheader-allowed-names=front-proxy-client".to_owned(),
            "--requestheader-username-headers=X-Remote-User".to_owned(),
            "--requestheader-group-headers=X-Remote-Group".to_owned(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
            format!("--proxy-client-cert-file={}", file("front-proxy-client.crt")),
            format!("--proxy-client-key-file={}", file("front-proxy-client.key")),
            format!("--audit-policy-file={}", file("audit-policy.yaml")),
            format!("--audit-log-path={}", file("audit.log")),
            // Never rotated: its writer rotates at 100 MB when given no size (or 0), and the benches read the one
            // file as it grows (the side-by-side bench with copies enabled writes more than that).
            "--audit-log-maxsize=1048576".to_owned(),
        ];
        let apiserver = plane.binaries.kube_apiserver.clone();
        plane.spawn("kube-apiserver", &apiserver, &apiserver_args)?;
        plane.wait_apiserver().await?;

        if controller_manager == ControllerManager::Start {
            plane.start_controller_manager()?;
        }
        plane.start_time = started.elapsed();
        Ok(plane)
    }

    /// Starts kube-controller-manager (once; see [`Self::start_with`]). Its garbage collector learns the kinds
    /// discovery serves when it starts and then every 30 s: CRDs in place before it starts are known from the start,
    /// as a cluster's long-installed CRDs are.
    pub fn start_controller_manager(&self) -> Result<(), RealError> {
        let file = |name: &str| self.path(name).display().to_string();
        let controller_manager_args = vec![
            format!("--kubeconfig={}", file("controller-manager.kubeconfig")),
            format!("--controllers={CONTROLLERS}"),
            "--leader-elect=false".to_owned(),
            "--secure-port=0".to_owned(),
            "--use-service-account-credentials=true".to_owned(),
            format!("--service-account-private-key-file={}", file("sa.key")),
            format!("--root-ca-file={}", file("ca.crt")),
        ];
        let controller_manager = self.binaries.kube_controller_manager.clone();
        self.spawn("kube-controller-manager", &controller_manager, &controller_manager_args)?;
        Ok(())
    }

    /// The directory of this control plane's files and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kubeconfig of the cluster's administrator (a client certificate in `system:masters`).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.path("admin.kubeconfig")
    }

    /// The kubeconfig of the test user `user` (a static token; the user's name is `user`, with no group but
    /// `system:authenticated`), written on first use.
    pub fn user_kubeconfig(&self, user: &str) -> Result<PathBuf, RealError> {
        let Some((_, token)) = self.users.iter().find(|(known, _)| known == user) else {
            return Err(RealError::UnknownUser(user.to_owned()));
        };
        let path = self.path(&format!("user-{user}.kubeconfig"));
        self.write_kubeconfig(&path, json!({"token": token}))?;
        Ok(path)
    }

    /// A kubeconfig authenticating with `token` (a ServiceAccount's, from a TokenRequest), written as `NAME.kubeconfig`.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> Result<PathBuf, RealError> {
        let path = self.path(&format!("{name}.kubeconfig"));
        self.write_kubeconfig(&path, json!({"token": token}))?;
        Ok(path)
    }

    /// The text of a kubeconfig for `user` in `groups`, with a client certificate the cluster CA issued (its files
    /// written beside it): any user, in any groups, at any time, where [`Self::user_kubeconfig`]'s token users are
    /// fixed at start.
    pub fn certificate_kubeconfig(&self, user: &str, groups: &[&str]) -> Result<String, RealError> {
        let Some(ca) = &self.ca else { return Err(RealError::UnknownUser(user.to_owned())) };
        let (cert, key) = ca.issue(user, groups, &[], ExtendedKeyUsagePurpose::ClientAuth)?;
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let stem = format!("client-{}", COUNT.fetch_add(1, Ordering::Relaxed));
        self.write(&format!("{stem}.crt"), &cert)?;
        self.write(&format!("{stem}.key"), &key)?;
        let path = self.path(&format!("{stem}.kubeconfig"));
        self.write_kubeconfig(
            &path,
            json!({"client-certificate": self.path(&format!("{stem}.crt")).display().to_string(),
                   "client-key": self.path(&format!("{stem}.key")).display().to_string()}),
        )?;
        std::fs::read_to_string(&path).map_err(|source| RealError::ReadFile { path, source })
    }

    /// The front proxy's client certificate and key (PEM) and the CA kube-apiserver trusts it by: what kube-apiserver
    /// presents to an aggregated API server when it proxies a request.
    pub fn front_proxy_client(&self) -> Result<(String, String), RealError> {
        let read = |name: &str| {
            let path = self.path(name);
            std::fs::read_to_string(&path).map_err(|source| RealError::ReadFile { path, source })
        };
        Ok((read("front-proxy-client.crt")?, read("front-proxy-client.key")?))
    }

    /// A client as the administrator. Each call builds a new one, bound to the calling runtime.
    pub async fn client(&self) -> Result<kube::Client, RealError> {
        client_from(&self.admin_kubeconfig()).await
    }

    /// A client as the test user `user`.
    pub async fn user_client(&self, user: &str) -> Result<kube::Client, RealError> {
        client_from(&self.user_kubeconfig(user)?).await
    }

    /// The audit log (JSON lines, level Metadata for every request).
    pub fn audit_log(&self) -> PathBuf {
        self.path("audit.log")
    }

    /// The audit log's `ResponseComplete` records, oldest first.
    pub fn audit_records(&self) -> Result<Vec<AuditRecord>, RealError> {
        let path = self.audit_log();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(RealError::ReadAuditLog { path, source }),
        };
        Ok(text.lines().filter_map(AuditRecord::parse).collect())
    }

    /// The running processes' names and ids, in the order they were started.
    pub fn processes(&self) -> Vec<(&'static str, u32)> {
        match self.processes.lock() {
            Ok(processes) => processes.iter().map(|process| (process.name, process.child.id())).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// The log file of a process (`etcd`, `kube-apiserver`, `kube-controller-manager`).
    pub fn log(&self, process: &str) -> PathBuf {
        self.path(&format!("{process}.log"))
    }

    /// Keeps the directory (logs, audit log) when the calling thread panics before the guard is dropped: for a
    /// control plane shared by tests, which is never dropped and so cannot tell a failed test itself.
    pub fn keep_logs_on_panic(&self) -> KeepLogsOnPanic<'_> {
        KeepLogsOnPanic { plane: self }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, contents: &str) -> Result<(), RealError> {
        let path = self.path(name);
        std::fs::write(&path, contents).map_err(|source| RealError::WriteFile { path, source })
    }

    fn write_kubeconfig(&self, path: &Path, user: Value) -> Result<(), RealError> {
        let config = json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "real",
            "clusters": [{"name": "real", "cluster": {
                "server": self.url, "certificate-authority": self.path("ca.crt").display().to_string()}}],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "real", "context": {"cluster": "real", "user": "user", "namespace": "default"}}],
        });
        let text = serde_yaml_ng::to_string(&config).map_err(|e| RealError::SerializeKubeconfig(e.to_string()))?;
        std::fs::write(path, text).map_err(|source| RealError::WriteFile { path: path.to_owned(), source })
    }

    /// Certificates, keys, tokens and the audit policy; answers the cluster CA. The kubeconfigs are written once the URL
    /// is known.
    fn write_files(&self) -> Result<Authority, RealError> {
        let ca = Authority::new("olmv2-e2e-ca", "the cluster CA")?;
        self.write("ca.crt", &ca.cert_pem)?;
        let names = [
            "127.0.0.1",
            "10.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ];
        let (cert, key) = ca.issue("kube-apiserver", &[], &names, ExtendedKeyUsagePurpose::ServerAuth)?;
        self.write("apiserver.crt", &cert)?;
        self.write("apiserver.key", &key)?;
        let (cert, key) = ca.issue("admin", &["system:masters"], &[], ExtendedKeyUsagePurpose::ClientAuth)?;
        self.write("admin.crt", &cert)?;
        self.write("admin.key", &key)?;
        let (cert, key) = ca.issue("system:kube-controller-manager", &[], &[], ExtendedKeyUsagePurpose::ClientAuth)?;
        self.write("controller-manager.crt", &cert)?;
        self.write("controller-manager.key", &key)?;

        let front_proxy = Authority::new("olmv2-e2e-front-proxy-ca", "the front-proxy CA")?;
        self.write("front-proxy-ca.crt", &front_proxy.cert_pem)?;
        let (cert, key) = front_proxy.issue("front-proxy-client", &[], &[], ExtendedKeyUsagePurpose::ClientAuth)?;
        self.write("front-proxy-client.crt", &cert)?;
        self.write("front-proxy-client.key", &key)?;

        // RSA, as kubeadm makes it: ServiceAccount tokens are RS256 JWTs, as most clusters issue them.
        let service_accounts = KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256)
            .map_err(|source| RealError::GenerateCertificate { what: "the service-account key", source })?;
        self.write("sa.key", &service_accounts.serialize_pem())?;
        self.write("sa.pub", &service_accounts.public_key_pem())?;

        let mut tokens = String::new();
        for (index, (user, token)) in self.users.iter().enumerate() {
            tokens.push_str(&format!("{token},{user},uid-{index}-{user}\n"));
        }
        self.write("tokens.csv", &tokens)?;
        // JSON is YAML: one rule, every request at level Metadata.
        self.write(
            "audit-policy.yaml",
            &json!({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}).to_string(),
        )?;
        Ok(ca)
    }

    fn spawn(&self, name: &'static str, binary: &Path, args: &[String]) -> Result<(), RealError> {
        let log = self.log(name);
        let started = |source| RealError::StartProcess { process: name, binary: binary.to_owned(), source };
        let out = File::create(&log).map_err(|source| RealError::WriteFile { path: log.clone(), source })?;
        let err = out.try_clone().map_err(started)?;
        let child = Command::new(binary)
            .args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(started)?;
        if let Ok(mut reaper) = self.reaper.lock() {
            if let Some((_, stdin)) = reaper.as_mut() {
                // The reaper only matters when this process dies undropped; a failed write leaves Drop to it.
                let _ = writeln!(stdin, "{}", child.id());
            }
        }
        if let Ok(mut processes) = self.processes.lock() {
            processes.push(Process { name, child, log });
        }
        Ok(())
    }

    /// Fails when the named process has exited.
    fn check_running(&self, name: &'static str) -> Result<(), RealError> {
        let Ok(mut processes) = self.processes.lock() else { return Ok(()) };
        for process in processes.iter_mut().filter(|p| p.name == name) {
            if let Ok(Some(status)) = process.child.try_wait() {
                return Err(RealError::ExitedEarly { process: name, status, log: process.log.clone() });
            }
        }
        Ok(())
    }

    async fn wait_etcd(&self, port: u16) -> Result<(), RealError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            self.check_running("etcd")?;
            let last = match http_get_local(port, "/health") {
                Ok(answer) if answer.starts_with("HTTP/1.1 200") && answer.contains(r#""health":"true""#) => {
                    return Ok(())
                }
                Ok(answer) => answer.lines().next().unwrap_or_default().to_owned(),
                Err(error) => error.to_string(),
            };
            if Instant::now() > deadline {
                return Err(RealError::WaitReady {
                    process: "etcd",
                    timeout: READY_TIMEOUT,
                    last,
                    log: self.log("etcd"),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_apiserver(&self) -> Result<(), RealError> {
        let admin = self.admin_kubeconfig();
        self.write_kubeconfig(
            &admin,
            json!({"client-certificate": self.path("admin.crt").display().to_string(),
                   "client-key": self.path("admin.key").display().to_string()}),
        )?;
        self.write_kubeconfig(
            &self.path("controller-manager.kubeconfig"),
            json!({"client-certificate": self.path("controller-manager.crt").display().to_string(),
                   "client-key": self.path("controller-manager.key").display().to_string()}),
        )?;
        let client = client_from(&admin).await?;
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("no answer");
        loop {
            self.check_running("kube-apiserver")?;
            let request = http::Request::get("/readyz").body(Vec::new());
            if let Ok(request) = request {
                match client.request_text(request).await {
                    Ok(answer) if answer.trim() == "ok" => return Ok(()),
                    Ok(answer) => last = answer,
                    Err(error) => last = error.to_string(),
                }
            }
            if Instant::now() > deadline {
                let log = self.log("kube-apiserver");
                return Err(RealError::WaitReady { process: "kube-apiserver", timeout: READY_TIMEOUT, last, log });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for RealControlPlane {
    fn drop(&mut self) {
        // Tell the reaper the processes are taken care of, before their ids can be reused.
        if let Ok(mut reaper) = self.reaper.lock() {
            if let Some((mut child, mut stdin)) = reaper.take() {
                let _ = writeln!(stdin, "stop");
                drop(stdin);
                let _ = child.wait();
            }
        }
        let mut processes = match self.processes.lock() {
            Ok(mut processes) => std::mem::take(&mut *processes),
            Err(_) => Vec::new(),
        };
        // One after the other, the controller-manager first and etcd last: each one's clients are gone when it is
        // asked to stop (kube-apiserver stopped together with etcd outlasts its grace period).
        for process in processes.iter_mut().rev() {
            stop(process);
        }
        if std::thread::panicking() {
            eprintln!("real control plane stopped; its logs are kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// SIGTERM, then SIGKILL after [`STOP_GRACE`]; waits for the process either way.
fn stop(process: &mut Process) {
    let started = Instant::now();
    if let Ok(None) = process.child.try_wait() {
        let _ = Command::new("kill")
            .args(["-TERM", &process.child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    while started.elapsed() < STOP_GRACE && matches!(process.child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if let Ok(None) = process.child.try_wait() {
        let _ = process.child.kill();
    }
    let _ = process.child.wait();
}

/// See [`RealControlPlane::keep_logs_on_panic`].
pub struct KeepLogsOnPanic<'a> {
    plane: &'a RealControlPlane,
}

impl Drop for KeepLogsOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = std::fs::write(self.plane.path("keep"), "");
            eprintln!("the real control plane's logs will be kept in {}", self.plane.dir.display());
        }
    }
}

/// A CA and what it issues (EC P-256 keys, rcgen's default).
struct Authority {
    params: CertificateParams,
    key: KeyPair,
    cert_pem: String,
}

impl Authority {
    fn new(common_name: &str, what: &'static str) -> Result<Self, RealError> {
        let failed = |source| RealError::GenerateCertificate { what, source };
        let key = KeyPair::generate().map_err(failed)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let cert_pem = params.self_signed(&key).map_err(failed)?.pem();
        Ok(Self { params, key, cert_pem })
    }

    /// A certificate and its key, PEM, for `common_name` in the `organizations` (Kubernetes' groups).
    fn issue(
        &self,
        common_name: &str,
        organizations: &[&str],
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<(String, String), RealError> {
        let failed = |source| RealError::GenerateCertificate { what: "a certificate", source };
        let key = KeyPair::generate().map_err(failed)?;
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).map_err(failed)?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        for organization in organizations {
            params.distinguished_name.push(DnType::OrganizationName, *organization);
        }
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![usage];
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(failed)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// The client configuration of the kubeconfig at `path`.
pub async fn config_from(path: &Path) -> Result<kube::Config, RealError> {
    let failed = |message: String| RealError::BuildClient { path: path.to_owned(), message };
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| failed(e.to_string()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| failed(e.to_string()))
}

async fn client_from(path: &Path) -> Result<kube::Client, RealError> {
    let config = config_from(path).await?;
    kube::Client::try_from(config).map_err(|e| RealError::BuildClient { path: path.to_owned(), message: e.to_string() })
}

/// A plain HTTP/1.1 GET on loopback, the whole answer (etcd's `/health`); blocking, for at most 2 s.
fn http_get_local(port: u16, path: &str) -> std::io::Result<String> {
    use std::io::Read as _;
    let timeout = Duration::from_secs(2);
    let mut stream = std::net::TcpStream::connect_timeout(&(std::net::Ipv4Addr::LOCALHOST, port).into(), timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// Three loopback ports free at the time of asking (held together, so that they differ).
fn free_ports() -> Result<[u16; 3], RealError> {
    let bind = || TcpListener::bind(("127.0.0.1", 0)).map_err(RealError::ReservePort);
    let listeners = [bind()?, bind()?, bind()?];
    let mut ports = [0; 3];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().map_err(RealError::ReservePort)?.port();
    }
    Ok(ports)
}

/// A directory of its own under the system's temporary directory, for each control plane of each process.
fn unique_dir(name: &str) -> PathBuf {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    let name: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    std::env::temp_dir().join(format!("olmv2-kubernetes-{name}-{}-{count}-{nanos:08x}", std::process::id()))
}

/// 32 hex digits from the standard library's randomly keyed hasher: a test user's token.
fn random_token() -> String {
    let word = || {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default());
        hasher.finish()
    };
    format!("{:016x}{:016x}", word(), word())
}

fn start_reaper(dir: &Path) -> Result<(Child, ChildStdin), RealError> {
    let mut child = Command::new("sh")
        .args(["-c", REAPER, "reaper"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .map_err(RealError::StartReaper)?;
    let Some(stdin) = child.stdin.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(RealError::StartReaper(std::io::Error::other("no standard input")));
    };
    Ok((child, stdin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_script_output_is_parsed() {
        let stdout = "KUBE_APISERVER=/c/k/kube-apiserver\nKUBE_CONTROLLER_MANAGER=/c/k/kcm\nETCD=/c/e/etcd\n\
                      KUBERNETES_VERSION=v1.37.2\nETCD_VERSION=v3.7.0\n";
        let binaries = Binaries::parse(stdout).expect("parsed");
        assert_eq!(binaries.etcd, PathBuf::from("/c/e/etcd"));
        assert_eq!(binaries.kubernetes_version, "v1.37.2");
        assert_eq!(Binaries::parse("ETCD=/e\n"), Err("KUBE_APISERVER"));
    }

    #[test]
    fn only_response_complete_events_are_records() {
        let complete = r#"{"stage":"ResponseComplete","verb":"list","user":{"username":"alice"},
            "objectRef":{"resource":"secrets","namespace":"default","apiVersion":"v1"},"responseStatus":{"code":403}}"#
            .replace('\n', "");
        let record = AuditRecord::parse(&complete).expect("a record");
        assert_eq!(record.user, "alice");
        assert_eq!(record.resource.as_deref(), Some("secrets"));
        assert_eq!(record.code, Some(403));
        assert_eq!(record.impersonated_user, None);
        assert!(AuditRecord::parse(&complete.replace("ResponseComplete", "RequestReceived")).is_none());
        assert!(AuditRecord::parse("not json").is_none());
    }

    #[test]
    fn a_record_carries_when_it_arrived_and_was_answered() {
        let line = r#"{"stage":"ResponseComplete","verb":"get","user":{"username":"alice"},
            "requestReceivedTimestamp":"2026-12-06T04:30:00.000100Z","stageTimestamp":"2026-12-06T04:30:00.002350Z"}"#
            .replace('\n', "");
        let record = AuditRecord::parse(&line).expect("a record");
        let (received, completed) = (record.received.expect("received"), record.completed.expect("completed"));
        assert_eq!(completed.duration_since(received).ok(), Some(Duration::from_micros(2250)));
        let since_epoch = received.duration_since(UNIX_EPOCH).expect("after the epoch");
        assert_eq!(since_epoch.as_micros() % 1_000_000, 100);
        let without = AuditRecord::parse(&line.replace("requestReceivedTimestamp", "other")).expect("a record");
        assert_eq!(without.received, None);
    }

    #[test]
    fn the_audit_log_is_read_a_whole_line_at_a_time() {
        let dir = unique_dir("audit-reader");
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("audit.log");
        let line = |verb: &str| format!(r#"{{"stage":"ResponseComplete","verb":"{verb}","user":{{"username":"a"}}}}"#);
        let mut reader = AuditLogReader::default();
        assert!(reader.read_new(&path).expect("no log yet").is_empty());
        let (first, second) = (line("get"), line("list"));
        let (half, rest) = second.split_at(20);
        std::fs::write(&path, format!("{first}\n{half}")).expect("written");
        let verbs = |records: Vec<AuditRecord>| records.into_iter().map(|r| r.verb).collect::<Vec<_>>();
        assert_eq!(verbs(reader.read_new(&path).expect("read")), ["get"]);
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("opened");
        writeln!(file, "{rest}\n{}", line("watch")).expect("appended");
        assert_eq!(verbs(reader.read_new(&path).expect("read")), ["list", "watch"]);
        assert!(reader.read_new(&path).expect("read").is_empty(), "nothing read twice");
        std::fs::remove_dir_all(&dir).expect("removed");
    }

    #[test]
    fn tokens_differ() {
        assert_ne!(random_token(), random_token());
        assert_eq!(random_token().len(), 32);
    }
}
