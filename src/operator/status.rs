//! An Operator's status from what was observed: its components, its own Install, and what its update source says.
//! Pure: the reconciler gathers the inputs and writes the result.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::components::Component;
use super::dependencies::Dependency;
use super::desired::installed_bundle;
use crate::api::component::component_label_key;
use crate::api::v2alpha1::{
    AvailableUpdate, ComponentRef, Components, Install, InstallState, OperatorApis, OperatorMetadata, OperatorState,
    OperatorStatus, UpdatesStatus,
};
use crate::controller::conditions::v2alpha1::{
    COMPONENTS_DIVERGE, CONTENT_IMPORT_ERROR, EXCEEDS_POLICY, PENDING_APPROVAL, UPDATE_APPROVAL_REQUIRED,
};
use crate::controller::conditions::{self, EventPolicy, Wanted, TRUE};

pub const UPDATE_AVAILABLE: &str = "UpdateAvailable";
pub const INSTALL_PENDING_APPROVAL: &str = "InstallPendingApproval";
pub const PRIVILEGE_ESCALATION_REQUIRED: &str = "PrivilegeEscalationRequired";
pub const UPDATE_FOUND_IN_ANOTHER_CHANNEL: &str = "UpdateFoundInAnotherChannel";
pub const UPDATE_FOUND_IN_CHANNEL: &str = "UpdateFoundInChannel";
pub const COMPONENTS_DIVERGE_FROM_INSTALL: &str = "ComponentsDivergeFromInstall";
/// True while one of the Operator's Installs exceeds an InstallPolicy (docs/policy.md).
pub const INSTALL_EXCEEDS_POLICY: &str = "InstallExceedsPolicy";
/// Set on an Operator that adopted a Subscription and its Install (`docs/migration.md`).
pub const ADOPTED: &str = "Adopted";

/// An Operator's five conditions are abnormal when True; an update found is still a Normal event, and so is an
/// adoption (a sixth condition, only on an Operator that adopted a Subscription).
pub const EVENTS: EventPolicy =
    EventPolicy { abnormal: |condition| condition.status == TRUE, normal_types: &[UPDATE_AVAILABLE, ADOPTED] };

/// What the update source said this reconcile.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceOutcome {
    /// The Operator names no source: it only gathers components.
    NoSource,
    /// A bundle to install (`bundle` is its catalog name, when it came from a catalog), the bundles it depends on
    /// (each for an Install of its own), and the channels that hold newer versions.
    Resolved {
        image: String,
        bundle: Option<String>,
        version: Option<String>,
        available: Vec<AvailableUpdate>,
        dependencies: Vec<Dependency>,
        /// The Operator's Install is still installing (or waiting for a person): its bundle was kept, and what the
        /// source says now waits for the next pass.
        holding: bool,
    },
    /// The source could not be read or resolved; `reason` is the error's category.
    Failed { reason: &'static str, message: String },
}

/// Everything an Operator's status is computed from.
pub struct Observed<'a> {
    pub name: &'a str,
    pub generation: Option<i64>,
    pub previous: &'a [Condition],
    pub components: &'a [Component],
    pub install: Option<&'a Install>,
    /// The Installs the Operator owns for its dependencies.
    pub dependencies: &'a [Install],
    pub source: &'a SourceOutcome,
    /// The bundle the Install holds now, from its annotation.
    pub installed_bundle: Option<&'a str>,
    /// The Subscription the Operator adopted (its annotation, written by the controller only).
    pub adopted_from: Option<&'a str>,
}

pub fn status(observed: &Observed<'_>, now: &Time) -> OperatorStatus {
    let refs: Vec<ComponentRef> = observed.components.iter().map(|c| c.reference.clone()).collect();
    let conditions = conditions::conditions(wanted_conditions(observed), observed.previous, observed.generation, now);
    let available = match observed.source {
        SourceOutcome::Resolved { available, .. } if !available.is_empty() => {
            Some(UpdatesStatus { available: available.clone() })
        }
        _ => None,
    };
    OperatorStatus {
        state: Some(state(observed)),
        metadata: metadata(observed.components),
        updates: available,
        conditions,
        components: Some(Components {
            match_labels: BTreeMap::from([(component_label_key(observed.name), String::new())]),
            refs,
        }),
        observed_generation: observed.generation,
    }
}

