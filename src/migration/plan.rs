//! What adopting Subscriptions into Operators does (seed 004, 'Subscription adoption'), decided from what the cluster
//! holds, for the adoption loop and for `olmv2 migrate plan` alike: each Subscription is associated with an Operator
//! of the same package, channel and CatalogSource (an existing one, or one generated, named after the package), its
//! Install (the one the InstallPlan loop made for it) comes under that Operator, and the Subscription goes. Where a
//! step cannot be taken, the plan says why; where adoption already went part of the way (a crash halfway), it says
//! what is left, so that running it again ends in the same place.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use serde::Serialize;

use crate::api::v1alpha1::{InstallPlanApproval, Subscription};
use crate::api::v2alpha1::{
    CatalogSourceReference, CatalogSourceUpdates, Install, Operator, OperatorSpec, PendingPermission, UpdateApproval,
    UpdateSourceType, Updates, ADOPTED_FROM_ANNOTATION, ADOPTED_FROM_UID_ANNOTATION, OPERATOR_INSTALL_ANNOTATION,
    SUBSCRIPTION_ANNOTATION,
};
use crate::legacy::installplan::execute::{deployment_config, install_name};
use crate::operator::desired::settled;
use crate::operator::reconcile::own_install_name;
use crate::webhook::csv_author::recorded_author;

/// The value of [`ADOPTED_FROM_ANNOTATION`] for a Subscription.
pub fn adopted_from(namespace: &str, name: &str) -> String {
    format!("Subscription {namespace}/{name}")
}

/// What the cluster holds that adoption decides on.
pub struct Inputs<'a> {
    pub subscriptions: &'a [Subscription],
    pub installs: &'a [Install],
    pub operators: &'a [Operator],
    /// Whether the Subscriptions of a namespace are to be adopted (the flag, or the namespace's annotation).
    pub asked: &'a dyn Fn(&str) -> bool,
    /// The package of an entrypoint bundle in a catalog and the channels that hold it, for Operators naming only an
    /// entrypoint: `(catalog namespace, catalog name, bundle)` → `(package, channels)`.
    pub entrypoints: &'a BTreeMap<(String, String, String), (String, Vec<String>)>,
    /// Where an Operator without `installNamespace` installs (the controller's `--operator-namespace`).
    pub default_namespace: &'a str,
}

/// Why a Subscription is not adopted (now).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocked {
    pub reason: &'static str,
    pub message: String,
    /// Whether it may go away by itself (the operator still installing), rather than need a person.
    pub transient: bool,
}

/// The Operator a Subscription goes to.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorChoice {
    pub name: String,
    /// Whether it exists already (matched, or made by an earlier pass), rather than to be generated.
    pub exists: bool,
    /// Whether it already names the Subscription's Install as its own.
    pub associated: bool,
    /// The spec of the Operator to generate: the Subscription's package, channel, CatalogSource, approval,
    /// configuration and namespace.
    #[serde(skip)]
    pub spec: OperatorSpec,
}

/// What adoption does with one Subscription.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionPlan {
    pub namespace: String,
    pub name: String,
    pub package: String,
    pub channel: Option<String>,
    pub catalog: String,
    /// Whether its updates are approved by hand (Manual), as the Subscription's `installPlanApproval` says.
    pub manual: bool,
    /// Whether its namespace is asked to be adopted.
    pub asked: bool,
    /// The Install serving it, if any.
    pub install: Option<String>,
    /// The account its Install applies content as (`namespace/name`): an OperatorGroup's, or one made for it.
    pub account: Option<String>,
    /// The rules its Install's account was granted: what the operator holds today and keeps.
    pub granted: Vec<PendingPermission>,
    /// Whether its Install is under the Operator already (a pass went that far).
    pub install_adopted: bool,
    pub operator: Option<OperatorChoice>,
    pub blocked: Option<Blocked>,
}

fn blocked(reason: &'static str, message: String, transient: bool) -> Option<Blocked> {
    Some(Blocked { reason, message, transient })
}

/// The catalog `namespace/name` of an Operator from a CatalogSource, with its package and channels: the package it
/// names, or the one its entrypoint is a bundle of (then every channel holding it).
fn operator_source(operator: &Operator, inputs: &Inputs<'_>) -> Option<(String, String, Option<Vec<String>>)> {
    let updates = operator.spec.updates.as_ref()?;
    let catalog = updates.catalog_source.as_ref()?;
    let reference = format!("{}/{}", catalog.catalog_ref.namespace, catalog.catalog_ref.name);
    match (&catalog.package, &catalog.entrypoint) {
        (Some(package), _) => Some((reference, package.clone(), catalog.channel.clone().map(|c| vec![c]))),
        (None, Some(entrypoint)) => {
            let key = (catalog.catalog_ref.namespace.clone(), catalog.catalog_ref.name.clone(), entrypoint.clone());
            let (package, channels) = inputs.entrypoints.get(&key)?;
            Some((reference, package.clone(), Some(channels.clone())))
        }
        (None, None) => None,
    }
}

