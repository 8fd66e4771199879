use super::*;
use crate::api::v2alpha1::{AppliedObject, InstallStatus};
use crate::controller::conditions::transitions;
use crate::controller::conditions::v2alpha1::INSTALLED;
use crate::operator::components::CsvFacts;
use semver::Version;

fn time(text: &str) -> Time {
    Time(text.parse().expect("timestamp"))
}

fn condition(type_: &str, status: &str, reason: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: "m".into(),
        last_transition_time: time("2026-01-01T00:00:00Z"),
        observed_generation: Some(1),
    }
}

fn csv(name: &str, version: &str, phase: &str) -> Component {
    Component {
        reference: ComponentRef {
            kind: "ClusterServiceVersion".into(),
            api_version: "operators.coreos.com/v1alpha1".into(),
            namespace: Some("operators".into()),
            name: name.into(),
            ..ComponentRef::default()
        },
        csv: Some(Box::new(CsvFacts {
            phase: phase.into(),
            version: Version::parse(version).ok(),
            display_name: Some(format!("Plumbus {version}")),
            ..CsvFacts::default()
        })),
        projects_to: Vec::new(),
    }
}

fn install(state: InstallState, conditions: Vec<Condition>, applied: Vec<AppliedObject>) -> Install {
    let mut install =
        Install::new("plumbus", serde_json::from_value(serde_json::json!({"content": []})).expect("spec"));
    install.metadata.annotations =
        Some([(super::super::desired::BUNDLE_ANNOTATION.to_owned(), "plumbus.v1".to_owned())].into());
    install.status = Some(InstallStatus { state: Some(state), conditions, applied, ..InstallStatus::default() });
    install
}

fn resolved(bundle: &str, available: Vec<AvailableUpdate>) -> SourceOutcome {
    SourceOutcome::Resolved {
        image: "i".into(),
        bundle: Some(bundle.into()),
        version: None,
        available,
        dependencies: Vec::new(),
        holding: false,
    }
}

fn observe<'a>(
    components: &'a [Component],
    install: Option<&'a Install>,
    source: &'a SourceOutcome,
    previous: &'a [Condition],
) -> OperatorStatus {
    let observed = Observed {
        name: "plumbus",
        generation: Some(2),
        previous,
        components,
        install,
        dependencies: &[],
        source,
        installed_bundle: install.and_then(super::super::desired::installed_bundle),
        adopted_from: None,
    };
    status(&observed, &time("2026-11-21T12:00:00Z"))
}

fn find<'a>(status: &'a OperatorStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).expect("condition present")
}

#[test]
fn an_adopted_operator_says_where_it_came_from_and_it_is_news() {
    let mut install = install(InstallState::Installed, vec![], vec![]);
    install.metadata.name = Some("plumbus.ops".into());
    let source = resolved("plumbus.v1", vec![]);
    let observed = Observed {
        name: "plumbus",
        generation: Some(2),
        previous: &[],
        components: &[],
        install: Some(&install),
        dependencies: &[],
        source: &source,
        installed_bundle: super::super::desired::installed_bundle(&install),
        adopted_from: Some("Subscription ops/plumbus"),
    };
    let adopted = status(&observed, &time("2026-11-21T12:00:00Z"));
    let condition = find(&adopted, ADOPTED);
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", "AdoptedFromSubscription"));
    assert!(
        condition.message.contains("Subscription ops/plumbus and its Install plumbus.ops"),
        "{}",
        condition.message
    );
    let events = transitions(&[], &adopted.conditions, &EVENTS);
    let event = events.iter().find(|t| t.reason == "AdoptedFromSubscription").expect("an event");
    assert!(!event.warning, "news, not a warning");
    let plain = observe(&[], Some(&install), &source, &[]);
    assert!(plain.conditions.iter().all(|c| c.type_ != ADOPTED), "only adopted Operators carry it");
    // Until the Install has applied under the Operator, what it applied is not labelled yet: not a divergence.
    let diverge = find(&adopted, COMPONENTS_DIVERGE);
    assert_eq!((diverge.status.as_str(), diverge.reason.as_str()), ("Unknown", "AdoptionPending"));
    let mut applied_since = install.clone();
    applied_since.status.as_mut().unwrap().adopted_from = Some("Subscription ops/plumbus".into());
    let settled = Observed { install: Some(&applied_since), ..observed };
    let diverge = status(&settled, &time("2026-11-21T12:00:00Z"));
    assert_eq!(find(&diverge, COMPONENTS_DIVERGE).reason, "ComponentsMatchInstall");
}

