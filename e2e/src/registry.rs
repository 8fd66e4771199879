//! A real OCI registry for tests and the walkthrough: Debian's `docker-registry` serving plain HTTP on a loopback
//! port, storing in a temporary directory removed on drop. It can be stopped and started again on the same port and
//! storage, as a registry outage would. `scripts/install-tools` installs it.
//!
//! It counts as started only once it answers HTTP, not when a TCP connect succeeds: a connect to a loopback port in
//! the ephemeral range that nobody listens on yet can be given that same port as its source and connect to itself
//! (TCP simultaneous open), which also keeps the registry from binding it. A registry that exits while starting is
//! started again (on a new port unless it must keep its own), and its log is kept for the error.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("could not prepare {path}: {source}")]
    Prepare { path: PathBuf, source: std::io::Error },
    #[error("could not run {program} (scripts/install-tools installs it): {source}")]
    Spawn { program: &'static str, source: std::io::Error },
    #[error("htpasswd failed")]
    Htpasswd,
    #[error("docker-registry did not answer on {host} within 20 seconds")]
    NotListening { host: String },
    #[error("docker-registry exited while starting on {host} ({status}): {log}")]
    Exited { host: String, status: std::process::ExitStatus, log: String },
}

/// How many times a registry that exits while starting is started again.
const START_ATTEMPTS: usize = 4;

/// A running (or stopped) registry.
pub struct Registry {
    child: Option<Child>,
    config: PathBuf,
    pub host: String,
    pub dir: PathBuf,
}

impl Registry {
    /// A registry open to anyone.
    pub fn start(name: &str) -> Result<Self, RegistryError> {
        Self::start_with(name, None)
    }

    /// A registry that demands `user`/`password` (htpasswd, bcrypt).
    pub fn start_with_login(name: &str, user: &str, password: &str) -> Result<Self, RegistryError> {
        Self::start_with(name, Some((user, password)))
    }

    fn start_with(name: &str, login: Option<(&str, &str)>) -> Result<Self, RegistryError> {
        let dir = std::env::temp_dir().join(format!("olmv2-registry-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let prepare = |path: &PathBuf| {
            let path = path.clone();
            move |source| RegistryError::Prepare { path, source }
        };
        std::fs::create_dir_all(dir.join("storage")).map_err(prepare(&dir))?;
        let mut auth = String::new();
        if let Some((user, password)) = login {
            let htpasswd = dir.join("htpasswd");
            let status = Command::new("htpasswd")
                .arg("-Bbc")
                .arg(&htpasswd)
                .args([user, password])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|source| RegistryError::Spawn { program: "htpasswd", source })?;
            if !status.success() {
                return Err(RegistryError::Htpasswd);
            }
            auth = format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", htpasswd.display());
        }
        let config_path = dir.join("config.yml");
        let mut registry = Self { child: None, config: config_path.clone(), host: String::new(), dir: dir.clone() };
        let mut attempt = 1;
        loop {
            // A port free now may be taken by the time the registry binds it: then it exits, and gets another.
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .map_err(prepare(&dir))?
                .port();
            let config = format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n{auth}",
                dir.join("storage").display()
            );
            std::fs::write(&config_path, config).map_err(prepare(&config_path))?;
            registry.host = format!("127.0.0.1:{port}");
            match registry.serve() {
                Err(RegistryError::Exited { .. }) if attempt < START_ATTEMPTS => attempt += 1,
                Err(error) => return Err(error),
                Ok(()) => return Ok(registry),
            }
        }
    }

    /// `host:port/name`.
    pub fn reference(&self, name: &str) -> String {
        format!("{}/{name}", self.host)
    }

    /// Stops serving; the stored images stay for [`Registry::resume`].
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Serves again, on the same port and storage.
    pub fn resume(&mut self) -> Result<(), RegistryError> {
        let mut attempt = 1;
        loop {
            match self.serve() {
                Err(RegistryError::Exited { .. }) if attempt < START_ATTEMPTS => attempt += 1,
                other => return other,
            }
        }
    }

    /// Starts `docker-registry` and waits until it answers HTTP, or exits.
    fn serve(&mut self) -> Result<(), RegistryError> {
        self.stop();
        let log_path = self.dir.join("registry.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|source| RegistryError::Prepare { path: log_path.clone(), source })?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|source| RegistryError::Spawn { program: "docker-registry", source })?;
        let child = self.child.insert(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(RegistryError::Exited { host: self.host.clone(), status, log: log.trim().to_string() });
            }
            if answers_http(&self.host) {
                return Ok(());
            }
            if Instant::now() > deadline {
                // Not left running: it would hold the port of a registry the caller starts again.
                self.stop();
                return Err(RegistryError::NotListening { host: self.host.clone() });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether an HTTP server answers `GET /v2/` on `host` (any status: a registry demanding a login answers 401).
/// A socket connected to itself reads back its own request, which does not start as a response does.
pub fn answers_http(host: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(host) else { return false };
    if stream.local_addr().ok() == stream.peer_addr().ok() {
        return false;
    }
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /v2/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut start = [0u8; 5];
    stream.read_exact(&mut start).is_ok() && &start == b"HTTP/"
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
