//! A new InstallPlan, as OLM v0's `createInstallPlan` makes it: `generateName: install-`, owned (not as controller)
//! by every Subscription of the namespace, `spec.clusterServiceVersionNames` in step order, Manual when any
//! Subscription of the namespace is, approved when Automatic, the namespace's next generation; its status written
//! after the create, in phase `Installing` (or `RequiresApproval`). Each bundle is a `bundleLookups` entry (its image
//! as `path`, as OLM records it) and a ClusterServiceVersion step; a bundle no Subscription asks for adds OLM's
//! Subscription step (`<package>-<channel>-<catalog>-<catalogNamespace>`, `installPlanApproval: Automatic`,
//! `startingCSV` the bundle).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use serde_json::{json, Value};

use crate::api::v1alpha1::{
    BundleLookup, InstallPlan, InstallPlanApproval, InstallPlanPhase, InstallPlanStatus, Step, StepResource,
    Subscription,
};

/// OLM's step statuses.
pub const STEP_UNKNOWN: &str = "Unknown";
pub const STEP_CREATED: &str = "Created";
pub const STEP_PRESENT: &str = "Present";

/// A bundle an InstallPlan installs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedBundle {
    /// The CSV name.
    pub csv: String,
    pub package: String,
    /// The channel it was resolved from.
    pub channel: String,
    pub image: String,
    /// The CatalogSource it comes from.
    pub catalog: String,
    pub catalog_namespace: String,
    /// The CSV it replaces (installed now), if any.
    pub replaces: Option<String>,
    /// The Subscription asking for it; none for a dependency, which gets a generated Subscription.
    pub subscription: Option<String>,
}

/// OLM's name of the Subscription generated for a dependency.
pub fn generated_subscription_name(bundle: &PlannedBundle) -> String {
    [bundle.package.as_str(), &bundle.channel, &bundle.catalog, &bundle.catalog_namespace].join("-")
}

/// The Subscription OLM generates for a dependency, in the resolving namespace.
pub fn generated_subscription(namespace: &str, bundle: &PlannedBundle) -> Value {
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": generated_subscription_name(bundle), "namespace": namespace},
        "spec": {
            "source": bundle.catalog,
            "sourceNamespace": bundle.catalog_namespace,
            "name": bundle.package,
            "channel": bundle.channel,
            "startingCSV": bundle.csv,
            "installPlanApproval": "Automatic",
        },
    })
}

/// The InstallPlan to create (its status comes after, as OLM writes it).
pub fn new_install_plan(
    namespace: &str,
    generation: i64,
    subscriptions: &[Subscription],
    bundles: &[PlannedBundle],
) -> Value {
    let manual = subscriptions
        .iter()
        .any(|s| s.spec.install_plan_approval == Some(crate::api::v1alpha1::InstallPlanApproval::Manual));
    let owners: Vec<Value> = subscriptions
        .iter()
        .map(|s| {
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription", "name": s.name_any(),
                   "uid": s.metadata.uid.clone().unwrap_or_default(), "blockOwnerDeletion": false,
                   "controller": false})
        })
        .collect();
    let names: Vec<&str> = bundles.iter().map(|b| b.csv.as_str()).collect();
    json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "InstallPlan",
        "metadata": {"generateName": "install-", "namespace": namespace, "ownerReferences": owners},
        "spec": {
            "clusterServiceVersionNames": names,
            "approval": if manual { "Manual" } else { "Automatic" },
            "approved": !manual,
            "generation": generation,
        },
    })
}

/// The status written right after the create.
pub fn initial_status(namespace: &str, approval: InstallPlanApproval, bundles: &[PlannedBundle]) -> InstallPlanStatus {
    let step = |bundle: &PlannedBundle, kind: &str, name: String, manifest: Option<String>| Step {
        resolving: bundle.csv.clone(),
        resource: StepResource {
            source_name: bundle.catalog.clone(),
            source_namespace: bundle.catalog_namespace.clone(),
            group: "operators.coreos.com".into(),
            version: "v1alpha1".into(),
            kind: kind.into(),
            name,
            manifest,
        },
        optional: false,
        status: STEP_UNKNOWN.into(),
    };
    let mut plan: Vec<Step> =
        bundles.iter().map(|bundle| step(bundle, "ClusterServiceVersion", bundle.csv.clone(), None)).collect();
    plan.extend(bundles.iter().filter(|bundle| bundle.subscription.is_none()).map(|bundle| {
        let manifest = generated_subscription(namespace, bundle).to_string();
        step(bundle, "Subscription", generated_subscription_name(bundle), Some(manifest))
    }));
    let mut catalog_sources: Vec<String> = bundles.iter().map(|b| b.catalog.clone()).collect();
    catalog_sources.sort();
    catalog_sources.dedup();
    InstallPlanStatus {
        phase: match approval {
            InstallPlanApproval::Manual => InstallPlanPhase::RequiresApproval,
            InstallPlanApproval::Automatic => InstallPlanPhase::Installing,
        },
        catalog_sources,
        plan,
        bundle_lookups: bundles
            .iter()
            .map(|bundle| BundleLookup {
                path: bundle.image.clone(),
                identifier: bundle.csv.clone(),
                replaces: bundle.replaces.clone().unwrap_or_default(),
                catalog_source_ref: ObjectReference {
                    name: Some(bundle.catalog.clone()),
                    namespace: Some(bundle.catalog_namespace.clone()),
                    ..ObjectReference::default()
                },
                conditions: Vec::new(),
                properties: None,
            })
            .collect(),
        ..InstallPlanStatus::default()
    }
}

/// The generation of the next InstallPlan: one past every Subscription's and InstallPlan's of the namespace.
pub fn next_generation(subscriptions: &[Subscription], plans: &[InstallPlan]) -> i64 {
    let from_subscriptions = subscriptions.iter().filter_map(|s| s.status.as_ref()?.install_plan_generation);
    let from_plans = plans.iter().filter_map(|p| p.spec.generation);
    from_subscriptions.chain(from_plans).max().unwrap_or(0) + 1
}

/// OLM's `maxInstallPlanCount`: the plans a namespace keeps.
pub const MAX_INSTALL_PLANS: usize = 5;
/// OLM's `maxDeletesPerSweep`.
const MAX_DELETES_PER_SWEEP: usize = 5;

/// OLM's `gcInstallPlans`: the plans to delete so that a namespace keeps its five newest, oldest generation first
/// (creation time, then name, within a generation), at most five per sweep.
pub fn plans_to_collect(plans: &[InstallPlan]) -> Vec<String> {
    let mut ordered: Vec<&InstallPlan> = plans.iter().collect();
    ordered.sort_by(|a, b| {
        let key =
            |p: &InstallPlan| (p.spec.generation.unwrap_or(0), p.metadata.creation_timestamp.clone().map(|t| t.0));
        key(a).cmp(&key(b)).then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let excess = ordered.len().saturating_sub(MAX_INSTALL_PLANS).min(MAX_DELETES_PER_SWEEP);
    ordered.iter().take(excess).map(|p| p.name_any()).collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