#[test]
fn metadata_comes_from_the_newest_succeeded_csv() {
    let components = [
        csv("plumbus.v1", "1.0.0", "Succeeded"),
        csv("plumbus.v3", "3.0.0", "Installing"),
        csv("plumbus.v2", "2.0.0", "Succeeded"),
    ];
    let newest = metadata(&components).expect("metadata");
    assert_eq!(newest.version.as_deref(), Some("2.0.0"));
    assert_eq!(newest.display_name.as_deref(), Some("Plumbus 2.0.0"));
    assert_eq!(metadata(&components[1..2]), None, "no Succeeded CSV, no metadata");
}

#[test]
fn the_selector_and_refs_are_reported_and_a_bare_operator_only_gathers() {
    let components = [csv("plumbus.v1", "1.0.0", "Succeeded")];
    let status = observe(&components, None, &SourceOutcome::NoSource, &[]);
    let gathered = status.components.clone().expect("components");
    assert_eq!(gathered.match_labels.keys().next().map(String::as_str), Some("v2alpha1.operators.coreos.com/plumbus"));
    assert_eq!(gathered.refs.len(), 1);
    assert_eq!(status.state, Some(OperatorState::Installed));
    assert_eq!(find(&status, UPDATE_AVAILABLE).reason, "NoUpdateSource");
    assert_eq!(status.conditions.len(), 5);
    assert!(status.conditions.iter().all(|c| c.observed_generation == Some(2)));
}

#[test]
fn a_pending_install_asks_for_privilege_escalation_or_manual_approval() {
    let pending = install(
        InstallState::PendingApproval,
        vec![condition(PENDING_APPROVAL, "True", "UnsatisfiedPermissions")],
        vec![],
    );
    let status = observe(&[], Some(&pending), &resolved("plumbus.v1", vec![]), &[]);
    let found = find(&status, INSTALL_PENDING_APPROVAL);
    assert_eq!((found.status.as_str(), found.reason.as_str()), ("True", PRIVILEGE_ESCALATION_REQUIRED));
    assert_eq!(status.state, Some(OperatorState::PendingApproval));
    let manual = install(
        InstallState::PendingApproval,
        vec![condition(PENDING_APPROVAL, "True", UPDATE_APPROVAL_REQUIRED)],
        vec![],
    );
    let status = observe(&[], Some(&manual), &resolved("plumbus.v1", vec![]), &[]);
    assert_eq!(find(&status, INSTALL_PENDING_APPROVAL).reason, UPDATE_APPROVAL_REQUIRED);
}

#[test]
fn import_errors_come_from_the_install_or_the_source() {
    let failed =
        install(InstallState::Failed, vec![condition(CONTENT_IMPORT_ERROR, "True", "ManifestImagePullFailed")], vec![]);
    let status = observe(&[], Some(&failed), &resolved("plumbus.v1", vec![]), &[]);
    assert_eq!(find(&status, CONTENT_IMPORT_ERROR).reason, "ManifestImagePullFailed");
    assert_eq!(status.state, Some(OperatorState::Failed));
    let source = SourceOutcome::Failed { reason: "CatalogImagePullFailed", message: "registry down".into() };
    let status = observe(&[], None, &source, &[]);
    let found = find(&status, CONTENT_IMPORT_ERROR);
    assert_eq!((found.status.as_str(), found.message.as_str()), ("True", "registry down"));
    assert_eq!(find(&status, UPDATE_AVAILABLE).status, "Unknown");
}

#[test]
fn updates_in_the_channel_and_in_other_channels_are_available() {
    let applied = vec![AppliedObject {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("operators".into()),
        name: "c".into(),
    }];
    let installed = install(InstallState::Installed, vec![condition(INSTALLED, "True", "ContentApplied")], applied);
    let beta = AvailableUpdate { package: "plumbus".into(), channel: "beta".into(), version: Some("3.0.0".into()) };
    let status = observe(&[], Some(&installed), &resolved("plumbus.v1", vec![beta.clone()]), &[]);
    assert_eq!(find(&status, UPDATE_AVAILABLE).reason, UPDATE_FOUND_IN_ANOTHER_CHANNEL);
    assert_eq!(status.updates.clone().expect("updates").available, vec![beta]);
    let moving = observe(&[], Some(&installed), &resolved("plumbus.v2", vec![]), &[]);
    let found = find(&moving, UPDATE_AVAILABLE);
    assert_eq!((found.status.as_str(), found.reason.as_str()), ("True", UPDATE_FOUND_IN_CHANNEL));
    assert_eq!(moving.state, Some(OperatorState::Installing), "the Install holds the older bundle still");
    let fresh = install(InstallState::Applying, vec![], vec![]);
    let first = observe(&[], Some(&fresh), &resolved("plumbus.v1", vec![]), &[]);
    assert_eq!(find(&first, UPDATE_AVAILABLE).status, "False", "a first install is no update");
}

