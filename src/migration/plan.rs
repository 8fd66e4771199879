//! What adopting Subscriptions into Operators does (seed 004, 'Subscription adoption'), decided from what the cluster
//! holds, for the adoption loop and for `olmv2 migrate plan` alike: each Subscription is associated with an Operator
//! of the same package, channel and CatalogSource (an existing one, or one generated, named after the package), its
//! Install (the one the InstallPlan loop made for it) comes under that Operator, and the Subscription goes. Where a
//! step cannot be taken, the plan says why; where adoption already went part of the way (a crash halfway), it says
//! what is left, so that running it again ends in the same place.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use serde::Serialize;

use crate::api::v1alpha1::{ClusterServiceVersion, CsvPhase, InstallPlanApproval, Subscription};
use crate::api::v2alpha1::{
    CatalogSourceReference, CatalogSourceUpdates, Install, InstallState, Operator, OperatorSpec, PendingPermission,
    PermissionScope, UpdateApproval, UpdateSourceType, Updates, ADOPTED_FROM_ANNOTATION, ADOPTED_FROM_UID_ANNOTATION,
    OPERATOR_INSTALL_ANNOTATION, SUBSCRIPTION_ANNOTATION, TAKES_OVER_CSV_ANNOTATION, TAKES_OVER_CSV_UID_ANNOTATION,
};
use crate::legacy::installplan::execute::{deployment_config, install_name, new_install, take_over};
use crate::legacy::membership::{is_copied, is_install_record};
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
    /// The CSVs of the cluster that are not copies: an operator OLM v0 installed is its Subscription's installed CSV.
    pub csvs: &'a [ClusterServiceVersion],
    /// The image of each bundle of the catalogs Subscriptions name: `(catalog namespace, catalog name, bundle)` →
    /// image; `None` when the catalogs were not read (`olmv2 migrate plan` pulls no catalog image).
    pub bundle_images: Option<&'a BTreeMap<(String, String, String), String>>,
    /// The namespaces of each original CSV's copies, `(namespace, name)` → namespaces (empty when not read).
    pub copies: &'a BTreeMap<(String, String), Vec<String>>,
}

/// An operator OLM v0 installed (its Subscription's installed CSV, which no Install applied): an Install is made for
/// its bundle that takes over what OLM v0 made for that CSV, once a person approves what it needs.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CsvTakeover {
    /// The CSV taken over.
    pub csv: String,
    #[serde(skip)]
    pub uid: String,
    /// Its bundle's image, from the Subscription's catalog (unknown to a plan that reads no catalog).
    pub image: Option<String>,
    /// Whether the Install is still to be made.
    pub to_create: bool,
    /// The namespaces of the CSV's copies, removed once it is adopted (when the plan read them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<String>,
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
    /// For an operator OLM v0 installed: the CSV its Install takes over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub takeover: Option<CsvTakeover>,
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
    let mut plan = SubscriptionPlan::of(subscription, inputs);
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
    // None for an operator OLM v0 installed: the Install to make, which takes it over.
    let provisional;
    let install = match own_install(subscription, inputs) {
        Some(install) => install,
        None => match takeover_install(subscription, inputs) {
            Ok((install, takeover, holds)) => {
                plan.takeover = Some(takeover);
                plan.granted = holds;
                provisional = install;
                &provisional
            }
            Err(why) => {
                plan.blocked = Some(why);
                return plan;
            }
        },
    };
    plan.record_install(install, inputs);
    match choose_operator(subscription, install, inputs, namespaces_of, &plan.catalog) {
        Ok(choice) => {
            plan.install_adopted = owners(install).contains(&choice.name);
            plan.blocked = install_blocker(&plan, install, &choice.name);
            plan.operator = Some(choice);
        }
        Err(why) => plan.blocked = Some(why),
    }
    plan
}

impl SubscriptionPlan {
    /// The plan of `subscription` before anything is decided: what it subscribes to, and whether it was asked for.
    fn of(subscription: &Subscription, inputs: &Inputs<'_>) -> Self {
        let namespace = subscription.namespace().unwrap_or_default();
        let spec = &subscription.spec;
        Self {
            asked: (inputs.asked)(&namespace),
            namespace,
            name: subscription.name_any(),
            package: spec.name.clone(),
            channel: spec.channel.clone(),
            catalog: format!("{}/{}", spec.source_namespace, spec.source),
            manual: spec.install_plan_approval == Some(InstallPlanApproval::Manual),
            install: None,
            account: None,
            granted: Vec::new(),
            install_adopted: false,
            takeover: None,
            operator: None,
            blocked: None,
        }
    }

