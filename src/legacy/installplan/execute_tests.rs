//! Tests of an InstallPlan's execution decisions.

use super::*;
use crate::api::v1alpha1::InstallPlanApproval;
use crate::legacy::installplan::plan::{initial_status, PlannedBundle};
use k8s_openapi::jiff::Timestamp;

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).expect("a time"))
}

const AUTHOR: &str = r#"{"username":"alice","groups":["team"]}"#;

fn bundle(csv: &str, package: &str, subscription: Option<&str>) -> PlannedBundle {
    PlannedBundle {
        csv: csv.into(),
        package: package.into(),
        channel: "stable".into(),
        image: format!("registry.example/{csv}@sha256:1"),
        catalog: "community".into(),
        catalog_namespace: "olm".into(),
        replaces: None,
        subscription: subscription.map(str::to_owned),
    }
}

fn plan(bundles: &[PlannedBundle]) -> InstallPlan {
    let mut plan: InstallPlan = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan", "metadata": {"name": "install-abcde", "namespace": "ops"},
        "spec": {"clusterServiceVersionNames": [], "approval": "Automatic", "approved": true, "generation": 1}}))
    .unwrap();
    plan.status = Some(initial_status("ops", InstallPlanApproval::Automatic, bundles));
    plan
}

fn subscription(name: &str, package: &str, current: Option<&str>, extra: Value) -> Subscription {
    let mut annotations = json!({CREATOR_ANNOTATION: AUTHOR});
    if let Some(extra) = extra.as_object() {
        for (key, value) in extra {
            annotations[key] = value.clone();
        }
    }
    serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": "ops", "annotations": annotations},
        "spec": {"source": "community", "sourceNamespace": "olm", "name": package, "startingCSV": current},
        "status": {"currentCSV": current, "installPlanRef": {"name": "install-abcde", "namespace": "ops"}}}))
    .unwrap()
}

fn install(subscription: &Subscription, csv: &str, state: Option<&str>, generation: i64, observed: i64) -> Install {
    let mut object = new_install(subscription, csv, &format!("registry.example/{csv}@sha256:1"));
    object["metadata"]["generation"] = json!(generation);
    object["metadata"]["resourceVersion"] = json!("42");
    object["status"] = json!({"state": state, "observedGeneration": observed});
    serde_json::from_value(object).unwrap()
}

/// One pass of `plan` over what is observed.
fn run(
    plan: &InstallPlan,
    subscriptions: &[Subscription],
    installs: &BTreeMap<String, Install>,
    now: &Time,
) -> Decision {
    decide(
        &Observed { plan, subscriptions, installs, retry_timeout: RETRY_TIMEOUT, installed_by_olm: &BTreeMap::new() },
        now,
    )
}

/// OLM's default `--install-plan-retry-timeout`.
const RETRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The patch a move makes, its author holding the grants or not.
fn patch_of(step: &Move, author_may_change: bool) -> Value {
    content_patch(&step.subscription, &step.csv, &step.image, author_may_change)
}

