//! OLM's "static provider" scenario: an OperatorGroup with `staticProvidedAPIs` keeps the `olm.providedAPIs` it was
//! given whatever its members do, and still counts in the intersection: a CSV providing one of its APIs in a group
//! that intersects it fails `InterOperatorGroupOwnerConflict`, also when a group grows into it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use kube::api::Api;
use olmv2::api::v1::OperatorGroup;
use olmv2::api::v1alpha1::CsvPhase;

use super::{account, apply, csv, start, wait_phase, CRD, GLOBAL_GROUP};

const PLUMBUS: &str = "Plumbus.v1.example.com";

fn group(namespace: &str, targets: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: og, namespace: {namespace}}}\n\
         spec: {{targetNamespaces: [{targets}]}}\n"
    )
}

async fn provided(groups: &Api<OperatorGroup>) -> Option<String> {
    let group = groups.get("og").await.expect("group");
    group.metadata.annotations.unwrap_or_default().get("olm.providedAPIs").cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_static_group_keeps_its_apis_and_conflicts_with_groups_intersecting_it() {
    let harness = start("static").await;
    apply(&harness, CRD);
    apply(&harness, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-c}\n");
    // Group A in team-a: static, providing Plumbus, targeting team-b.
    apply(
        &harness,
        &format!(
            "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {{name: og, namespace: team-a, \
             annotations: {{olm.providedAPIs: {PLUMBUS}}}}}\nspec: {{staticProvidedAPIs: true, targetNamespaces: [team-b]}}\n"
        ),
    );
    let group_a = Api::<OperatorGroup>::namespaced(harness.admin.clone(), "team-a");

    // Group B in ops targets every namespace, so it intersects A: its Plumbus CSV conflicts.
    apply(&harness, GLOBAL_GROUP);
    apply(&harness, &account("ops", true));
    apply(&harness, &csv("ops", &[("AllNamespaces", true)]));
    let failed = wait_phase(&harness, "ops", CsvPhase::Failed, "InterOperatorGroupOwnerConflict").await;
    assert_eq!(failed.status.unwrap().message.as_deref(), Some("intersecting operatorgroups provide the same apis"));
    let group_b = Api::<OperatorGroup>::namespaced(harness.admin.clone(), "ops");
    assert_eq!(provided(&group_b).await.unwrap_or_default(), "", "B provides nothing");
    assert_eq!(provided(&group_a).await.as_deref(), Some(PLUMBUS), "A is unchanged");

    // Group C in team-c targets only team-c: no intersection with A (B is global, but provides nothing).
    apply(&harness, &group("team-c", "team-c"));
    apply(&harness, &account("team-c", true));
    apply(&harness, &csv("team-c", &[("OwnNamespace", true), ("MultiNamespace", true)]));
    wait_phase(&harness, "team-c", CsvPhase::Succeeded, "InstallSucceeded").await;
    let group_c = Api::<OperatorGroup>::namespaced(harness.admin.clone(), "team-c");
    assert_eq!(provided(&group_c).await.as_deref(), Some(PLUMBUS));
    assert_eq!(provided(&group_a).await.as_deref(), Some(PLUMBUS), "A is unchanged");

    // C grows into team-b, which static A targets: C's CSV conflicts and C gives Plumbus up; A keeps it.
    apply(&harness, &group("team-c", "team-c, team-b"));
    wait_phase(&harness, "team-c", CsvPhase::Failed, "InterOperatorGroupOwnerConflict").await;
    for _ in 0..200 {
        if provided(&group_c).await.unwrap_or_default().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(provided(&group_c).await.unwrap_or_default(), "", "C gave Plumbus up");
    assert_eq!(provided(&group_a).await.as_deref(), Some(PLUMBUS), "A is unchanged");
}
