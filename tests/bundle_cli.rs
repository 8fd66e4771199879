//! The `bundle` subcommands as a user runs them: build and push to a real registry, pull, inspect (table and YAML)
//! and render, by image reference and by directory; invalid bundles are refused with the file and the reason.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::registry::Registry;

fn olmv2(args: &[&str], cache: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_olmv2"))
        .args(args)
        .env("OLMV2_BUNDLE_CACHE", cache)
        .env("HOME", cache)
        .output()
        .expect("runs")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn sample(path: &str) -> String {
    format!("{}/bundles/{path}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn build_push_pull_inspect_and_render_through_a_registry() {
    let registry = Registry::start("cli").expect("docker-registry starts");
    let cache = std::env::temp_dir().join(format!("olmv2-cli-cache-{}", std::process::id()));
    let reference = registry.reference("plumbus-bundle:v2.0.0-alpha");
    let insecure = ["--insecure-registry", registry.host.as_str()];

    let built = stdout(&olmv2(
        &[&["bundle", "build", &sample("plumbus/2.0.0-alpha"), "--push", &reference][..], &insecure].concat(),
        &cache,
    ));
    assert!(built.starts_with(&format!("pushed {reference}@sha256:")), "{built}");

    let pulled = stdout(&olmv2(&[&["bundle", "pull", &reference][..], &insecure].concat(), &cache));
    let (pinned, root) = pulled.trim().split_once('\t').expect("pinned<TAB>path");
    assert!(pinned.starts_with(&format!("{}/plumbus-bundle@sha256:", registry.host)), "{pinned}");
    assert!(std::path::Path::new(root).join("manifests/plumbus.clusterserviceversion.yaml").is_file());

    let table = stdout(&olmv2(&[&["bundle", "inspect", &reference][..], &insecure].concat(), &cache));
    assert!(table.contains("Bundle:         plumbus.v2.0.0-alpha"), "{table}");
    assert!(
        table.contains("Install modes:  OwnNamespace yes, SingleNamespace yes, MultiNamespace no, AllNamespaces yes"),
        "{table}"
    );
    assert!(table.contains("Namespaced  plumbus-operator  \"\"                              secrets                 -      get,list,create,update"), "{table}");

    let yaml = stdout(&olmv2(&[&["bundle", "inspect", pinned, "-o", "yaml"][..], &insecure].concat(), &cache));
    let summary: Value = serde_yaml_ng::from_str(&yaml).expect("YAML");
    assert_eq!(summary["package"], "plumbus");
    assert_eq!(summary["provides"][0], "Plumbus.v2alpha1.how.theydoit.com");
    assert_eq!(summary["requires"][0], "Grumbo.v1alpha1.manufacturing.how.theydoit.com");

    let rendered = stdout(&olmv2(
        &[&["bundle", "render", &reference, "--namespace", "operators"][..], &insecure].concat(),
        &cache,
    ));
    let objects: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&rendered)
        .map(|d| serde::Deserialize::deserialize(d).expect("object"))
        .collect();
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().expect("kind")).collect();
    assert_eq!(
        kinds,
        [
            "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "Service",
            "Deployment"
        ]
    );
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("deployment");
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"], "",
        "all namespaces by default"
    );
    let _ = std::fs::remove_dir_all(cache);
}

#[test]
fn render_with_watched_namespaces_and_refusals() {
    let cache = std::env::temp_dir().join(format!("olmv2-cli-render-{}", std::process::id()));
    let own = stdout(&olmv2(
        &["bundle", "render", &sample("plumbus/2.0.0-alpha"), "-n", "operators", "--watch", "team-a"],
        &cache,
    ));
    assert!(own.contains("kind: Role\n") && own.contains("namespace: team-a"), "{own}");

    let multi = olmv2(
        &["bundle", "render", &sample("plumbus/2.0.0-alpha"), "-n", "operators", "--watch", "a", "--watch", "b"],
        &cache,
    );
    assert_eq!(multi.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&multi.stderr).trim(),
        "error: UnsupportedOperatorGroup: MultiNamespace InstallModeType not supported, cannot configure to watch multiple namespaces"
    );

    let broken = olmv2(&["bundle", "inspect", &sample("malformed/unsupported-kind")], &cache);
    assert_eq!(
        String::from_utf8_lossy(&broken.stderr).trim(),
        "error: manifests/pod.yaml: kind Pod is not allowed in a bundle"
    );
    let refused_push = olmv2(&["bundle", "build", &sample("malformed/no-csv"), "--push", "127.0.0.1:1/x:1"], &cache);
    assert_eq!(
        String::from_utf8_lossy(&refused_push.stderr).trim(),
        "error: manifests/: holds no ClusterServiceVersion"
    );
}

#[test]
fn render_leaves_private_keys_out_unless_asked_and_applies_a_deployment_configuration() {
    let cache = std::env::temp_dir().join(format!("olmv2-cli-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&cache).expect("cache");
    // A bundle with a webhook, so the conversion issues a certificate.
    let bundle = support::testdata().join("community-bundles/tagger/2.1.17");
    let bundle = bundle.to_str().expect("utf-8");
    let shown = stdout(&olmv2(&["bundle", "render", bundle, "-n", "operators"], &cache));
    assert!(shown.contains("# tls.key left out: render with --include-secrets"), "{shown}");
    assert!(!shown.contains("PRIVATE KEY") && !shown.contains("tls.key:"), "{shown}");
    let full = stdout(&olmv2(&["bundle", "render", bundle, "-n", "operators", "--include-secrets"], &cache));
    assert!(full.contains("tls.key:") && full.contains("PRIVATE KEY"), "{full}");
    let help = stdout(&olmv2(&["bundle", "render", "--help"], &cache));
    assert!(help.contains("--include-secrets") && help.contains("private keys"), "{help}");

    let config = cache.join("config.yaml");
    std::fs::write(&config, "env:\n- name: HTTP_PROXY\n  value: http://proxy:3128\nannotations:\n  team: a\n")
        .expect("write");
    let configured = stdout(&olmv2(
        &["bundle", "render", bundle, "-n", "operators", "--config", config.to_str().expect("utf-8")],
        &cache,
    ));
    let objects: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&configured)
        .map(|d| serde::Deserialize::deserialize(d).expect("object"))
        .collect();
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("deployment");
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"].as_array().expect("env");
    assert!(env.iter().any(|e| e["name"] == "HTTP_PROXY" && e["value"] == "http://proxy:3128"), "{env:?}");
    assert_eq!(deployment["metadata"]["annotations"]["team"], "a");

    std::fs::write(&config, "env: not-a-list\n").expect("write");
    let refused =
        olmv2(&["bundle", "render", bundle, "-n", "operators", "--config", config.to_str().expect("utf-8")], &cache);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .starts_with(&format!("error: failed to read the deployment configuration in {}", config.display())),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let _ = std::fs::remove_dir_all(cache);
}