/// The user a creator annotation records.
fn creator_name(annotations: &BTreeMap<String, String>) -> Option<String> {
    recorded_author(annotations).map(|creator| creator.username)
}

/// Whether `operator` installs what `subscription` does (same CatalogSource, package and channel, same namespace)
/// on the same terms: made by the person the Install was made for (its grants were approved on their behalf), with
/// the Subscription's configuration, and not Automatic where the Subscription was Manual.
fn matches(operator: &Operator, subscription: &Subscription, install: &Install, inputs: &Inputs<'_>) -> bool {
    let Some((catalog, package, channels)) = operator_source(operator, inputs) else { return false };
    let spec = &subscription.spec;
    let same_creator = creator_name(operator.annotations()).is_some()
        && creator_name(operator.annotations()) == creator_name(install.annotations());
    let approval = operator.spec.updates.as_ref().and_then(|u| u.catalog_source.as_ref()).map(|c| c.approval);
    let manual = spec.install_plan_approval == Some(InstallPlanApproval::Manual);
    let approval_kept = !manual || approval == Some(UpdateApproval::Manual);
    let same_config = operator.spec.config.clone().filter(|c| !c.is_empty()) == deployment_config(subscription);
    if !(same_creator && approval_kept && same_config) {
        return false;
    }
    let namespace = operator.spec.install_namespace.as_deref().unwrap_or(inputs.default_namespace);
    let same_channel = match (&spec.channel, channels) {
        (Some(channel), Some(channels)) => channels.contains(channel),
        (None, None) => true,
        _ => false,
    };
    catalog == format!("{}/{}", spec.source_namespace, spec.source)
        && package == spec.name
        && same_channel
        && Some(namespace) == subscription.namespace().as_deref()
}

/// The Operator generated for a Subscription.
fn generated_spec(subscription: &Subscription, manual: bool) -> OperatorSpec {
    let spec = &subscription.spec;
    OperatorSpec {
        updates: Some(Updates {
            source_type: UpdateSourceType::CatalogSource,
            catalog_source: Some(CatalogSourceUpdates {
                package: Some(spec.name.clone()),
                channel: spec.channel.clone(),
                entrypoint: None,
                approval: if manual { UpdateApproval::Manual } else { UpdateApproval::Automatic },
                catalog_ref: CatalogSourceReference {
                    name: spec.source.clone(),
                    namespace: spec.source_namespace.clone(),
                },
            }),
            manifest_image: None,
        }),
        config: deployment_config(subscription),
        install_namespace: subscription.namespace(),
    }
}

/// The plan for every Subscription, in namespace and name order.
pub fn plan(inputs: &Inputs<'_>) -> Vec<SubscriptionPlan> {
    // A package subscribed in several namespaces cannot become one Operator named after it without choosing.
    let mut namespaces_of: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for subscription in inputs.subscriptions {
        let namespace = subscription.namespace().unwrap_or_default();
        if (inputs.asked)(&namespace) {
            namespaces_of.entry(subscription.spec.name.as_str()).or_default().insert(namespace);
        }
    }
    let mut plans: Vec<SubscriptionPlan> =
        inputs.subscriptions.iter().map(|subscription| plan_one(subscription, inputs, &namespaces_of)).collect();
    plans.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    plans
}