fn installed_condition(status: &InstallPlanStatus) -> (String, Option<String>, Option<String>) {
    let c = status.conditions.iter().find(|c| c.type_ == INSTALLED).expect("the Installed condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[test]
fn a_bundle_gets_an_install_made_on_behalf_of_its_subscriptions_author() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let decision = run(&plan, &subs, &BTreeMap::new(), &at(1));
    assert_eq!(decision.create_installs.len(), 1);
    let install = &decision.create_installs[0];
    assert_eq!(install["metadata"]["name"], "plumbus.ops");
    assert_eq!(install["metadata"]["annotations"][CREATOR_ANNOTATION], AUTHOR, "the author, not the controller");
    assert_eq!(install["metadata"]["annotations"][SUBSCRIPTION_ANNOTATION], "ops/plumbus");
    assert!(install["metadata"].get("ownerReferences").is_none(), "deleting a Subscription leaves the operator");
    assert_eq!(install["spec"]["namespaces"], json!([{"from": "default", "to": "ops"}]));
    assert_eq!(install["spec"]["content"][0]["manifestImage"], "registry.example/plumbus.v2@sha256:1");
    assert_eq!(decision.status.phase, InstallPlanPhase::Installing);
    assert_eq!(decision.status.start_time, Some(at(1)));
    assert_eq!(installed_condition(&decision.status).1.as_deref(), Some("Installing"));
}

#[test]
fn an_upgrade_of_an_operator_olm_v0_installed_takes_over_its_csv() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let mut upgrading = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    upgrading.status.as_mut().unwrap().installed_csv = Some("plumbus.v1".into());
    let installed_by_olm: BTreeMap<String, String> = [("plumbus.v1".to_owned(), "uid-v1".to_owned())].into();
    let observed = |subscriptions: &[Subscription], by_olm: &BTreeMap<String, String>| {
        let installs = BTreeMap::new();
        let observed = Observed {
            plan: &plan,
            subscriptions,
            installs: &installs,
            retry_timeout: RETRY_TIMEOUT,
            installed_by_olm: by_olm,
        };
        decide(&observed, &at(1)).create_installs[0].clone()
    };
    let install = observed(std::slice::from_ref(&upgrading), &installed_by_olm);
    let annotations = &install["metadata"]["annotations"];
    assert_eq!(annotations[TAKES_OVER_CSV_ANNOTATION], "ops/plumbus.v1");
    assert_eq!(annotations[TAKES_OVER_CSV_UID_ANNOTATION], "uid-v1");
    // An installed CSV an Install applied (not in the map), or none installed yet: nothing is taken over.
    let install = observed(std::slice::from_ref(&upgrading), &BTreeMap::new());
    assert!(install["metadata"]["annotations"].get(TAKES_OVER_CSV_ANNOTATION).is_none());
    let fresh = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    let install = observed(std::slice::from_ref(&fresh), &installed_by_olm);
    assert!(install["metadata"]["annotations"].get(TAKES_OVER_CSV_ANNOTATION).is_none());
    // A Subscription made again (no installed CSV in its status) for a newer bundle: the CSV it replaces.
    let mut replacing = bundle("plumbus.v2", "plumbus", Some("plumbus"));
    replacing.replaces = Some("plumbus.v1".into());
    let replacing_plan = self::plan(&[replacing]);
    let installs = BTreeMap::new();
    let fresh_subscriptions = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let replacing_observed = Observed {
        plan: &replacing_plan,
        subscriptions: &fresh_subscriptions,
        installs: &installs,
        retry_timeout: RETRY_TIMEOUT,
        installed_by_olm: &installed_by_olm,
    };
    let install = decide(&replacing_observed, &at(1)).create_installs[0].clone();
    assert_eq!(install["metadata"]["annotations"][TAKES_OVER_CSV_ANNOTATION], "ops/plumbus.v1");
    // A Subscription made again for a bundle whose CSV no Install applied: that very CSV is taken over.
    let again: BTreeMap<String, String> = [("plumbus.v2".to_owned(), "uid-v2".to_owned())].into();
    let install = observed(&[fresh], &again);
    assert_eq!(install["metadata"]["annotations"][TAKES_OVER_CSV_ANNOTATION], "ops/plumbus.v2");
    assert_eq!(install["metadata"]["annotations"][TAKES_OVER_CSV_UID_ANNOTATION], "uid-v2");
}

