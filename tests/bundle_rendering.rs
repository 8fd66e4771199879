//! The rendered manifests of chosen bundles, pinned: every bundle under `bundles/` and a dozen of
//! `../shared/testdata/community-bundles` picked for their shapes, rendered for each install mode their CSV
//! supports (and two with a deployment configuration), must equal the files under `tests/rendered/`. Any change of
//! the conversion shows there as a diff to review.
//!
//! After a deliberate change, write the files again and review the diff:
//! `OLMV2_WRITE_RENDERED=1 cargo test --test bundle_rendering`.
//!
//! The output is deterministic: certificates come from an issuer whose "PEM" text names what it was issued for, and
//! the CRDs' schemas, which the conversion copies untouched and which make up most of a bundle, are pinned by their
//! sha256 rather than written out.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use olmv2::api::v1alpha1::InstallModeType;
use olmv2::api::v2alpha1::DeploymentConfig;
use olmv2::bundle::{render, Bundle, RenderOptions};
use olmv2::tls::{CertificateError, CertificateIssuer, ServingCertificate};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const INSTALL_NAMESPACE: &str = "operators";
const WRITE_VARIABLE: &str = "OLMV2_WRITE_RENDERED";

/// The repository's bundles, by path under `bundles/`.
const SAMPLES: &[&str] = &["grumbo/1.0.0", "plumbus/2.0.0-alpha", "plumbus/2.1.0"];

/// Community bundles, by path under `community-bundles/`, and what each brings.
const COMMUNITY: &[(&str, &str)] = &[
    ("apicurio-api-controller/0.0.1", "every install mode; a dotted Deployment name"),
    ("cat-facts-operator/1.1.2", "OwnNamespace only"),
    ("cert-manager/1.16.5", "validating and mutating webhooks; three accounts and Deployments"),
    ("eginnovations-operator/0.0.11", "conversion and mutating webhooks; its own certificate volume"),
    ("jaeger/1.65.0", "mutating and validating webhooks; its own certificate volume `cert`"),
    ("kubevirt-wol/0.0.2", "two service accounts; Own, Single and AllNamespaces"),
    ("loki-operator/0.11.0", "conversion webhooks for four CRDs, validating webhooks"),
    ("multicluster-operators-subscription/0.4.1", "five Deployments; Own and SingleNamespace"),
    ("ndb-operator/1.10.0", "two accounts and Deployments, one serving mutating and validating webhooks"),
    ("node-healthcheck-operator/0.12.0", "a validating webhook; two accounts"),
    ("rabbitmq-cluster-operator/2.22.3", "every install mode with mutating and validating webhooks"),
    ("rabbitmq-messaging-topology-operator/1.19.3", "thirteen validating webhooks; its own certificate volume"),
];

const MODES: [InstallModeType; 4] = [
    InstallModeType::AllNamespaces,
    InstallModeType::OwnNamespace,
    InstallModeType::SingleNamespace,
    InstallModeType::MultiNamespace,
];

fn targets_for(mode: InstallModeType) -> Vec<String> {
    match mode {
        InstallModeType::AllNamespaces => vec![String::new()],
        InstallModeType::OwnNamespace => vec![INSTALL_NAMESPACE.into()],
        InstallModeType::SingleNamespace => vec!["team-a".into()],
        InstallModeType::MultiNamespace => vec!["team-a".into(), "team-b".into()],
    }
}

/// Certificates whose text says what they were issued for: the same on every run.
struct NamedCertificates;

impl CertificateIssuer for NamedCertificates {
    fn issue(&self, dns_names: &[String]) -> Result<ServingCertificate, CertificateError> {
        Ok(ServingCertificate {
            cert_pem: format!("certificate for {}", dns_names.join(", ")),
            key_pem: format!("private key for {}", dns_names.join(", ")),
            ca_pem: Some("the test CA".into()),
        })
    }
}

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn expected_dir() -> PathBuf {
    repository().join("tests/rendered")
}

