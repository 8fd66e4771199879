//! The registry options the commands that pull images share (`run`, `bundle`): which registries are plain HTTP,
//! where credentials are read from, and where unpacked bundles are cached.

use std::path::{Path, PathBuf};

use crate::bundle::credentials::DockerCredentials;
use crate::bundle::image::RegistryOptions;
use crate::error::Error;

/// How to reach registries and where to cache bundles.
#[derive(Debug, Clone, clap::Args)]
pub struct RegistryArgs {
    /// A registry (host:port) to reach over plain HTTP; repeatable. All others are HTTPS only.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    pub insecure_registries: Vec<String>,
    /// A docker config file with registry credentials; default $DOCKER_CONFIG/config.json or ~/.docker/config.json.
    #[arg(long, value_name = "PATH")]
    pub docker_config: Option<PathBuf>,
    /// Where unpacked bundle images are cached, by digest.
    #[arg(long, env = "OLMV2_BUNDLE_CACHE", value_name = "DIR")]
    pub cache: Option<PathBuf>,
}

fn default_docker_config() -> Option<PathBuf> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".docker")))?;
    Some(dir.join("config.json")).filter(|path| path.is_file())
}

/// The image client's options, with the credentials of the docker config read.
pub fn registry_options(args: &RegistryArgs) -> Result<RegistryOptions, Error> {
    let mut credentials = DockerCredentials::default();
    if let Some(path) = args.docker_config.clone().or_else(default_docker_config) {
        let bytes = std::fs::read(&path).map_err(|source| Error::ReadFile { path: path.clone(), source })?;
        credentials =
            DockerCredentials::from_config_json(&bytes).map_err(|source| Error::Credentials { path, source })?;
    }
    Ok(RegistryOptions {
        insecure_registries: args.insecure_registries.clone(),
        credentials,
        ..RegistryOptions::default()
    })
}

/// The bundle cache: `--cache`, else `olmv2/bundles` in the user's cache directory.
pub fn cache_dir(args: &RegistryArgs) -> PathBuf {
    args.cache.clone().unwrap_or_else(|| {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("olmv2/bundles")
    })
}
