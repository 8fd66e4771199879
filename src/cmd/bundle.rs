//! The `bundle` subcommands (`build`, `pull`, `inspect`, `render`): thin I/O around `bundle` and `rbac`, with the
//! summaries they print built by plain functions.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use serde::Serialize;
use serde_json::Value;

use super::registry::{cache_dir, registry_options, RegistryArgs};
use crate::api::v1alpha1::{InstallModeType, StrategyDeploymentPermissions};
use crate::api::v2alpha1::DeploymentConfig;
use crate::bundle::image::ImageClient;
use crate::bundle::unpack::UnpackLimits;
use crate::bundle::{render, Bundle, RenderOptions};
use crate::error::Error;
use crate::output::{self, table};
use crate::tls::CertificateAuthority;

#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Build a bundle image from DIR (manifests/ and metadata/) and push it to REF.
    Build {
        dir: PathBuf,
        #[arg(long, value_name = "REF")]
        push: String,
        /// Push even if DIR is not a valid bundle (for testing error handling).
        #[arg(long)]
        allow_invalid: bool,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pull and unpack a bundle image into the cache; print its pinned reference and where it is.
    Pull {
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Show a bundle's contents, install modes and the permissions its operator asks for.
    Inspect {
        /// A bundle directory or image reference.
        source: String,
        #[arg(short, long, value_enum, default_value_t = InspectFormat::Table)]
        output: InspectFormat,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Print the plain manifests a bundle installs as. The private keys of the webhooks' generated certificates
    /// are left out unless --include-secrets is given.
    Render {
        /// A bundle directory or image reference.
        source: String,
        /// The namespace to install into.
        #[arg(long, short)]
        namespace: String,
        /// A namespace the operator watches; repeatable. Default: all namespaces when supported, else NAMESPACE.
        #[arg(long = "watch", value_name = "NAMESPACE")]
        watch: Vec<String>,
        /// A deployment configuration (YAML or JSON) applied to the Deployments: what an Install's
        /// `spec.content[].config`, an Operator's `spec.config` or a Subscription's `spec.config` holds.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the private keys (`tls.key`) of the Secrets too. Without it they are left out, so that the output
        /// can be shown or stored; a Secret without its key cannot serve, so apply the output only with this flag.
        #[arg(long)]
        include_secrets: bool,
        #[command(flatten)]
        registry: RegistryArgs,
    },
}

/// Output formats of `bundle inspect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InspectFormat {
    Table,
    Yaml,
}

const MODES: [InstallModeType; 4] = [
    InstallModeType::OwnNamespace,
    InstallModeType::SingleNamespace,
    InstallModeType::MultiNamespace,
    InstallModeType::AllNamespaces,
];

/// A bundle from a directory, or pulled from an image reference.
async fn load(source: &str, args: &RegistryArgs) -> Result<(Bundle, String), Error> {
    let path = Path::new(source);
    if path.is_dir() {
        return Ok((Bundle::load(path)?, source.to_owned()));
    }
    let client = ImageClient::new(registry_options(args)?);
    let pulled = client.pull(source, &cache_dir(args), UnpackLimits::default()).await?;
    Ok((Bundle::load(&pulled.root)?, pulled.pinned))
}

pub async fn run(command: BundleCommand) -> Result<(), Error> {
    match command {
        BundleCommand::Build { dir, push, allow_invalid, registry } => {
            let client = ImageClient::new(registry_options(&registry)?);
            let digest = client.push_bundle(&dir, &push, allow_invalid).await?;
            output::write(&format!("pushed {push}@{digest}\n"))?;
        }
        BundleCommand::Pull { reference, registry } => {
            let client = ImageClient::new(registry_options(&registry)?);
            let pulled = client.pull(&reference, &cache_dir(&registry), UnpackLimits::default()).await?;
            output::write(&format!("{}\t{}\n", pulled.pinned, pulled.root.display()))?;
        }
        BundleCommand::Inspect { source, output, registry } => {
            let (bundle, origin) = load(&source, &registry).await?;
            let summary = summarize(&bundle, &origin);
            match output {
                InspectFormat::Table => output::write(&summary_table(&summary))?,
                InspectFormat::Yaml => output::write(&serde_yaml_ng::to_string(&summary).map_err(Error::Yaml)?)?,
            }
        }
        BundleCommand::Render { source, namespace, watch, config, include_secrets, registry } => {
            let config = config.as_deref().map(read_config).transpose()?;
            let (bundle, _) = load(&source, &registry).await?;
            let targets = if watch.is_empty() { default_targets(&bundle, &namespace) } else { watch };
            let authority = CertificateAuthority::new(&format!("olmv2-{}", bundle.name()))?;
            let options = RenderOptions {
                install_namespace: &namespace,
                target_namespaces: &targets,
                certificates: &authority,
                deployment_config: config.as_ref(),
            };
            for mut object in render(&bundle, &options)? {
                let note = if include_secrets { None } else { leave_out_private_key(&mut object) };
                let yaml = serde_yaml_ng::to_string(&object).map_err(Error::Yaml)?;
                output::write(&format!("---\n{}{yaml}", note.unwrap_or_default()))?;
            }
        }
    }
    Ok(())
}

/// A deployment configuration file, YAML or JSON.
fn read_config(path: &Path) -> Result<DeploymentConfig, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile { path: path.to_owned(), source })?;
    serde_yaml_ng::from_str(&text).map_err(|source| Error::ParseDeploymentConfig { path: path.to_owned(), source })
}

