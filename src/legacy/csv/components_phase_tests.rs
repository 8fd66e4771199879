//! The phase machine with owned APIServices and webhooks: OLM's reasons and messages for invalid descriptions,
//! unadoptable APIServices, certificate rotation and components not yet in place; the Deployments with their
//! certificates mounted.

use super::*;
use crate::legacy::csv::strategy::{check_with, deployments_with};

fn component(reinstall: bool, message: &str) -> Unhealthy {
    Unhealthy::Component { reinstall, message: message.into() }
}

#[test]
fn pending_refuses_invalid_webhooks_then_unadoptable_apiservices() {
    let pending = status(CsvPhase::Pending, "RequirementsUnknown");
    let invalid = Components {
        invalid_webhooks: Some("webhook rules cannot include all groups".into()),
        ..Components::default()
    };
    let outcome = transition(&pending, Observed { components: invalid.clone(), ..observed() });
    assert_eq!(
        outcome.phase,
        Some((CsvPhase::Failed, "InvalidWebhookDescription", "webhook rules cannot include all groups".into()))
    );
    let unmet = Observed { components: invalid, requirements: (false, Vec::new()), ..observed() };
    assert_eq!(transition(&pending, unmet).phase.map(|(_, reason, _)| reason), Some("RequirementsNotMet"));
    let unadoptable = Components { unadoptable_api_service: true, ..Components::default() };
    assert_eq!(
        transition(&pending, Observed { components: unadoptable, ..observed() }).phase,
        Some((CsvPhase::Failed, "OwnerConflict", "unable to adopt APIService".into()))
    );
}

#[test]
fn certificates_due_for_rotation_send_the_csv_back_to_pending() {
    let rotate = || Components { rotate: true, ..Components::default() };
    assert_eq!(
        transition(&status(CsvPhase::Succeeded, "InstallSucceeded"), Observed { components: rotate(), ..observed() })
            .phase,
        Some((CsvPhase::Pending, "NeedsCertRotation", "CSV owns resources that require a cert refresh".into()))
    );
    assert_eq!(
        transition(&status(CsvPhase::Failed, "ComponentUnhealthy"), Observed { components: rotate(), ..observed() })
            .phase,
        Some((CsvPhase::Pending, "NeedsCertRotation", "owned APIServices need cert refresh".into()))
    );
}

#[test]
fn components_not_in_place_wait_or_install_again_with_olms_messages() {
    let installing = status(CsvPhase::Installing, "InstallSucceeded");
    let missing = Observed { health: Err(component(false, "apiServices not installed")), ..observed() };
    assert_eq!(
        transition(&installing, missing).phase,
        Some((CsvPhase::Installing, "InstallWaiting", "apiServices not installed".into()))
    );
    let broken = || Observed {
        health: Err(component(true, "Webhook install failed: conversionWebhook not ready")),
        ..observed()
    };
    assert_eq!(
        transition(&installing, broken()).phase,
        Some((CsvPhase::InstallReady, "InstallWaiting", "Webhook install failed: conversionWebhook not ready".into()))
    );
    let succeeded = status(CsvPhase::Succeeded, "InstallSucceeded");
    assert_eq!(
        transition(&succeeded, broken()).phase.map(|(p, r, _)| (p, r)),
        Some((CsvPhase::InstallReady, "ComponentUnhealthy"))
    );
    let gone = Observed { health: Err(component(false, "webhooks not installed")), ..observed() };
    assert_eq!(
        transition(&succeeded, gone).phase,
        Some((CsvPhase::Failed, "ComponentUnhealthy", "webhooks not installed".into()))
    );
}

#[test]
fn serving_deployments_carry_their_certificate_and_are_checked_with_it() {
    let csv = crate::legacy::csv::certs::fixtures::csv();
    let cas = BTreeMap::from([("hooks".to_owned(), "hash".to_owned())]);
    let plain = deployments(&csv);
    let mounted = deployments_with(&csv, &cas);
    let hooks = &mounted[1]["spec"]["template"];
    assert_eq!(hooks["metadata"]["annotations"]["olmcahash"], "hash");
    assert_eq!(hooks["spec"]["volumes"][0]["secret"]["secretName"], "hooks-service-cert");
    assert_ne!(plain[1]["metadata"]["labels"][SPEC_HASH_LABEL], mounted[1]["metadata"]["labels"][SPEC_HASH_LABEL]);
    assert_eq!(plain[0], mounted[0], "a Deployment without a CA is as before");
    // A Deployment applied with the CA is what the check wants; one applied before it is outdated.
    let hash = mounted[1]["metadata"]["labels"][SPEC_HASH_LABEL].as_str().expect("hash").to_owned();
    let mut live: Deployment = serde_json::from_value(json!({"metadata": {"name": "hooks", "generation": 1,
        "labels": {SPEC_HASH_LABEL: hash}}, "spec": {"selector": {}, "template": {}},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]}}))
    .expect("deployment");
    let only = |deployment: Deployment| {
        let mut csv = csv.clone();
        csv.spec.install.spec.deployments.retain(|d| d.name == "hooks");
        check_with(&csv, &BTreeMap::from([("hooks".to_owned(), deployment)]), &cas)
    };
    assert_eq!(only(live.clone()), Ok(()));
    live.metadata.labels = Some(BTreeMap::from([(SPEC_HASH_LABEL.to_owned(), "old".to_owned())]));
    assert!(matches!(only(live), Err(Unhealthy::Outdated(_))));
}