    /// Records the Subscription's Install: its name, what it was granted and runs as, and the CSV it takes over with
    /// that CSV's copies.
    fn record_install(&mut self, install: &Install, inputs: &Inputs<'_>) {
        self.install = Some(install.name_any());
        if self.takeover.is_none() {
            self.granted = install.status.as_ref().map(|status| status.granted.clone()).unwrap_or_default();
            self.takeover = taking_over(install);
        }
        if let Some(takeover) = self.takeover.as_mut() {
            let key = (self.namespace.clone(), takeover.csv.clone());
            takeover.copies = inputs.copies.get(&key).cloned().unwrap_or_default();
        }
        self.account = install
            .status
            .as_ref()
            .and_then(|status| status.service_account_ref.as_ref())
            .map(|account| format!("{}/{}", account.namespace, account.name));
    }
}

/// The Subscription's Install: the one made for it, or the one an earlier pass adopted from it. One adopted from a
/// Subscription of the same name that was deleted and made again is not this one's.
fn own_install<'a>(subscription: &Subscription, inputs: &Inputs<'a>) -> Option<&'a Install> {
    let (namespace, name) = (subscription.namespace().unwrap_or_default(), subscription.name_any());
    let key = format!("{namespace}/{name}");
    let origin = adopted_from(&namespace, &name);
    let uid = subscription.uid();
    inputs.installs.iter().find(|install| {
        let annotations = install.annotations();
        let adopted = annotations.get(ADOPTED_FROM_ANNOTATION) == Some(&origin)
            && uid.is_some()
            && annotations.get(ADOPTED_FROM_UID_ANNOTATION) == uid.as_ref();
        annotations.get(SUBSCRIPTION_ANNOTATION) == Some(&key) || adopted
    })
}

/// The Operator the Subscription becomes: one that names its Install already (an earlier pass), one that matches,
/// or one to generate; or why none can be.
fn choose_operator(
    subscription: &Subscription,
    install: &Install,
    inputs: &Inputs<'_>,
    namespaces_of: &BTreeMap<&str, BTreeSet<String>>,
    catalog: &str,
) -> Result<OperatorChoice, Blocked> {
    let spec = &subscription.spec;
    let install_name = install.name_any();
    let refused = |reason: &'static str, message: String| Err(Blocked { reason, message, transient: false });
    let associated = inputs
        .operators
        .iter()
        .find(|operator| operator.annotations().get(OPERATOR_INSTALL_ANNOTATION) == Some(&install_name));
    if let Some(operator) = associated {
        return Ok(OperatorChoice {
            name: operator.name_any(),
            exists: true,
            associated: true,
            spec: operator.spec.clone(),
        });
    }
    // A package subscribed in several namespaces cannot become one Operator named after it without choosing.
    if let Some(namespaces) = namespaces_of.get(spec.name.as_str()).filter(|namespaces| namespaces.len() > 1) {
        let namespaces: Vec<&str> = namespaces.iter().map(String::as_str).collect();
        return refused(
            "PackageSubscribedInSeveralNamespaces",
            format!(
                "package {} is subscribed in namespaces {}: one Operator named after it can adopt only one; \
                 delete the others' Subscriptions, or adopt one namespace at a time",
                spec.name,
                namespaces.join(", ")
            ),
        );
    }
    if let Some(operator) = inputs.operators.iter().find(|operator| matches(operator, subscription, install, inputs)) {
        let own = own_install_name(operator);
        if inputs.installs.iter().any(|install| install.name_any() == own) {
            return refused(
                "OperatorAlreadyInstalled",
                format!(
                    "Operator {} installs package {} already, through its own Install {own}: adopting this \
                     Subscription into it would install the operator twice",
                    operator.name_any(),
                    spec.name
                ),
            );
        }
        return Ok(OperatorChoice {
            name: operator.name_any(),
            exists: true,
            associated: false,
            spec: operator.spec.clone(),
        });
    }
    if let Some(taken) = inputs.operators.iter().find(|operator| operator.name_any() == spec.name) {
        let namespace = subscription.namespace().unwrap_or_default();
        return refused(
            "OperatorNameTaken",
            format!(
                "an Operator named {} exists that does not install package {} from {catalog} channel {} into \
                 namespace {namespace}",
                taken.name_any(),
                spec.name,
                spec.channel.as_deref().unwrap_or("(default)")
            ),
        );
    }
    let manual = spec.install_plan_approval == Some(InstallPlanApproval::Manual);
    Ok(OperatorChoice {
        name: spec.name.clone(),
        exists: false,
        associated: false,
        spec: generated_spec(subscription, manual),
    })
}