/// The key of a TLS Secret's private key.
const PRIVATE_KEY: &str = "tls.key";

/// Removes a Secret's private key, and returns the YAML comment that says so; None for anything else.
pub fn leave_out_private_key(object: &mut Value) -> Option<String> {
    if object["kind"] != "Secret" {
        return None;
    }
    let mut removed = false;
    for field in ["stringData", "data"] {
        if let Some(data) = object.get_mut(field).and_then(Value::as_object_mut) {
            removed |= data.remove(PRIVATE_KEY).is_some();
        }
    }
    removed.then(|| format!("# {PRIVATE_KEY} left out: render with --include-secrets to print the private key\n"))
}

/// Without a say from an OperatorGroup, an operator watches all namespaces when it supports that, else its own.
pub fn default_targets(bundle: &Bundle, install_namespace: &str) -> Vec<String> {
    if bundle.csv.spec.supports(InstallModeType::AllNamespaces) {
        vec![String::new()]
    } else {
        vec![install_namespace.to_owned()]
    }
}

/// What `bundle inspect` reports.
#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BundleSummary {
    pub source: String,
    pub name: String,
    pub package: String,
    pub version: String,
    pub channels: Vec<String>,
    pub default_channel: Option<String>,
    pub install_modes: Vec<(String, bool)>,
    pub contents: Vec<ContentLine>,
    pub permissions: Vec<PermissionLine>,
    pub provides: Vec<String>,
    pub requires: Vec<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct ContentLine {
    pub kind: String,
    pub name: String,
    pub file: String,
}

#[derive(Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PermissionLine {
    pub scope: String,
    pub service_account: String,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
    pub verbs: Vec<String>,
}

fn permission_lines(scope: &str, permissions: &[StrategyDeploymentPermissions]) -> Vec<PermissionLine> {
    permissions
        .iter()
        .flat_map(|permission| {
            permission.rules.iter().map(move |rule| PermissionLine {
                scope: scope.to_owned(),
                service_account: if permission.service_account_name.is_empty() {
                    "default".into()
                } else {
                    permission.service_account_name.clone()
                },
                api_groups: rule.api_groups.clone().unwrap_or_default(),
                resources: rule.resources.clone().unwrap_or_default(),
                resource_names: rule.resource_names.clone().unwrap_or_default(),
                non_resource_urls: rule.non_resource_urls.clone().unwrap_or_default(),
                verbs: rule.verbs.clone(),
            })
        })
        .collect()
}