#[test]
fn an_install_waiting_for_approval_is_the_plan_s_message_and_once_installed_the_plan_completes() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let pending: BTreeMap<String, Install> =
        [("plumbus.ops".to_owned(), install(&subs[0], "plumbus.v2", Some("PendingApproval"), 1, 1))].into();
    let decision = run(&plan, &subs, &pending, &at(2));
    assert!(decision.create_installs.is_empty() && decision.update_installs.is_empty());
    let (state, reason, message) = installed_condition(&decision.status);
    assert_eq!((state.as_str(), reason.as_deref()), ("False", Some(INSTALL_PENDING_APPROVAL)));
    assert!(message.unwrap().contains("kubectl olmv2 approve plumbus.ops"));
    assert_eq!(decision.status.phase, InstallPlanPhase::Installing);

    let done: BTreeMap<String, Install> =
        [("plumbus.ops".to_owned(), install(&subs[0], "plumbus.v2", Some("Installed"), 1, 1))].into();
    let decision = run(&plan, &subs, &done, &at(3));
    assert_eq!(decision.status.phase, InstallPlanPhase::Complete);
    assert_eq!(installed_condition(&decision.status), ("True".into(), None, None));
    assert_eq!(decision.status.plan[0].status, STEP_CREATED);
    let mut applied = install(&subs[0], "plumbus.v2", Some("Installed"), 1, 1);
    applied.status.as_mut().unwrap().applied = serde_json::from_value(json!([
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "plumbai.how.theydoit.com"},
        {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ops", "name": "plumbus-operator"},
        {"apiVersion": "v1", "kind": "ServiceAccount", "namespace": "ops", "name": "plumbus"},
        {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "namespace": "ops", "name": "plumbus.v2"}
    ]))
    .unwrap();
    let applied: BTreeMap<String, Install> = [("plumbus.ops".to_owned(), applied)].into();
    let decision = run(&plan, &subs, &applied, &at(3));
    let steps: Vec<(String, String, String, String)> = decision
        .status
        .plan
        .iter()
        .map(|s| (s.resource.group.clone(), s.resource.version.clone(), s.resource.kind.clone(), s.status.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            ("operators.coreos.com".into(), "v1alpha1".into(), "ClusterServiceVersion".into(), "Created".into()),
            ("apiextensions.k8s.io".into(), "v1".into(), "CustomResourceDefinition".into(), "Created".into()),
            ("apps".into(), "v1".into(), "Deployment".into(), "Created".into()),
            ("".into(), "v1".into(), "ServiceAccount".into(), "Created".into()),
        ],
        "one step per object applied, the CSV once"
    );
    let stale: BTreeMap<String, Install> =
        [("plumbus.ops".to_owned(), install(&subs[0], "plumbus.v2", Some("Installed"), 2, 1))].into();
    let decision = run(&plan, &subs, &stale, &at(3));
    assert_eq!(decision.status.phase, InstallPlanPhase::Installing, "installed, but not at its current generation");
}

#[test]
fn an_upgrade_moves_the_existing_install_to_the_new_bundle_at_the_version_read() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let old: BTreeMap<String, Install> =
        [("plumbus.ops".to_owned(), install(&subs[0], "plumbus.v1", Some("Installed"), 1, 1))].into();
    let decision = run(&plan, &subs, &old, &at(2));
    assert_eq!(decision.update_installs.len(), 1);
    let step = &decision.update_installs[0];
    let (name, version) = (step.install.name_any(), step.install.metadata.resource_version.clone());
    assert_eq!((name.as_str(), version.as_deref()), ("plumbus.ops", Some("42")));
    let patch = patch_of(step, true);
    assert_eq!(patch["spec"]["content"][0]["manifestImage"], "registry.example/plumbus.v2@sha256:1");
    assert_eq!(patch["metadata"]["annotations"][BUNDLE_ANNOTATION], "plumbus.v2");
    assert!(patch["spec"].get("approval").is_none(), "an author holding the grants keeps the approval");
    assert!(patch["metadata"]["annotations"].get(CONTENT_CHANGED_BY_ANNOTATION).is_none());
}

#[test]
fn new_content_chosen_by_an_author_who_does_not_hold_the_grants_waits_for_a_person() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let old: BTreeMap<String, Install> =
        [("plumbus.ops".to_owned(), install(&subs[0], "plumbus.v1", Some("Installed"), 1, 1))].into();
    let decision = run(&plan, &subs, &old, &at(2));
    let patch = patch_of(&decision.update_installs[0], false);
    assert_eq!(patch["spec"]["approval"], "Unapproved");
    assert_eq!(patch["metadata"]["annotations"][CONTENT_CHANGED_BY_ANNOTATION], "alice");
}

