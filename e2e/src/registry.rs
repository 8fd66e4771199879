//! A real OCI registry for tests and the walkthrough: Debian's `docker-registry` serving plain HTTP on a loopback
//! port, storing in a temporary directory removed on drop. It can be stopped and started again on the same port and
//! storage, as a registry outage would. `scripts/install-tools` installs it.

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
    #[error("docker-registry did not listen on {host} within 20 seconds")]
    NotListening { host: String },
}

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
        let port =
            TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).map_err(prepare(&dir))?.port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("storage").display()
        );
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
            config.push_str(&format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", htpasswd.display()));
        }
        let config_path = dir.join("config.yml");
        std::fs::write(&config_path, config).map_err(prepare(&config_path))?;
        let mut registry = Self { child: None, config: config_path, host: format!("127.0.0.1:{port}"), dir };
        registry.resume()?;
        Ok(registry)
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
        self.stop();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| RegistryError::Spawn { program: "docker-registry", source })?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&self.host).is_err() {
            if Instant::now() > deadline {
                return Err(RegistryError::NotListening { host: self.host.clone() });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
