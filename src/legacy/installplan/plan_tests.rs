//! Tests of a new InstallPlan's shape.

use super::*;

fn subscription(name: &str, approval: Option<&str>, generation: Option<i64>) -> Subscription {
    let mut spec = json!({"source": "community", "sourceNamespace": "olm", "name": name});
    if let Some(approval) = approval {
        spec["installPlanApproval"] = approval.into();
    }
    let mut object = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": "ops", "uid": format!("uid-{name}")}, "spec": spec});
    if let Some(generation) = generation {
        object["status"] = json!({"installPlanGeneration": generation});
    }
    serde_json::from_value(object).expect("a Subscription")
}

fn bundle(csv: &str, package: &str, subscription: Option<&str>) -> PlannedBundle {
    PlannedBundle {
        csv: csv.into(),
        package: package.into(),
        channel: "stable".into(),
        image: format!("registry.example/{package}@sha256:1"),
        catalog: "community".into(),
        catalog_namespace: "olm".into(),
        replaces: None,
        subscription: subscription.map(str::to_owned),
    }
}

#[test]
fn a_plan_is_owned_by_every_subscription_and_lists_its_csvs_in_order() {
    let subs = [subscription("plumbus", None, None), subscription("other", None, None)];
    let bundles = [bundle("plumbus.v2", "plumbus", Some("plumbus")), bundle("grumbo.v1", "grumbo", None)];
    let plan = new_install_plan("ops", 3, &subs, &bundles);
    assert_eq!(plan["metadata"]["generateName"], "install-");
    assert_eq!(plan["metadata"]["namespace"], "ops");
    let owners = plan["metadata"]["ownerReferences"].as_array().expect("owners");
    assert_eq!(owners.len(), 2, "every Subscription of the namespace, as OLM");
    assert_eq!(owners[1]["name"], "other");
    assert_eq!(owners[0]["controller"], false);
    assert_eq!(owners[0]["blockOwnerDeletion"], false);
    assert_eq!(plan["spec"]["clusterServiceVersionNames"], json!(["plumbus.v2", "grumbo.v1"]));
    assert_eq!(
        (plan["spec"]["approval"].as_str(), plan["spec"]["approved"].as_bool()),
        (Some("Automatic"), Some(true))
    );
    assert_eq!(plan["spec"]["generation"], 3);
}

#[test]
fn one_manual_subscription_makes_the_plan_manual_and_unapproved() {
    let subs = [subscription("plumbus", None, None), subscription("careful", Some("Manual"), None)];
    let plan = new_install_plan("ops", 1, &subs, &[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    assert_eq!((plan["spec"]["approval"].as_str(), plan["spec"]["approved"].as_bool()), (Some("Manual"), Some(false)));
    let status = initial_status("ops", InstallPlanApproval::Manual, &[]);
    assert_eq!(status.phase, InstallPlanPhase::RequiresApproval);
}

#[test]
fn the_status_holds_a_csv_step_per_bundle_then_the_generated_subscriptions() {
    let bundles = [bundle("plumbus.v2", "plumbus", Some("plumbus")), bundle("grumbo.v1", "grumbo", None)];
    let status = initial_status("ops", InstallPlanApproval::Automatic, &bundles);
    assert_eq!(status.phase, InstallPlanPhase::Installing);
    assert_eq!(status.catalog_sources, ["community"]);
    let steps: Vec<(String, String, String)> =
        status.plan.iter().map(|s| (s.resolving.clone(), s.resource.kind.clone(), s.resource.name.clone())).collect();
    assert_eq!(
        steps,
        [
            ("plumbus.v2".into(), "ClusterServiceVersion".into(), "plumbus.v2".into()),
            ("grumbo.v1".into(), "ClusterServiceVersion".into(), "grumbo.v1".into()),
            ("grumbo.v1".into(), "Subscription".into(), "grumbo-stable-community-olm".into()),
        ]
    );
    assert!(status.plan.iter().all(|s| s.status == STEP_UNKNOWN));
    let generated: Value =
        serde_json::from_str(status.plan[2].resource.manifest.as_deref().expect("a manifest")).unwrap();
    assert_eq!(
        generated["spec"],
        json!({"source": "community", "sourceNamespace": "olm", "name": "grumbo", "channel": "stable",
               "startingCSV": "grumbo.v1", "installPlanApproval": "Automatic"})
    );
    assert_eq!(status.bundle_lookups[0].path, "registry.example/plumbus@sha256:1", "the bundle image, as OLM's path");
    assert_eq!(status.bundle_lookups[1].identifier, "grumbo.v1");
}

#[test]
fn the_next_generation_is_past_every_subscription_and_plan() {
    let subs = [subscription("a", None, Some(2)), subscription("b", None, None)];
    assert_eq!(next_generation(&subs, &[]), 3);
    assert_eq!(next_generation(&[], &[]), 1);
    let plan: InstallPlan = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan", "metadata": {"name": "install-x", "namespace": "ops"},
        "spec": {"clusterServiceVersionNames": [], "approval": "Automatic", "approved": true, "generation": 7}}))
    .unwrap();
    assert_eq!(next_generation(&subs, &[plan]), 8);
}

#[test]
fn a_namespace_keeps_its_five_newest_plans_as_olm_collects_them() {
    let plan = |name: &str, generation: i64| -> InstallPlan {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
            "metadata": {"name": name, "namespace": "ops", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"clusterServiceVersionNames": [], "approval": "Automatic", "approved": true, "generation": generation}}))
        .unwrap()
    };
    let five: Vec<InstallPlan> = (1..=5).map(|g| plan(&format!("install-{g}"), g)).collect();
    assert!(plans_to_collect(&five).is_empty());
    let mut seven = five.clone();
    seven.push(plan("install-7", 7));
    seven.insert(0, plan("install-6", 6));
    assert_eq!(plans_to_collect(&seven), ["install-1", "install-2"], "the oldest generations, whatever the list order");
    let twelve: Vec<InstallPlan> = (1..=12).rev().map(|g| plan(&format!("install-{g:02}"), g)).collect();
    assert_eq!(plans_to_collect(&twelve).len(), 5, "at most five per sweep");
    assert_eq!(plans_to_collect(&twelve)[0], "install-01");
    let tied = [
        plan("install-b", 1),
        plan("install-a", 1),
        plan("install-c", 2),
        plan("install-d", 3),
        plan("install-e", 4),
        plan("install-f", 5),
    ];
    assert_eq!(plans_to_collect(&tied), ["install-a"], "one generation: by creation, then name");
}