#[test]
fn an_install_someone_else_made_under_the_name_is_never_taken_over() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    // Mallory's own Install of that name: she cannot write which Subscription it serves (the webhook refuses).
    let mallory = subscription("plumbus", "plumbus", None, json!({CREATOR_ANNOTATION: r#"{"username":"mallory"}"#}));
    let mut hers = install(&mallory, "plumbus.v1", Some("Installed"), 1, 1);
    hers.metadata.annotations.as_mut().unwrap().remove(SUBSCRIPTION_ANNOTATION);
    let squatted: BTreeMap<String, Install> = [("plumbus.ops".to_owned(), hers)].into();
    let decision = run(&plan, &subs, &squatted, &at(2));
    assert!(decision.update_installs.is_empty() && decision.create_installs.is_empty());
    let (state, reason, message) = installed_condition(&decision.status);
    assert_eq!((state.as_str(), reason.as_deref()), ("False", Some(INSTALL_COMPONENT_FAILED)));
    assert!(message.unwrap().contains("was not made for Subscription ops/plumbus"));
}

#[test]
fn a_dependency_s_subscription_is_generated_as_olm_marks_it_then_its_install_follows() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus")), bundle("grumbo.v1", "grumbo", None)]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let decision = run(&plan, &subs, &BTreeMap::new(), &at(1));
    assert_eq!(decision.create_subscriptions.len(), 1);
    let generated = &decision.create_subscriptions[0];
    assert_eq!(generated["metadata"]["name"], "grumbo-stable-community-olm");
    assert_eq!(generated["metadata"]["labels"][MANAGED_LABEL], "true");
    assert_eq!(generated["metadata"]["annotations"][GENERATED_BY_ANNOTATION], "install-abcde");
    assert_eq!(generated["metadata"]["annotations"][CREATOR_ANNOTATION], AUTHOR);
    let step = decision.status.plan.iter().find(|s| s.resource.kind == "Subscription").unwrap();
    assert_eq!(step.status, STEP_CREATED);

    let with_generated = [
        subs[0].clone(),
        subscription("grumbo-stable-community-olm", "grumbo", None, json!({GENERATED_BY_ANNOTATION: "install-abcde"})),
    ];
    let mut generated_sub = with_generated[1].clone();
    generated_sub.spec.starting_csv = Some("grumbo.v1".into());
    let with_generated = [with_generated[0].clone(), generated_sub];
    let decision = run(&plan, &with_generated, &BTreeMap::new(), &at(2));
    assert!(decision.create_subscriptions.is_empty());
    let names: Vec<&str> = decision.create_installs.iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["plumbus.ops", "grumbo.ops"]);
}

#[test]
fn a_subscriptions_config_is_its_installs_deployment_configuration_and_a_change_of_it_is_new_content() {
    let mut configured = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    configured.spec.config =
        Some(serde_json::from_value(json!({"env": [{"name": "LOG_LEVEL", "value": "debug"}]})).unwrap());
    let image = "registry.example/plumbus.v2@sha256:1";
    let created = new_install(&configured, "plumbus.v2", image);
    assert_eq!(created["spec"]["content"][0]["config"]["env"][0]["value"], "debug");
    let install: Install = serde_json::from_value(created).unwrap();
    assert!(holds_content(&install, &configured, image));
    let plain = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    assert!(!holds_content(&install, &plain, image), "the configuration removed is a change too");
    assert!(!holds_content(&install, &configured, "registry.example/plumbus.v3@sha256:1"));
    let patch = content_patch(&plain, "plumbus.v2", image, true);
    assert!(patch["spec"]["content"][0].get("config").is_none());
    assert!(patch["spec"].get("approval").is_none());
    let marked = content_patch(&configured, "plumbus.v2", image, false);
    assert_eq!(marked["spec"]["approval"], "Unapproved");
    assert_eq!(marked["spec"]["content"][0]["config"]["env"][0]["name"], "LOG_LEVEL");
}

fn failed_install(subscription: &Subscription, reason: &str, message: &str) -> BTreeMap<String, Install> {
    let mut failed = install(subscription, "plumbus.v2", Some("Failed"), 1, 1);
    failed.status.as_mut().unwrap().conditions = vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: "Installed".into(),
        status: "False".into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: at(1),
        observed_generation: None,
    }];
    [("plumbus.ops".to_owned(), failed)].into()
}

#[test]
fn a_failed_install_is_retried_then_fails_the_plan_in_its_own_words_after_the_retry_timeout() {
    let mut plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let installs =
        failed_install(&subs[0], "CRDUpgradeUnsafe", "risk of data loss updating \"plumbai.how.theydoit.com\"");
    let first = run(&plan, &subs, &installs, &at(2));
    let (state, reason, message) = installed_condition(&first.status);
    assert_eq!((state.as_str(), reason.as_deref()), ("False", Some(INSTALL_COMPONENT_FAILED)));
    let words = "Install plumbus.ops: risk of data loss updating \"plumbai.how.theydoit.com\"";
    assert_eq!(message.as_deref(), Some(words));
    assert_eq!(first.status.phase, InstallPlanPhase::Installing, "retried first, as OLM retries");
    assert_eq!(first.status.message, Some(format!("retrying execution due to error: {words}")));
    assert!(first.retrying);
    assert_eq!(first.status.start_time, Some(at(2)));

    plan.status = Some(first.status);
    let still = run(&plan, &subs, &installs, &at(61));
    assert_eq!(still.status.phase, InstallPlanPhase::Installing, "59 s after it started");
    let failed = run(&plan, &subs, &installs, &at(62));
    assert_eq!(failed.status.phase, InstallPlanPhase::Failed, "the retry timeout passed");
    assert_eq!(failed.status.message.as_deref(), Some(words));
    assert!(!failed.retrying);
    assert_eq!(installed_condition(&failed.status).1.as_deref(), Some(INSTALL_COMPONENT_FAILED));
}