/// `status.metadata` from the newest ClusterServiceVersion among the components that has Succeeded.
pub fn metadata(components: &[Component]) -> Option<OperatorMetadata> {
    let newest = components
        .iter()
        .filter_map(|component| component.csv.as_ref().map(|csv| (csv, &component.reference.name)))
        .filter(|(csv, _)| csv.phase == "Succeeded")
        .max_by(|(a, a_name), (b, b_name)| a.version.cmp(&b.version).then_with(|| a_name.cmp(b_name)))?;
    let (csv, _) = newest;
    let apis = (!csv.provides.is_empty() || !csv.requires.is_empty())
        .then(|| OperatorApis { provides: csv.provides.clone(), requires: csv.requires.clone() });
    Some(OperatorMetadata {
        display_name: csv.display_name.clone(),
        description: csv.description.clone(),
        version: csv.version.as_ref().map(ToString::to_string),
        apis,
    })
}

fn install_condition<'a>(install: Option<&'a Install>, type_: &str) -> Option<&'a Condition> {
    install?.status.as_ref()?.conditions.iter().find(|condition| condition.type_ == type_)
}

fn install_state(install: Option<&Install>) -> Option<InstallState> {
    install?.status.as_ref()?.state
}

fn wanted_conditions(observed: &Observed<'_>) -> Vec<Wanted> {
    let mut wanted = vec![
        update_available(observed),
        components_diverge(observed),
        pending_approval(observed),
        import_error(observed),
        exceeds_policy(observed),
    ];
    if let Some(origin) = observed.adopted_from {
        let install = observed.install.map(ResourceExt::name_any).unwrap_or_default();
        wanted.push((
            ADOPTED,
            "True",
            "AdoptedFromSubscription".into(),
            format!(
                "adopted {origin} and its Install {install}: what the Install's account held was approved for the \
                 Subscription; anything more waits for approval"
            ),
        ));
    }
    wanted
}

fn update_available(observed: &Observed<'_>) -> Wanted {
    match observed.source {
        SourceOutcome::NoSource => {
            (UPDATE_AVAILABLE, "False", "NoUpdateSource".into(), "the Operator names no source of updates".into())
        }
        SourceOutcome::Failed { reason, .. } => {
            (UPDATE_AVAILABLE, "Unknown", (*reason).into(), "the update source could not be read".into())
        }
        SourceOutcome::Resolved { bundle, version, available, .. } => {
            let installed = install_state(observed.install) == Some(InstallState::Installed);
            let waiting = bundle.is_some() && (observed.installed_bundle != bundle.as_deref() || !installed);
            if waiting && observed.previous_install_exists() {
                let name = bundle.clone().unwrap_or_default();
                let version = version.clone().map(|v| format!(" ({v})")).unwrap_or_default();
                (
                    UPDATE_AVAILABLE,
                    "True",
                    UPDATE_FOUND_IN_CHANNEL.into(),
                    format!("{name}{version} is being installed"),
                )
            } else if !available.is_empty() {
                let channels: Vec<String> = available
                    .iter()
                    .map(|a| format!("{} {}", a.channel, a.version.clone().unwrap_or_default()))
                    .collect();
                (
                    UPDATE_AVAILABLE,
                    "True",
                    UPDATE_FOUND_IN_ANOTHER_CHANNEL.into(),
                    format!("an upgrade has been found outside the specified channel: {}", channels.join(", ")),
                )
            } else {
                (UPDATE_AVAILABLE, "False", "UpToDate".into(), "no newer version is available".into())
            }
        }
    }
}

impl Observed<'_> {
    /// Whether something was installed before, so that a different bundle is an update rather than a first install.
    fn previous_install_exists(&self) -> bool {
        self.install.and_then(|install| install.status.as_ref()).is_some_and(|status| !status.applied.is_empty())
    }
}