/// The Operators owning `install`.
fn owners(install: &Install) -> Vec<String> {
    install.owner_references().iter().filter(|owner| owner.kind == "Operator").map(|owner| owner.name.clone()).collect()
}

/// Why the Install cannot come under Operator `chosen` yet, if it cannot: someone else's Install is never moved
/// (only one the controller made for this Subscription, or adopted from it), and one not settled waits.
fn install_blocker(plan: &SubscriptionPlan, install: &Install, chosen: &str) -> Option<Blocked> {
    let install_name = install.name_any();
    let owners = owners(install);
    if owners.iter().any(|owner| owner != chosen) {
        return blocked(
            "InstallOwnedElsewhere",
            format!("Install {install_name} belongs to Operator {} already", owners.join(", ")),
            false,
        );
    }
    if plan.takeover.as_ref().is_some_and(|takeover| takeover.to_create) || plan.install_adopted || settled(install) {
        // A takeover's first step makes the Install, and the rest waits for it to be approved and applied; an
        // adopted or settled Install blocks nothing.
        return None;
    }
    let pending = install.status.as_ref().and_then(|status| status.pending.as_ref()).map_or(0, |p| p.count);
    let waits = install.status.as_ref().and_then(|status| status.state) == Some(InstallState::PendingApproval);
    match &plan.takeover {
        Some(takeover) if waits => blocked(
            "InstallPendingApproval",
            format!(
                "Install {install_name} takes over CSV {}, which OLM v0 installed, once a person who holds the \
                 {pending} permissions it needs approves them: `olmv2 migrate apply --approve`, or `kubectl \
                 olmv2 approve {install_name}`",
                takeover.csv
            ),
            false,
        ),
        _ => blocked(
            "InstallNotSettled",
            format!("Install {install_name} is not installed yet: it is adopted once it is"),
            true,
        ),
    }
}

/// The CSV an Install made for a takeover takes over, as its annotations record it.
fn taking_over(install: &Install) -> Option<CsvTakeover> {
    let annotations = install.annotations();
    let (_, csv) = annotations.get(TAKES_OVER_CSV_ANNOTATION)?.split_once('/')?;
    Some(CsvTakeover {
        csv: csv.to_owned(),
        uid: annotations.get(TAKES_OVER_CSV_UID_ANNOTATION).cloned().unwrap_or_default(),
        image: install.spec.content.first().and_then(|content| content.manifest_image.clone()),
        to_create: false,
        copies: Vec::new(),
    })
}