#[test]
fn components_missing_from_what_the_install_applied_diverge() {
    let applied = vec![AppliedObject {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        namespace: Some("operators".into()),
        name: "plumbus".into(),
    }];
    let installed = install(InstallState::Installed, vec![condition(INSTALLED, "True", "ContentApplied")], applied);
    let status = observe(&[], Some(&installed), &resolved("plumbus.v1", vec![]), &[]);
    let found = find(&status, COMPONENTS_DIVERGE);
    assert_eq!((found.status.as_str(), found.reason.as_str()), ("True", COMPONENTS_DIVERGE_FROM_INSTALL));
    assert!(found.message.contains("Deployment operators/plumbus"), "{}", found.message);
    let drifted = install(
        InstallState::Installed,
        vec![condition(COMPONENTS_DIVERGE, "True", "ComponentsDivergeFromResolvedContent")],
        vec![],
    );
    let status = observe(&[], Some(&drifted), &resolved("plumbus.v1", vec![]), &[]);
    assert_eq!(find(&status, COMPONENTS_DIVERGE).reason, "ComponentsDivergeFromResolvedContent");
}

#[test]
fn transition_times_stay_while_the_status_stays() {
    let previous = [
        condition(INSTALL_PENDING_APPROVAL, "False", "NoInstallPendingApproval"),
        condition(UPDATE_AVAILABLE, "True", "X"),
    ];
    let status = observe(&[], None, &SourceOutcome::NoSource, &previous);
    assert_eq!(find(&status, INSTALL_PENDING_APPROVAL).last_transition_time, time("2026-01-01T00:00:00Z"));
    assert_eq!(find(&status, UPDATE_AVAILABLE).last_transition_time, time("2026-11-21T12:00:00Z"));
}

#[test]
fn an_install_still_rolling_out_keeps_the_operator_installing() {
    let rolling = install(InstallState::Applying, vec![condition(INSTALLED, "True", "ContentApplied")], vec![]);
    let status = observe(&[], Some(&rolling), &resolved("plumbus.v1", vec![]), &[]);
    assert_eq!(status.state, Some(OperatorState::Installing));
    let done = install(InstallState::Installed, vec![condition(INSTALLED, "True", "ContentApplied")], vec![]);
    let status = observe(&[], Some(&done), &resolved("plumbus.v1", vec![]), &[]);
    assert_eq!(status.state, Some(OperatorState::Installed));
}

fn dependency_install(name: &str, bundle: &str, state: InstallState, conditions: Vec<Condition>) -> Install {
    let mut dependency = install(state, conditions, vec![]);
    dependency.metadata.name = Some(name.into());
    dependency.metadata.annotations =
        Some([(super::super::desired::BUNDLE_ANNOTATION.to_owned(), bundle.to_owned())].into());
    dependency
}

fn with_dependency(bundle: &str) -> SourceOutcome {
    let dependency = Dependency {
        install: "plumbus.requires.grumbo".into(),
        package: "grumbo".into(),
        bundle: bundle.into(),
        version: "1.0.0".into(),
        image: "g".into(),
    };
    match resolved("plumbus.v1", vec![]) {
        SourceOutcome::Resolved { image, bundle, version, available, .. } => SourceOutcome::Resolved {
            image,
            bundle,
            version,
            available,
            dependencies: vec![dependency],
            holding: false,
        },
        other => other,
    }
}

fn observe_with(main: &Install, dependencies: &[Install], source: &SourceOutcome) -> OperatorStatus {
    let observed = Observed {
        name: "plumbus",
        generation: Some(2),
        previous: &[],
        components: &[],
        install: Some(main),
        dependencies,
        source,
        installed_bundle: super::super::desired::installed_bundle(main),
        adopted_from: None,
    };
    status(&observed, &time("2026-11-21T12:00:00Z"))
}

#[test]
fn an_operator_is_installed_only_once_each_dependency_is_installed_at_its_bundle() {
    let done = install(InstallState::Installed, vec![condition(INSTALLED, "True", "ContentApplied")], vec![]);
    let source = with_dependency("grumbo.v1.0.0");
    assert_eq!(observe_with(&done, &[], &source).state, Some(OperatorState::Installing), "not made yet");
    let old = dependency_install("plumbus.requires.grumbo", "grumbo.v0.9.0", InstallState::Installed, vec![]);
    assert_eq!(observe_with(&done, &[old], &source).state, Some(OperatorState::Installing), "another bundle");
    let applying = dependency_install("plumbus.requires.grumbo", "grumbo.v1.0.0", InstallState::Applying, vec![]);
    assert_eq!(observe_with(&done, &[applying], &source).state, Some(OperatorState::Installing));
    let there = dependency_install("plumbus.requires.grumbo", "grumbo.v1.0.0", InstallState::Installed, vec![]);
    assert_eq!(observe_with(&done, &[there], &source).state, Some(OperatorState::Installed));
    let failed = dependency_install(
        "plumbus.requires.grumbo",
        "grumbo.v1.0.0",
        InstallState::Failed,
        vec![condition(CONTENT_IMPORT_ERROR, "True", "ManifestImagePullFailed")],
    );
    let status = observe_with(&done, &[failed], &source);
    assert_eq!(status.state, Some(OperatorState::Failed));
    let error = find(&status, CONTENT_IMPORT_ERROR);
    assert_eq!(error.reason, "ManifestImagePullFailed");
    assert!(error.message.starts_with("Install plumbus.requires.grumbo: "), "{}", error.message);
}