fn components_diverge(observed: &Observed<'_>) -> Wanted {
    if let Some(condition) = install_condition(observed.install, COMPONENTS_DIVERGE).filter(|c| c.status == "True") {
        return (COMPONENTS_DIVERGE, "True", condition.reason.clone(), condition.message.clone());
    }
    // An adopted Install labels what it applied for the Operator on its first pass under it (when it records where it
    // came from): until then, nothing it applied is labelled, and that is no divergence.
    let recorded = observed.install.and_then(|install| install.status.as_ref()).and_then(|s| s.adopted_from.as_ref());
    if observed.adopted_from.is_some() && recorded.is_none() {
        return (
            COMPONENTS_DIVERGE,
            "Unknown",
            "AdoptionPending".into(),
            "the adopted Install has not applied its content under this Operator yet".into(),
        );
    }
    let applied = observed.install.and_then(|install| install.status.as_ref()).map(|s| s.applied.as_slice());
    let missing: Vec<String> = applied
        .unwrap_or_default()
        .iter()
        .filter(|object| {
            !observed.components.iter().any(|component| {
                let reference = &component.reference;
                reference.kind == object.kind
                    && reference.api_version == object.api_version
                    && reference.name == object.name
                    && reference.namespace == object.namespace
            })
        })
        .map(|object| match &object.namespace {
            Some(namespace) => format!("{} {namespace}/{}", object.kind, object.name),
            None => format!("{} {}", object.kind, object.name),
        })
        .collect();
    if missing.is_empty() {
        (COMPONENTS_DIVERGE, "False", "ComponentsMatchInstall".into(), "on-cluster components match the install".into())
    } else {
        (
            COMPONENTS_DIVERGE,
            "True",
            COMPONENTS_DIVERGE_FROM_INSTALL.into(),
            format!("on-cluster components diverge from install resource: missing {}", missing.join(", ")),
        )
    }
}