#[test]
fn time_waiting_for_a_person_does_not_count_toward_the_retry_timeout() {
    let mut plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    plan.status.as_mut().unwrap().start_time = Some(at(0));
    let waiting: BTreeMap<String, Install> =
        [("plumbus.ops".to_owned(), install(&subs[0], "plumbus.v2", Some("PendingApproval"), 1, 1))].into();
    let pending = run(&plan, &subs, &waiting, &at(3600));
    assert_eq!(pending.status.start_time, Some(at(3600)), "the clock starts again after the wait");
    plan.status = Some(pending.status);
    let installs = failed_install(&subs[0], "CRDUpgradeUnsafe", "risk of data loss");
    let failing = run(&plan, &subs, &installs, &at(3601));
    assert_eq!(failing.status.phase, InstallPlanPhase::Installing, "retried: a second after the wait ended");
}

#[test]
fn a_forbidden_install_is_retried_for_ever_as_olm_retries_it() {
    let mut plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let installs = failed_install(&subs[0], "ApplyForbidden", "failed to apply Deployment ops/plumbus");
    plan.status.as_mut().unwrap().start_time = Some(at(0));
    let decision = run(&plan, &subs, &installs, &at(3600));
    assert_eq!(decision.status.phase, InstallPlanPhase::Installing);
    assert!(decision.retrying);
}

