//! Copied CSVs: everywhere a group targets, put back when changed, switched off and on by the OLMConfig.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::time::Duration;

use kube::api::Api;
use olmv2::api::v1alpha1::{ClusterServiceVersion, CsvPhase};

use super::{apply, installed_globally, kubectl};
use crate::support::harness::Harness;

async fn wait_copy(harness: &Harness, namespace: &str, present: bool) -> Option<ClusterServiceVersion> {
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), namespace);
    for _ in 0..400 {
        let copy = csvs.get_opt("plumbus.v1.0.0").await.expect("get");
        let ok = match &copy {
            Some(copy) => present && copy.status.as_ref().is_some_and(|s| s.phase == CsvPhase::Succeeded),
            None => !present,
        };
        if ok {
            return copy;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let last = csvs.get_opt("plumbus.v1.0.0").await.expect("get");
    for record in harness.audit_records() {
        if record.resource == "clusterserviceversions" && matches!(record.verb.as_str(), "delete" | "update" | "create")
        {
            eprintln!(
                "{} {} {}/{} {} {}",
                record.user, record.verb, record.namespace, record.name, record.subresource, record.code
            );
        }
    }
    panic!(
        "the copy in {namespace} never became {}; last: {}",
        if present { "present and Succeeded" } else { "absent" },
        serde_json::to_string_pretty(&last.map(|copy| copy.status)).unwrap()
    );
}

/// OLM's "CSV copy watching all namespaces", "copied csv … is synchronized with the original csv" and "Disabling
/// copied CSVs" scenarios: copies everywhere, put back when changed, made in new namespaces, gone when disabled
/// (kept in a protected namespace) and back when enabled, gone with their original.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn copies_follow_the_original_everywhere_and_the_olm_config_switches_them() {
    if std::env::var_os("OLMV2_TEST_LOG").is_some() {
        olmv2::telemetry::init(olmv2::telemetry::LogFormat::Text);
    }
    let harness = Harness::start_configured(
        "legacy",
        "copies",
        &["ops", "team-a", "team-b"],
        Duration::from_secs(30),
        Box::new(|options, _| options.protected_copied_csv_namespaces = vec!["team-b".into()]),
    )
    .await;
    installed_globally(&harness).await;
    let copy = wait_copy(&harness, "team-a", true).await.expect("copy");
    let status = copy.status.clone().unwrap();
    assert_eq!(status.reason.as_deref(), Some("Copied"));
    assert_eq!(status.message.as_deref(), Some("The operator is running in ops but is managing this namespace"));
    let labels = copy.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("olm.copiedFrom").map(String::as_str), Some("ops"));
    let annotations = copy.metadata.annotations.clone().unwrap();
    assert_eq!(annotations.get("olm.operatorNamespace").map(String::as_str), Some("ops"));
    assert!(!annotations.contains_key("olm.targetNamespaces"));
    assert!(
        !annotations.contains_key("v2alpha1.operators.coreos.com/creator"),
        "the author is not shown to every namespace"
    );
    wait_copy(&harness, "default", true).await;
    let listed = kubectl(&harness, &["get", "csv", "-n", "team-a"]);
    assert!(listed.contains("plumbus.v1.0.0") && listed.contains("Succeeded"), "{listed}");

    // A copy changed by hand is put back; one deleted is made again; a new namespace gets its copy.
    kubectl(&harness, &["label", "csv", "plumbus.v1.0.0", "-n", "team-a", "tampered=yes"]);
    let csvs = Api::<ClusterServiceVersion>::namespaced(harness.admin.clone(), "team-a");
    harness
        .wait_for(&csvs, "plumbus.v1.0.0", "put back", |c| {
            !c.metadata.labels.as_ref().is_some_and(|l| l.contains_key("tampered"))
        })
        .await;
    kubectl(&harness, &["delete", "csv", "plumbus.v1.0.0", "-n", "team-a", "--wait=false"]);
    wait_copy(&harness, "team-a", true).await;
    kubectl(&harness, &["create", "namespace", "team-c"]);
    wait_copy(&harness, "team-c", true).await;

    // Disabled: copies go but in the protected namespace; a Warning event; the OLMConfig condition.
    apply(&harness, "apiVersion: operators.coreos.com/v1\nkind: OLMConfig\nmetadata: {name: cluster}\nspec: {features: {disableCopiedCSVs: true}}\n");
    wait_copy(&harness, "team-a", false).await;
    wait_copy(&harness, "team-c", false).await;
    wait_copy(&harness, "team-b", true).await;
    let event = harness.wait_event("ops", "DisabledCopiedCSVs").await;
    assert_eq!(event.note.as_deref(), Some("CSV copying disabled for ops/plumbus.v1.0.0"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let configs = Api::<olmv2::api::v1::OLMConfig>::all(harness.admin.clone());
    let condition = |status: &str, reason: &str| {
        let (status, reason) = (status.to_owned(), reason.to_owned());
        move |config: &olmv2::api::v1::OLMConfig| {
            config.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| c.type_ == "DisabledCopiedCSVs" && c.status == status && c.reason == reason)
            })
        }
    };
    let config =
        harness.wait_for(&configs, "cluster", "reporting copies off", condition("True", "CopiedCSVsDisabled")).await;
    let message = &config.status.unwrap().conditions[0].message;
    assert_eq!(message, "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode");

    // Enabled again: copies come back.
    kubectl(
        &harness,
        &[
            "patch",
            "olmconfig",
            "cluster",
            "--type=merge",
            "-p",
            r#"{"spec":{"features":{"disableCopiedCSVs":false}}}"#,
        ],
    );
    wait_copy(&harness, "team-a", true).await;
    wait_copy(&harness, "team-c", true).await;
    harness.wait_for(&configs, "cluster", "reporting copies on", condition("False", "CopiedCSVsEnabled")).await;

    // The original goes, and its copies with it.
    kubectl(&harness, &["delete", "csv", "plumbus.v1.0.0", "-n", "ops"]);
    wait_copy(&harness, "team-a", false).await;
    wait_copy(&harness, "team-b", false).await;
}