impl<'a> Observed<'a> {
    /// The Operator's Installs with their names: its own first, then its dependencies' (those its source names now,
    /// when it resolved: one it no longer needs is left as it is, and says nothing of the Operator).
    fn installs(&self) -> impl Iterator<Item = (String, &'a Install)> + '_ {
        let own = self.install.map(|install| (install.name_any(), install));
        let named = |install: &Install| match self.source {
            SourceOutcome::Resolved { dependencies, .. } => dependencies
                .iter()
                .any(|dependency| Some(dependency.install.as_str()) == install.metadata.name.as_deref()),
            _ => true,
        };
        let dependencies = self.dependencies.iter().filter(move |install| named(install));
        own.into_iter().chain(dependencies.map(|install| (install.name_any(), install)))
    }

    /// Whether every dependency the source resolved has its Install at its bundle, installed.
    fn dependencies_installed(&self) -> bool {
        let SourceOutcome::Resolved { dependencies, .. } = self.source else { return true };
        dependencies.iter().all(|dependency| {
            self.dependencies.iter().any(|install| {
                install.name_any() == dependency.install
                    && install_state(Some(install)) == Some(InstallState::Installed)
                    && installed_bundle(install) == Some(dependency.bundle.as_str())
            })
        })
    }
}

/// `Install a` or `Installs a, b`, with the verb agreeing.
fn install_list(names: &[String], one: &str, many: &str) -> String {
    match names {
        [name] => format!("Install {name} {one}"),
        names => format!("Installs {} {many}", names.join(", ")),
    }
}

/// Which Installs exceed an InstallPolicy, each with what its own condition says.
fn exceeds_policy(observed: &Observed<'_>) -> Wanted {
    let exceeding: Vec<(String, &Condition)> = observed
        .installs()
        .filter_map(|(name, install)| {
            install_condition(Some(install), EXCEEDS_POLICY).filter(|c| c.status == TRUE).map(|c| (name, c))
        })
        .collect();
    let Some((_, first)) = exceeding.first() else {
        return (
            INSTALL_EXCEEDS_POLICY,
            "False",
            "NoInstallExceedsPolicy".into(),
            "no install exceeds an InstallPolicy".into(),
        );
    };
    let messages: Vec<String> =
        exceeding.iter().map(|(name, condition)| format!("Install {name}: {}", condition.message)).collect();
    (INSTALL_EXCEEDS_POLICY, "True", first.reason.clone(), messages.join("; "))
}

fn pending_approval(observed: &Observed<'_>) -> Wanted {
    let pending: Vec<(String, &Condition)> = observed
        .installs()
        .filter_map(|(name, install)| {
            install_condition(Some(install), PENDING_APPROVAL).filter(|c| c.status == "True").map(|c| (name, c))
        })
        .collect();
    if pending.is_empty() {
        return (
            INSTALL_PENDING_APPROVAL,
            "False",
            "NoInstallPendingApproval".into(),
            "no install waits for approval".into(),
        );
    }
    let escalating: Vec<String> = pending
        .iter()
        .filter(|(_, condition)| condition.reason != UPDATE_APPROVAL_REQUIRED)
        .map(|(name, _)| name.clone())
        .collect();
    if escalating.is_empty() {
        let names: Vec<String> = pending.into_iter().map(|(name, _)| name).collect();
        return (
            INSTALL_PENDING_APPROVAL,
            "True",
            UPDATE_APPROVAL_REQUIRED.into(),
            format!(
                "updates are approved by hand: {}",
                install_list(&names, "waits for approval", "wait for approval")
            ),
        );
    }
    let commands: Vec<String> = escalating.iter().map(|name| format!("`olmv2 approve {name}`")).collect();
    (
        INSTALL_PENDING_APPROVAL,
        "True",
        PRIVILEGE_ESCALATION_REQUIRED.into(),
        format!(
            "{} ({})",
            install_list(
                &escalating,
                "requires privilege escalation approved by an authorized user",
                "require privilege escalation approved by an authorized user"
            ),
            commands.join(", ")
        ),
    )
}

fn import_error(observed: &Observed<'_>) -> Wanted {
    if let SourceOutcome::Failed { reason, message } = observed.source {
        return (CONTENT_IMPORT_ERROR, "True", (*reason).into(), message.clone());
    }
    let failed = observed.installs().find_map(|(name, install)| {
        install_condition(Some(install), CONTENT_IMPORT_ERROR).filter(|c| c.status == "True").map(|c| (name, c))
    });
    match failed {
        Some((name, condition)) if observed.install.is_some_and(|own| own.name_any() == name) => {
            (CONTENT_IMPORT_ERROR, "True", condition.reason.clone(), condition.message.clone())
        }
        // A dependency's: which one is said.
        Some((name, condition)) => {
            (CONTENT_IMPORT_ERROR, "True", condition.reason.clone(), format!("Install {name}: {}", condition.message))
        }
        None => (CONTENT_IMPORT_ERROR, "False", "ContentImported".into(), "all content was imported".into()),
    }
}

fn state(observed: &Observed<'_>) -> OperatorState {
    let failed_install =
        observed.installs().any(|(_, install)| install_state(Some(install)) == Some(InstallState::Failed));
    if matches!(observed.source, SourceOutcome::Failed { .. }) || failed_install {
        return OperatorState::Failed;
    }
    if observed.installs().any(|(_, install)| install_state(Some(install)) == Some(InstallState::ExceedsPolicy)) {
        return OperatorState::ExceedsPolicy;
    }
    let pending = observed
        .installs()
        .any(|(_, install)| install_condition(Some(install), PENDING_APPROVAL).is_some_and(|c| c.status == "True"));
    if pending {
        return OperatorState::PendingApproval;
    }
    match (observed.source, observed.install) {
        (SourceOutcome::NoSource, _) => {
            if observed.components.is_empty() {
                OperatorState::Resolving
            } else {
                OperatorState::Installed
            }
        }
        (_, None) => OperatorState::Resolving,
        (_, Some(_)) => {
            // The Install's own state, not its Installed condition: that is True already while Deployments roll out.
            let installed = install_state(observed.install) == Some(InstallState::Installed);
            let current = match observed.source {
                SourceOutcome::Resolved { bundle: Some(bundle), .. } => observed.installed_bundle == Some(bundle),
                _ => true,
            };
            if installed && current && observed.dependencies_installed() {
                OperatorState::Installed
            } else {
                OperatorState::Installing
            }
        }
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