#[test]
fn a_dependency_no_longer_needed_says_nothing_of_the_operator() {
    let done = install(InstallState::Installed, vec![condition(INSTALLED, "True", "ContentApplied")], vec![]);
    let stale = dependency_install("plumbus.requires.fleeb", "fleeb.v1.0.0", InstallState::Failed, vec![]);
    let needed = with_dependency("grumbo.v1.0.0");
    let grumbo = dependency_install("plumbus.requires.grumbo", "grumbo.v1.0.0", InstallState::Installed, vec![]);
    let status = observe_with(&done, &[grumbo, stale.clone()], &needed);
    assert_eq!(status.state, Some(OperatorState::Installed));
    let gathering = observe_with(&done, &[stale], &SourceOutcome::NoSource);
    assert_eq!(gathering.state, Some(OperatorState::Failed), "without a resolution, every one counts");
}

#[test]
fn pending_approval_names_every_install_that_waits_and_how_to_approve_it() {
    let escalating = || vec![condition(PENDING_APPROVAL, "True", "UnsatisfiedPermissions")];
    let main = install(InstallState::PendingApproval, escalating(), vec![]);
    let grumbo =
        dependency_install("plumbus.requires.grumbo", "grumbo.v1.0.0", InstallState::PendingApproval, escalating());
    let source = with_dependency("grumbo.v1.0.0");
    let status = observe_with(&main, std::slice::from_ref(&grumbo), &source);
    let found = find(&status, INSTALL_PENDING_APPROVAL);
    assert_eq!(found.reason, PRIVILEGE_ESCALATION_REQUIRED);
    assert_eq!(
        found.message,
        "Installs plumbus, plumbus.requires.grumbo require privilege escalation approved by an authorized user \
         (`olmv2 approve plumbus`, `olmv2 approve plumbus.requires.grumbo`)"
    );
    assert_eq!(status.state, Some(OperatorState::PendingApproval));
    // Only the dependency waits: the Operator still waits, and says for which.
    let done = install(InstallState::Installed, vec![condition(INSTALLED, "True", "ContentApplied")], vec![]);
    let status = observe_with(&done, &[grumbo], &source);
    assert_eq!(status.state, Some(OperatorState::PendingApproval));
    assert_eq!(
        find(&status, INSTALL_PENDING_APPROVAL).message,
        "Install plumbus.requires.grumbo requires privilege escalation approved by an authorized user \
         (`olmv2 approve plumbus.requires.grumbo`)"
    );
    let manual = dependency_install(
        "plumbus.requires.grumbo",
        "grumbo.v1.0.0",
        InstallState::PendingApproval,
        vec![condition(PENDING_APPROVAL, "True", UPDATE_APPROVAL_REQUIRED)],
    );
    let status = observe_with(&done, &[manual], &source);
    let found = find(&status, INSTALL_PENDING_APPROVAL);
    assert_eq!(found.reason, UPDATE_APPROVAL_REQUIRED);
    assert_eq!(found.message, "updates are approved by hand: Install plumbus.requires.grumbo waits for approval");
}

#[test]
fn an_install_over_a_policy_is_named_and_is_the_operators_state() {
    let mut over = condition(EXCEEDS_POLICY, "True", "ContentExceedsPolicy");
    over.message = "the content exceeds a policy".into();
    let main = install(InstallState::ExceedsPolicy, vec![over], vec![]);
    let status = observe_with(&main, &[], &resolved("plumbus.v2", vec![]));
    assert_eq!(status.state, Some(OperatorState::ExceedsPolicy));
    let found = find(&status, INSTALL_EXCEEDS_POLICY);
    assert_eq!((found.status.as_str(), found.reason.as_str()), ("True", "ContentExceedsPolicy"));
    assert_eq!(found.message, "Install plumbus: the content exceeds a policy");
    let done = install(InstallState::Installed, vec![condition(EXCEEDS_POLICY, "False", "WithinPolicy")], vec![]);
    let status = observe_with(&done, &[], &resolved("plumbus.v2", vec![]));
    assert_eq!(find(&status, INSTALL_EXCEEDS_POLICY).reason, "NoInstallExceedsPolicy");
}