#[test]
fn a_subscription_edited_by_someone_else_keeps_its_install() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let original = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    let made: BTreeMap<String, Install> =
        [("plumbus.ops".to_owned(), install(&original, "plumbus.v1", Some("Installed"), 1, 1))].into();
    let edited =
        [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({CREATOR_ANNOTATION: r#"{"username":"bob"}"#}))];
    let decision = run(&plan, &edited, &made, &at(2));
    assert_eq!(decision.update_installs.len(), 1, "still the Subscription's Install");
    let patch = patch_of(&decision.update_installs[0], false);
    assert_eq!(patch["metadata"]["annotations"][CONTENT_CHANGED_BY_ANNOTATION], "bob", "judged as its author now");
}

#[test]
fn a_plan_no_subscription_points_at_moves_nothing_and_a_dependency_is_made_only_for_one_author() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus")), bundle("grumbo.v1", "grumbo", None)]);
    let mut superseded = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    superseded.status.as_mut().unwrap().install_plan_ref.as_mut().unwrap().name = Some("install-newer".into());
    let decision = run(&plan, &[superseded], &BTreeMap::new(), &at(1));
    assert!(decision.create_installs.is_empty(), "a superseded plan moves nothing");
    let generated = &decision.create_subscriptions[0];
    assert!(generated["metadata"]["annotations"].get(CREATOR_ANNOTATION).is_none(), "nobody asked: nobody's behalf");

    let alice = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    let mut bob =
        subscription("other", "other", Some("other.v1"), json!({CREATOR_ANNOTATION: r#"{"username":"bob"}"#}));
    bob.status.as_mut().unwrap().install_plan_ref = alice.status.as_ref().unwrap().install_plan_ref.clone();
    let decision = run(&plan, &[alice.clone(), bob], &BTreeMap::new(), &at(1));
    assert!(
        decision.create_subscriptions[0]["metadata"]["annotations"].get(CREATOR_ANNOTATION).is_none(),
        "two authors asked: the dependency is made on behalf of neither"
    );
    let decision = run(&plan, &[alice], &BTreeMap::new(), &at(1));
    assert_eq!(decision.create_subscriptions[0]["metadata"]["annotations"][CREATOR_ANNOTATION], AUTHOR);
}

#[test]
fn a_manual_subscription_s_install_waits_for_a_person_on_every_change_and_one_without_an_author_has_no_creator() {
    let mut careful = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    careful.spec.install_plan_approval = Some(crate::api::v1alpha1::InstallPlanApproval::Manual);
    let created = new_install(&careful, "plumbus.v2", "r/plumbus@sha256:1");
    assert_eq!(created["metadata"]["annotations"][MANUAL_APPROVAL_ANNOTATION], "true");
    let patch = content_patch(&careful, "plumbus.v2", "r/plumbus@sha256:2", true);
    assert_eq!(patch["spec"]["approval"], "Unapproved", "even an author holding the grants");
    assert_eq!(patch["metadata"]["annotations"][MANUAL_APPROVAL_ANNOTATION], "true");
    let automatic = subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}));
    let lifted = content_patch(&automatic, "plumbus.v2", "r/plumbus@sha256:2", true);
    assert!(lifted["metadata"]["annotations"][MANUAL_APPROVAL_ANNOTATION].is_null(), "switched to Automatic: lifted");
    let mut anonymous = automatic.clone();
    anonymous.metadata.annotations = None;
    let created = new_install(&anonymous, "plumbus.v2", "r/plumbus@sha256:1");
    assert!(created["metadata"]["annotations"].get(CREATOR_ANNOTATION).is_none());
    let typed: Install = serde_json::from_value(created).expect("an Install, no null creator");
    assert!(typed.annotations().get(CREATOR_ANNOTATION).is_none());
}

#[test]
fn a_bundle_without_an_image_is_a_failure_not_an_empty_install() {
    let mut inline = bundle("plumbus.v2", "plumbus", Some("plumbus"));
    inline.image = String::new();
    let plan = plan(&[inline]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let decision = run(&plan, &subs, &BTreeMap::new(), &at(1));
    assert!(decision.create_installs.is_empty());
    let (_, reason, message) = installed_condition(&decision.status);
    assert_eq!(reason.as_deref(), Some(INSTALL_COMPONENT_FAILED));
    assert!(message.unwrap().contains("has no image"));
}

#[test]
fn an_install_running_as_the_operator_group_account_is_olm_s_attenuated_account() {
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    for (namespace, attenuated) in [("ops", true), ("olmv2-system", false)] {
        let mut running = install(&subs[0], "plumbus.v2", Some("Applying"), 1, 1);
        running.status.as_mut().unwrap().service_account_ref = Some(crate::api::v2alpha1::ServiceAccountReference {
            name: "operator".into(),
            namespace: namespace.into(),
        });
        let installs: BTreeMap<String, Install> = [("plumbus.ops".to_owned(), running)].into();
        let decision = run(&plan, &subs, &installs, &at(1));
        let reference = decision.status.attenuated_service_account_ref;
        assert_eq!(reference.is_some(), attenuated, "{namespace}");
        if let Some(reference) = reference {
            assert_eq!(
                (reference.kind.as_deref(), reference.name.as_deref()),
                (Some("ServiceAccount"), Some("operator"))
            );
        }
    }
}

#[test]
fn a_plan_is_looked_at_soon_while_it_works_now_and_then_while_it_waits_and_never_once_done() {
    const RETRY: std::time::Duration = std::time::Duration::from_secs(5);
    const RESYNC: std::time::Duration = std::time::Duration::from_secs(600);
    let plan = plan(&[bundle("plumbus.v2", "plumbus", Some("plumbus"))]);
    let subs = [subscription("plumbus", "plumbus", Some("plumbus.v2"), json!({}))];
    let creating = run(&plan, &subs, &BTreeMap::new(), &at(1));
    assert_eq!(next_action(&creating, RETRY, RESYNC), Action::requeue(RETRY), "an Install just created");
    let waiting = Decision { create_installs: Vec::new(), ..creating.clone() };
    assert_eq!(next_action(&waiting, RETRY, RESYNC), Action::requeue(RESYNC));
    let retrying = Decision { retrying: true, ..waiting.clone() };
    assert_eq!(next_action(&retrying, RETRY, RESYNC), Action::requeue(RETRY));
    for phase in [InstallPlanPhase::Complete, InstallPlanPhase::Failed] {
        let done = Decision { status: InstallPlanStatus { phase, ..waiting.status.clone() }, ..retrying.clone() };
        assert_eq!(next_action(&done, RETRY, RESYNC), Action::await_change(), "{phase:?}");
    }
}
