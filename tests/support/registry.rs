//! A real OCI registry for tests: Debian's `docker-registry` serving plain HTTP on a loopback port, storing in a
//! temporary directory, stopped when dropped. `scripts/install-tools` installs it.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Registry {
    child: Child,
    pub host: String,
    pub dir: PathBuf,
}

impl Registry {
    /// A registry open to anyone.
    pub fn start(name: &str) -> Self {
        Self::start_with(name, None)
    }

    /// A registry that demands `user`/`password` (htpasswd, bcrypt).
    pub fn start_with_login(name: &str, user: &str, password: &str) -> Self {
        Self::start_with(name, Some((user, password)))
    }

    fn start_with(name: &str, login: Option<(&str, &str)>) -> Self {
        let dir = std::env::temp_dir().join(format!("olmv2-registry-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("storage")).expect("registry dir");
        let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.join("storage").display()
        );
        if let Some((user, password)) = login {
            let htpasswd = dir.join("htpasswd");
            let status = Command::new("htpasswd")
                .args(["-Bbc", htpasswd.to_str().expect("utf-8"), user, password])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("htpasswd runs (scripts/install-tools installs apache2-utils)");
            assert!(status.success());
            config.push_str(&format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", htpasswd.display()));
        }
        let config_path = dir.join("config.yml");
        std::fs::write(&config_path, config).expect("config");
        let child = Command::new("docker-registry")
            .args(["serve", config_path.to_str().expect("utf-8")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry runs (scripts/install-tools installs it)");
        let registry = Self { child, host: format!("127.0.0.1:{port}"), dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&registry.host).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not listen on {}", registry.host);
            std::thread::sleep(Duration::from_millis(50));
        }
        registry
    }

    /// `host:port/name`.
    pub fn reference(&self, name: &str) -> String {
        format!("{}/{name}", self.host)
    }

    /// Stops the registry now (a later pull must then work from the cache alone).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
