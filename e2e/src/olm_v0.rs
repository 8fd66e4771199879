//! OLM v0's `olm` operator (OperatorGroups, ClusterServiceVersions, copied CSVs), as `scripts/install-olm` builds it
//! from the Go module proxy, run against a real control plane as its administrator: the oracle the legacy loops are
//! compared with (`tests/olm_v0_oracle.rs`). Its CRDs are the release's own (`Cluster::start_with_crds`). It serves
//! health and metrics on port 8080 of every interface, which no flag moves: one runs at a time on a machine.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::kubernetes::{run_install_script, RealControlPlane, RealError};

#[derive(Debug, thiserror::Error)]
pub enum OlmV0Error {
    #[error(transparent)]
    InstallScript(#[from] RealError),
    #[error("{script} printed no {key}")]
    Find { script: PathBuf, key: &'static str },
    #[error("failed to start OLM v0's olm ({path}): {source}")]
    Start { path: PathBuf, source: std::io::Error },
}

/// Where `scripts/install-olm` put the binary and the release's CRDs.
#[derive(Clone, Debug)]
pub struct OlmV0Binaries {
    pub olm: PathBuf,
    pub crds: PathBuf,
    pub version: String,
}

impl OlmV0Binaries {
    /// Runs `scripts/install-olm` (which builds nothing when the binary is there) and reads its answer.
    pub fn find() -> Result<Self, OlmV0Error> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-olm");
        let stdout = run_install_script(&script)?;
        let value = |key: &'static str| {
            stdout
                .lines()
                .find_map(|line| line.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
                .ok_or(OlmV0Error::Find { script: script.clone(), key })
        };
        Ok(Self { olm: value("OLM")?.into(), crds: value("OLM_CRDS")?.into(), version: value("OLM_VERSION")? })
    }
}

/// A running `olm`, stopped when dropped; its log in the control plane's directory (`olm-v0.log`).
pub struct OlmV0 {
    child: Child,
    pub log: PathBuf,
}

impl OlmV0 {
    /// Starts `olm` against `plane` as its administrator. Its kubeconfig comes from `KUBECONFIG` (the flag is not
    /// registered with the command line it parses), and `CI` is unset: with it set, OLM checks that everything its
    /// clients create carries `olm.managed=true`, and panics otherwise.
    pub fn start(plane: &RealControlPlane, binaries: &OlmV0Binaries) -> Result<Self, OlmV0Error> {
        Self::start_as(plane, binaries, &plane.admin_kubeconfig())
    }

    /// Starts `olm` with the identity of `kubeconfig` (a benchmark gives it its own user, so that the audit log tells
    /// its requests from everyone else's).
    pub fn start_as(plane: &RealControlPlane, binaries: &OlmV0Binaries, kubeconfig: &Path) -> Result<Self, OlmV0Error> {
        let log = plane.dir().join("olm-v0.log");
        let failed = |source| OlmV0Error::Start { path: binaries.olm.clone(), source };
        let file = std::fs::File::create(&log).map_err(failed)?;
        let errors = file.try_clone().map_err(failed)?;
        let child = Command::new(&binaries.olm)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("CI")
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(errors)
            .spawn()
            .map_err(failed)?;
        Ok(Self { child, log })
    }

    /// The process id, whose memory and CPU time a benchmark reads.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it answers its health check (`/healthz` on port 8080) with 200.
    pub fn healthy(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", HEALTH_PORT)) else { return false };
        let mut answer = String::new();
        write!(stream, "GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n").is_ok()
            && stream.read_to_string(&mut answer).is_ok()
            && answer.lines().next().is_some_and(|status| status.contains(" 200 "))
    }
}

/// The port of OLM v0's health and metrics server.
const HEALTH_PORT: u16 = 8080;

impl Drop for OlmV0 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