pub fn summarize(bundle: &Bundle, source: &str) -> BundleSummary {
    let spec = &bundle.csv.spec;
    let mut contents =
        vec![ContentLine { kind: "ClusterServiceVersion".into(), name: bundle.name().into(), file: String::new() }];
    contents.extend(bundle.objects.iter().map(|manifest| ContentLine {
        kind: manifest.object["kind"].as_str().unwrap_or_default().into(),
        name: manifest.object["metadata"]["name"].as_str().unwrap_or_default().into(),
        file: manifest.file.clone(),
    }));
    let mut permissions = permission_lines("Namespaced", &spec.install.spec.permissions);
    permissions.extend(permission_lines("Cluster", &spec.install.spec.cluster_permissions));
    let crds = spec.custom_resource_definitions.as_ref();
    let api = |d: &crate::api::v1alpha1::CrdDescription| {
        let group = d.name.split_once('.').map(|(_, group)| group).unwrap_or_default();
        format!("{}.{}.{group}", d.kind, d.version)
    };
    BundleSummary {
        source: source.into(),
        name: bundle.name().into(),
        package: bundle.annotations.package.clone(),
        version: spec.version.clone().unwrap_or_default(),
        channels: bundle.annotations.channels.clone(),
        default_channel: bundle.annotations.default_channel.clone(),
        install_modes: MODES.iter().map(|mode| (format!("{mode:?}"), spec.supports(*mode))).collect(),
        contents,
        permissions,
        provides: crds.map(|c| c.owned.iter().map(api).collect()).unwrap_or_default(),
        requires: crds.map(|c| c.required.iter().map(api).collect()).unwrap_or_default(),
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items
            .iter()
            .map(|item| if item.is_empty() { "\"\"".to_owned() } else { item.clone() })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The human-readable form of a summary, with aligned columns.
pub fn summary_table(summary: &BundleSummary) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Bundle:         {} ({})", summary.name, summary.source);
    let _ = writeln!(out, "Package:        {} {}", summary.package, summary.version);
    let _ = writeln!(
        out,
        "Channels:       {} (default {})",
        summary.channels.join(","),
        summary.default_channel.as_deref().unwrap_or("-")
    );
    let modes: Vec<String> =
        summary.install_modes.iter().map(|(mode, ok)| format!("{mode} {}", if *ok { "yes" } else { "no" })).collect();
    let _ = writeln!(out, "Install modes:  {}", modes.join(", "));
    let _ = writeln!(out, "Provides:       {}", list(&summary.provides));
    let _ = writeln!(out, "Requires:       {}", list(&summary.requires));
    let _ = writeln!(out, "\nContents:");
    let rows: Vec<Vec<String>> =
        summary.contents.iter().map(|c| vec![c.kind.clone(), c.name.clone(), c.file.clone()]).collect();
    out.push_str(&table(&["KIND", "NAME", "FILE"], &rows));
    let _ = writeln!(out, "\nPermissions the operator asks for:");
    let rows: Vec<Vec<String>> = summary
        .permissions
        .iter()
        .map(|p| {
            let what = if p.non_resource_urls.is_empty() { list(&p.resources) } else { list(&p.non_resource_urls) };
            vec![
                p.scope.clone(),
                p.service_account.clone(),
                list(&p.api_groups),
                what,
                list(&p.resource_names),
                list(&p.verbs),
            ]
        })
        .collect();
    out.push_str(&table(&["SCOPE", "SERVICE ACCOUNT", "API GROUPS", "RESOURCES/URLS", "NAMES", "VERBS"], &rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_secrets_private_key_is_left_out_with_a_note() {
        let mut secret = json!({"kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"tls.crt": "CERT", "tls.key": "KEY", "ca.crt": "CA"}, "data": {"tls.key": "S0VZ"}});
        let note = leave_out_private_key(&mut secret).expect("a note");
        assert!(note.starts_with("# tls.key left out") && note.contains("--include-secrets") && note.ends_with('\n'));
        assert_eq!(secret["stringData"], json!({"tls.crt": "CERT", "ca.crt": "CA"}));
        assert_eq!(secret["data"], json!({}));
    }

    #[test]
    fn other_objects_and_secrets_without_a_key_are_left_alone() {
        let mut service = json!({"kind": "Service", "stringData": {"tls.key": "not a secret's"}});
        assert_eq!(leave_out_private_key(&mut service), None);
        assert_eq!(service["stringData"]["tls.key"], "not a secret's");
        let mut config = json!({"kind": "Secret", "stringData": {"password": "x"}});
        assert_eq!(leave_out_private_key(&mut config), None);
        assert_eq!(config["stringData"]["password"], "x");
    }

    #[test]
    fn a_deployment_configuration_file_is_read_as_yaml_or_json() {
        let dir = std::env::temp_dir().join(format!("olmv2-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let yaml = dir.join("config.yaml");
        std::fs::write(&yaml, "env:\n- name: HTTP_PROXY\n  value: http://proxy:3128\nnodeSelector: {}\n")
            .expect("write");
        let config = read_config(&yaml).expect("read");
        assert_eq!(config.env[0].name, "HTTP_PROXY");
        assert_eq!(config.node_selector, Some(Default::default()));
        let json = dir.join("config.json");
        std::fs::write(&json, r#"{"annotations": {"a": "b"}}"#).expect("write");
        assert_eq!(read_config(&json).expect("read").annotations["a"], "b");
        let wrong = dir.join("wrong.yaml");
        std::fs::write(&wrong, "env: not-a-list\n").expect("write");
        let error = read_config(&wrong).expect_err("refused");
        assert!(matches!(error, Error::ParseDeploymentConfig { .. }), "{error}");
        assert!(matches!(read_config(&dir.join("missing.yaml")), Err(Error::ReadFile { .. })));
        let _ = std::fs::remove_dir_all(dir);
    }
}