/// The Install to make for a Subscription whose operator OLM v0 installed: its installed CSV exists, is no copy and
/// no Install's record, and has succeeded. It is the Install the InstallPlan loop would make for that bundle, named
/// so, also recording the CSV it takes over. With it, what the operator holds today: the rules its CSV declares.
fn takeover_install(
    subscription: &Subscription,
    inputs: &Inputs<'_>,
) -> Result<(Install, CsvTakeover, Vec<PendingPermission>), Blocked> {
    let namespace = subscription.namespace().unwrap_or_default();
    let spec = &subscription.spec;
    let expected = install_name(&spec.name, &namespace);
    let not_installed = |detail: String| Blocked {
        reason: "SubscriptionNotInstalled",
        message: format!("no Install {expected} serves this Subscription: {detail}"),
        transient: true,
    };
    if inputs.installs.iter().any(|install| install.name_any() == expected) {
        return Err(Blocked {
            reason: "InstallNameTaken",
            message: format!(
                "an Install named {expected} exists that was not made for this Subscription: delete or rename it"
            ),
            transient: false,
        });
    }
    let Some(installed) = subscription.status.as_ref().and_then(|status| status.installed_csv.clone()) else {
        return Err(not_installed("its operator is still being installed".to_owned()));
    };
    let csv = inputs.csvs.iter().find(|csv| {
        csv.namespace().as_deref() == Some(namespace.as_str())
            && csv.name_any() == installed
            && !is_copied(csv)
            && !is_install_record(csv)
    });
    let Some(csv) = csv else {
        return Err(not_installed(format!("its installed CSV {installed} is not in namespace {namespace}")));
    };
    let phase = csv.status.as_ref().map(|status| status.phase).unwrap_or_default();
    if phase != CsvPhase::Succeeded {
        return Err(Blocked {
            reason: "InstalledCSVNotSucceeded",
            message: format!(
                "CSV {installed}, which OLM v0 installed, is {phase:?}: it is taken over once it succeeds"
            ),
            transient: true,
        });
    }
    let image = match inputs.bundle_images {
        None => None,
        Some(images) => {
            let key = (spec.source_namespace.clone(), spec.source.clone(), installed.clone());
            match images.get(&key) {
                Some(image) => Some(image.clone()),
                None => {
                    return Err(Blocked {
                        reason: "BundleNotInCatalog",
                        message: format!(
                            "CSV {installed}, which OLM v0 installed, is no bundle with an image in CatalogSource \
                             {}/{}: no Install can be made to take it over",
                            spec.source_namespace, spec.source
                        ),
                        transient: false,
                    });
                }
            }
        }
    };
    let uid = csv.uid().unwrap_or_default();
    let body = takeover_manifest(subscription, &installed, &uid, image.as_deref().unwrap_or_default());
    let install: Install = serde_json::from_value(body).map_err(|error| Blocked {
        reason: "TakeoverInvalid",
        message: format!("the Install to take over CSV {installed} cannot be made: {error}"),
        transient: false,
    })?;
    let takeover = CsvTakeover { csv: installed, uid, image, to_create: true, copies: Vec::new() };
    Ok((install, takeover, declared_rules(csv)))
}

/// The Install taking over the CSV `csv` (uid `uid`) that OLM v0 installed for `subscription`, from the bundle
/// `image`: the InstallPlan loop's Install for that bundle, with the two annotations naming the CSV.
pub fn takeover_manifest(subscription: &Subscription, csv: &str, uid: &str, image: &str) -> serde_json::Value {
    let mut body = new_install(subscription, csv, image);
    take_over(&mut body, &subscription.namespace().unwrap_or_default(), csv, uid);
    body
}

/// The rules a CSV declares for its operator, where OLM v0 grants them: its `permissions` in the namespaces it
/// targets (`olm.targetNamespaces`; cluster-wide when it targets all), its `clusterPermissions` cluster-wide.
fn declared_rules(csv: &ClusterServiceVersion) -> Vec<PendingPermission> {
    let namespace = csv.namespace().unwrap_or_default();
    let targets: Vec<String> = csv
        .annotations()
        .get(crate::api::v1::TARGET_NAMESPACES_ANNOTATION)
        .map_or_else(|| vec![namespace.clone()], |t| t.split(',').map(str::to_owned).collect());
    let all = targets.iter().any(String::is_empty);
    let strategy = &csv.spec.install.spec;
    let permission = |rule: &k8s_openapi::api::rbac::v1::PolicyRule, cluster: bool| PendingPermission {
        scope: if cluster { PermissionScope::Cluster } else { PermissionScope::Namespaced },
        namespaces: if cluster { Vec::new() } else { targets.clone() },
        verbs: rule.verbs.clone(),
        api_groups: rule.api_groups.clone().unwrap_or_default(),
        resources: rule.resources.clone().unwrap_or_default(),
        resource_names: rule.resource_names.clone().unwrap_or_default(),
        non_resource_urls: rule.non_resource_urls.clone().unwrap_or_default(),
    };
    let namespaced = strategy.permissions.iter().flat_map(|p| &p.rules).map(|rule| permission(rule, all));
    let cluster = strategy.cluster_permissions.iter().flat_map(|p| &p.rules).map(|rule| permission(rule, true));
    namespaced.chain(cluster).collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