/// A CRD with each version's schema replaced by its sha256.
fn pin_schemas(mut object: Value) -> Value {
    if object["kind"] == "CustomResourceDefinition" {
        for version in object["spec"]["versions"].as_array_mut().into_iter().flatten() {
            if let Some(schema) = version.get("schema") {
                let digest = hex(&Sha256::digest(serde_json::to_vec(schema).expect("json")));
                version["schema"] = json!({"sha256": digest});
            }
        }
    }
    object
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The objects as the file holds them: YAML documents, as `olmv2 bundle render` prints them.
fn as_yaml(objects: Vec<Value>) -> String {
    objects
        .into_iter()
        .map(|object| format!("---\n{}", serde_yaml_ng::to_string(&pin_schemas(object)).expect("yaml")))
        .collect()
}

fn render_file(bundle: &Bundle, mode: InstallModeType, config: Option<&DeploymentConfig>) -> String {
    let targets = targets_for(mode);
    let options = RenderOptions {
        install_namespace: INSTALL_NAMESPACE,
        target_namespaces: &targets,
        certificates: &NamedCertificates,
        deployment_config: config,
    };
    as_yaml(render(bundle, &options).unwrap_or_else(|error| panic!("{} ({mode:?}): {error}", bundle.name())))
}

/// Every expected file, by path under `tests/rendered/`, with what the conversion renders now.
fn rendered() -> Vec<(PathBuf, String)> {
    let mut sources: Vec<(PathBuf, PathBuf)> =
        SAMPLES.iter().map(|path| (repository().join("bundles").join(path), Path::new("bundles").join(path))).collect();
    let community = support::testdata().join("community-bundles");
    sources.extend(COMMUNITY.iter().map(|(path, _)| (community.join(path), Path::new("community-bundles").join(path))));
    let mut files = Vec::new();
    for (dir, name) in sources {
        let bundle = Bundle::load(&dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
        for mode in MODES.into_iter().filter(|mode| bundle.csv.spec.supports(*mode)) {
            files.push((name.join(format!("{mode:?}.yaml")), render_file(&bundle, mode, None)));
        }
    }
    // A deployment configuration, on a bundle without webhooks and on one whose certificate mounts it meets.
    let config_path = expected_dir().join("config/deployment-config.yaml");
    let text = std::fs::read_to_string(&config_path).expect("the deployment configuration");
    let config: DeploymentConfig = serde_yaml_ng::from_str(&text).expect("a deployment configuration");
    for (dir, name) in [
        (repository().join("bundles/plumbus/2.0.0-alpha"), "plumbus-2.0.0-alpha"),
        (community.join("rabbitmq-cluster-operator/2.22.3"), "rabbitmq-cluster-operator-2.22.3"),
    ] {
        let bundle = Bundle::load(&dir).expect("loads");
        let file = Path::new("config").join(format!("{name}-AllNamespaces.yaml"));
        files.push((file, render_file(&bundle, InstallModeType::AllNamespaces, Some(&config))));
    }
    files
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path, relative: &Path, found: &mut BTreeSet<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = relative.join(entry.file_name());
        if path.is_dir() {
            files_under(&path, &name, found);
        } else {
            found.insert(name);
        }
    }
}

/// The first line where two texts differ, for the failure message.
fn first_difference(expected: &str, actual: &str) -> String {
    let (mut expected_lines, mut actual_lines) = (expected.lines(), actual.lines());
    for number in 1.. {
        match (expected_lines.next(), actual_lines.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (None, None) => return "no difference".into(),
            (a, b) => return format!("line {number}: expected {a:?}, rendered {b:?}"),
        }
    }
    unreachable!()
}

#[test]
fn rendered_manifests_match_the_committed_files() {
    let rendered = rendered();
    let root = expected_dir();
    if std::env::var_os(WRITE_VARIABLE).is_some() {
        let mut stale = BTreeSet::new();
        files_under(&root.join("bundles"), Path::new("bundles"), &mut stale);
        files_under(&root.join("community-bundles"), Path::new("community-bundles"), &mut stale);
        for (file, text) in &rendered {
            stale.remove(file);
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("directory");
            std::fs::write(&path, text).expect("written");
        }
        for file in stale.iter().filter(|file| file.extension().is_some_and(|e| e == "yaml")) {
            std::fs::remove_file(root.join(file)).expect("removed");
        }
        return;
    }
    let mut problems = Vec::new();
    let mut expected_files = BTreeSet::new();
    files_under(&root, Path::new(""), &mut expected_files);
    expected_files.remove(Path::new("config/deployment-config.yaml"));
    for (file, text) in &rendered {
        expected_files.remove(file);
        match std::fs::read_to_string(root.join(file)) {
            Ok(expected) if expected == *text => {}
            Ok(expected) => problems.push(format!("{}: {}", file.display(), first_difference(&expected, text))),
            Err(_) => problems.push(format!("{}: missing", file.display())),
        }
    }
    problems.extend(expected_files.iter().map(|file| format!("{}: nothing renders it any more", file.display())));
    assert!(
        problems.is_empty(),
        "the rendered manifests differ from tests/rendered/:\n{}\nreview the change and run `{WRITE_VARIABLE}=1 cargo test --test bundle_rendering`",
        problems.join("\n")
    );
}

#[test]
fn the_chosen_bundles_cover_every_install_mode_and_webhook_kind() {
    let community = support::testdata().join("community-bundles");
    let bundles: Vec<Bundle> =
        COMMUNITY.iter().map(|(path, _)| Bundle::load(&community.join(path)).expect("loads")).collect();
    for mode in MODES {
        assert!(bundles.iter().any(|b| b.csv.spec.supports(mode)), "no bundle supports {mode:?}");
    }
    let kinds: BTreeSet<String> = bundles
        .iter()
        .flat_map(|b| b.csv.spec.webhook_definitions.iter().map(|w| format!("{:?}", w.webhook_type)))
        .collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    let accounts = |b: &Bundle| {
        let strategy = &b.csv.spec.install.spec;
        strategy
            .permissions
            .iter()
            .chain(&strategy.cluster_permissions)
            .map(|p| p.service_account_name.clone())
            .collect::<BTreeSet<_>>()
            .len()
    };
    assert!(bundles.iter().any(|b| accounts(b) > 1), "no bundle with several service accounts");
}