fn plan_one(
    subscription: &Subscription,
    inputs: &Inputs<'_>,
    namespaces_of: &BTreeMap<&str, BTreeSet<String>>,
) -> SubscriptionPlan {
    let namespace = subscription.namespace().unwrap_or_default();
    let name = subscription.name_any();
    let spec = &subscription.spec;
    let key = format!("{namespace}/{name}");
    let origin = adopted_from(&namespace, &name);
    let manual = spec.install_plan_approval == Some(InstallPlanApproval::Manual);
    let mut plan = SubscriptionPlan {
        namespace: namespace.clone(),
        name: name.clone(),
        package: spec.name.clone(),
        channel: spec.channel.clone(),
        catalog: format!("{}/{}", spec.source_namespace, spec.source),
        manual,
        asked: (inputs.asked)(&namespace),
        install: None,
        account: None,
        granted: Vec::new(),
        install_adopted: false,
        operator: None,
        blocked: None,
    };
    // Made again from an Operator on purpose: adopting it would undo that.
    if let Some(origin) = subscription.annotations().get(super::revert::REVERTED_FROM_ANNOTATION) {
        plan.blocked = blocked(
            "RevertedFromOperator",
            format!(
                "made from {origin} by `olmv2 migrate revert`: remove its annotation {} to have it adopted again",
                super::revert::REVERTED_FROM_ANNOTATION
            ),
            false,
        );
        return plan;
    }
    // Its Install: the one made for it, or the one an earlier pass adopted from it.
    // One adopted from a Subscription of the same name that was deleted and made again is not this one's.
    let uid = subscription.uid();
    let install = inputs.installs.iter().find(|install| {
        let annotations = install.annotations();
        let adopted = annotations.get(ADOPTED_FROM_ANNOTATION) == Some(&origin)
            && uid.is_some()
            && annotations.get(ADOPTED_FROM_UID_ANNOTATION) == uid.as_ref();
        annotations.get(SUBSCRIPTION_ANNOTATION) == Some(&key) || adopted
    });
    let Some(install) = install else {
        let expected = install_name(&spec.name, &namespace);
        plan.blocked = blocked(
            "SubscriptionNotInstalled",
            format!(
                "no Install {expected} serves this Subscription: its operator is still being installed, or was \
                 installed by OLM v0 itself, whose operators cannot be adopted yet"
            ),
            true,
        );
        return plan;
    };
    let install_name = install.name_any();
    plan.install = Some(install_name.clone());
    plan.granted = install.status.as_ref().map(|status| status.granted.clone()).unwrap_or_default();
    plan.account = install
        .status
        .as_ref()
        .and_then(|status| status.service_account_ref.as_ref())
        .map(|account| format!("{}/{}", account.namespace, account.name));

    // The Operator: one that names this Install already (an earlier pass), one that matches, or one to generate.
    let associated = inputs
        .operators
        .iter()
        .find(|operator| operator.annotations().get(OPERATOR_INSTALL_ANNOTATION) == Some(&install_name));
    let choice = if let Some(operator) = associated {
        OperatorChoice { name: operator.name_any(), exists: true, associated: true, spec: operator.spec.clone() }
    } else {
        if namespaces_of.get(spec.name.as_str()).is_some_and(|namespaces| namespaces.len() > 1) {
            let namespaces: Vec<&str> =
                namespaces_of[spec.name.as_str()].iter().map(String::as_str).collect::<Vec<_>>();
            plan.blocked = blocked(
                "PackageSubscribedInSeveralNamespaces",
                format!(
                    "package {} is subscribed in namespaces {}: one Operator named after it can adopt only one; \
                     delete the others' Subscriptions, or adopt one namespace at a time",
                    spec.name,
                    namespaces.join(", ")
                ),
                false,
            );
            return plan;
        }
        let matching = inputs.operators.iter().find(|operator| matches(operator, subscription, install, inputs));
        match matching {
            Some(operator) => {
                let own = own_install_name(operator);
                if inputs.installs.iter().any(|install| install.name_any() == own) {
                    plan.blocked = blocked(
                        "OperatorAlreadyInstalled",
                        format!(
                            "Operator {} installs package {} already, through its own Install {own}: adopting this \
                             Subscription into it would install the operator twice",
                            operator.name_any(),
                            spec.name
                        ),
                        false,
                    );
                    return plan;
                }
                OperatorChoice {
                    name: operator.name_any(),
                    exists: true,
                    associated: false,
                    spec: operator.spec.clone(),
                }
            }
            None => {
                if let Some(taken) = inputs.operators.iter().find(|operator| operator.name_any() == spec.name) {
                    plan.blocked = blocked(
                        "OperatorNameTaken",
                        format!(
                            "an Operator named {} exists that does not install package {} from {} channel {} into \
                             namespace {namespace}",
                            taken.name_any(),
                            spec.name,
                            plan.catalog,
                            spec.channel.as_deref().unwrap_or("(default)")
                        ),
                        false,
                    );
                    return plan;
                }
                OperatorChoice {
                    name: spec.name.clone(),
                    exists: false,
                    associated: false,
                    spec: generated_spec(subscription, manual),
                }
            }
        }
    };
    // Someone else's Install is never moved: only one the controller made for this Subscription, or adopted from it.
    let owners: Vec<String> = install
        .owner_references()
        .iter()
        .filter(|owner| owner.kind == "Operator")
        .map(|owner| owner.name.clone())
        .collect();
    plan.install_adopted = owners.contains(&choice.name);
    if owners.iter().any(|owner| *owner != choice.name) {
        plan.blocked = blocked(
            "InstallOwnedElsewhere",
            format!("Install {install_name} belongs to Operator {} already", owners.join(", ")),
            false,
        );
    } else if !plan.install_adopted && !settled(install) {
        plan.blocked = blocked(
            "InstallNotSettled",
            format!("Install {install_name} is not installed yet: it is adopted once it is"),
            true,
        );
    }
    plan.operator = Some(choice);
    plan
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
