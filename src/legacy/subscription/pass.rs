//! One pass over a namespace's Subscriptions (OLM's `syncResolvingNamespace`), as a sequence of named steps: read
//! the namespace (its old InstallPlans collected), bring every Subscription's installed-CSV state up to date and
//! write it first (an upgrade is resolved from the installed CSV), then the catalogs' health and deprecations,
//! resolve (`resolution`), plan (`planning`, the namespace's next InstallPlan), and write what resolution says.
//! The pure parts are functions here and in `status`; the writes are the `Context`'s.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::deprecation::with_deprecations;
use super::planning::plan_namespace;
use super::resolution::{resolve_namespace, Inputs, Outcome, ERROR_PREVENTED_RESOLUTION};
use super::status::{
    plan_failed, with_catalog_health, with_csv_state, with_install_plan, with_plan_reference, with_resolution,
    CatalogView, RESOLUTION_FAILED,
};
use super::{Context, Loaded, SubscriptionLoopError, CSV_STATE_SETTLING, EXCLUDE_GLOBAL_RESOLUTION};
use crate::api::v1::{OperatorGroup, UpgradeStrategyName};
use crate::api::v1alpha1::{
    ClusterServiceVersion, InstallPlan, Subscription, SubscriptionState, SubscriptionStatus, COPIED_FROM_LABEL,
};
use crate::catalog::dependencies::Source;
use crate::controller::next;
use crate::legacy::installplan::execute::GENERATED_BY_ANNOTATION;
use crate::legacy::installplan::plan::plans_to_collect;

/// What a pass read of a namespace.
struct Read {
    subscriptions: Vec<Subscription>,
    /// Its original CSVs (copies left out).
    csvs: Vec<ClusterServiceVersion>,
    /// Its InstallPlans, the collected ones left out.
    plans: Vec<InstallPlan>,
    groups: Vec<OperatorGroup>,
}

/// Every Subscription's next status, by name.
type Statuses = BTreeMap<String, SubscriptionStatus>;

impl Context {
    /// One pass over a namespace: every Subscription's status brought to what the namespace says now.
    pub(super) async fn sync_namespace(&self, namespace: &str) -> Result<Action, SubscriptionLoopError> {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let read = next!(self.observe(namespace).await?);
        let subscriptions = read.subscriptions.as_slice();
        let mut next = csv_states(&read, &now);
        // As OLM: every Subscription's installed CSV first, resolution once none moves (an upgrade is resolved from
        // the installed CSV, and a CSV nobody follows yet would hold its APIs against its own bundle).
        if self.write_changed(namespace, subscriptions, &next).await? {
            return Ok(Action::requeue(CSV_STATE_SETTLING));
        }
        let loaded = self.catalogs_for(namespace).await?;
        catalog_states(&mut next, subscriptions, &loaded, &now);
        let sources = sources(&loaded, &read.groups, &self.global_namespace);
        let outcome = resolve_namespace(&Inputs {
            subscriptions,
            csvs: &read.csvs,
            sources: sources.clone(),
            operator_groups: read.groups.len(),
        });
        // OLM's one skip: while every Subscription waits on a plan, nothing is planned again. Unlike OLM, the
        // namespace is still resolved, so that a failure gone (or a new one) shows at once.
        let all_waiting = all_waiting(&next);
        if let (Outcome::Resolved { subscriptions: chosen, dependencies }, false) = (&outcome, all_waiting) {
            let plan = plan_namespace(chosen, dependencies, subscriptions, &sources);
            if !plan.updated.is_empty() {
                let created = self.create_plan(namespace, subscriptions, &read.plans, &plan).await?;
                for (name, csv) in &plan.updated {
                    if let Some(status) = next.get_mut(name) {
                        // A plan just made has not failed (OLM's setIPReference).
                        with_plan_reference(status, csv, &created, false, &now);
                    }
                }
            }
        }
        resolution_states(&mut next, subscriptions, &outcome, all_waiting, &now);
        self.write_changed(namespace, subscriptions, &next).await?;
        self.follow_config(namespace, subscriptions).await?;
        if let Outcome::Failed { reason, message } = &outcome {
            tracing::info!(%namespace, reason, "resolution failed: {message}");
            if newly_failed(subscriptions, message) {
                self.report_failure(namespace, message).await;
            }
        }
        Ok(Action::requeue(match &outcome {
            Outcome::Failed { reason: ERROR_PREVENTED_RESOLUTION, .. } => self.basics.retry,
            _ => self.basics.resync,
        }))
    }

    /// Reads the namespace, collecting its old InstallPlans as it goes (OLM's `gcInstallPlans`: the namespace keeps
    /// its five newest). A namespace without Subscriptions has nothing to do.
    async fn observe(&self, namespace: &str) -> Result<ControlFlow<Action, Read>, SubscriptionLoopError> {
        let subscriptions: Vec<Subscription> = self.list(namespace, "Subscriptions", ListParams::default()).await?;
        if subscriptions.is_empty() {
            return Ok(ControlFlow::Break(Action::await_change()));
        }
        let originals = ListParams::default().labels(&format!("!{COPIED_FROM_LABEL}"));
        let csvs: Vec<ClusterServiceVersion> = self.list(namespace, "CSVs", originals).await?;
        let mut plans: Vec<InstallPlan> = self.list(namespace, "InstallPlans", ListParams::default()).await?;
        for name in plans_to_collect(&plans) {
            self.client
                .namespaced::<InstallPlan>(namespace)
                .ensure_deleted(&name)
                .await
                .map_err(|source| SubscriptionLoopError::WritePlan { namespace: namespace.to_owned(), source })?;
            tracing::info!(%namespace, plan = %name, "old InstallPlan collected");
            plans.retain(|plan| plan.metadata.name.as_deref() != Some(name.as_str()));
        }
        let groups: Vec<OperatorGroup> = self.list(namespace, "OperatorGroups", ListParams::default()).await?;
        Ok(ControlFlow::Continue(Read { subscriptions, csvs, plans, groups }))
    }
}

/// Whether the namespace's one OperatorGroup allows failing forward (OLM's `IsFailForwardEnabled`).
fn fail_forward(groups: &[OperatorGroup]) -> bool {
    matches!(groups, [group] if group.spec.upgrade_strategy == UpgradeStrategyName::TechPreviewUnsafeFailForward)
}

/// Every Subscription's status with its plan reference, installed-CSV state and plan state as the namespace says
/// now. A Subscription a plan generated waits on that plan (OLM's `ensureSubscriptionInstallPlanState`).
fn csv_states(read: &Read, now: &Time) -> Statuses {
    let fail_forward = fail_forward(&read.groups);
    let exists = |name: &str| read.csvs.iter().any(|csv| csv.name_any() == name);
    let plan_named = |name: &str| read.plans.iter().find(|plan| plan.metadata.name.as_deref() == Some(name));
    let mut next = Statuses::new();
    for subscription in &read.subscriptions {
        let mut status = subscription.status.clone().unwrap_or_default();
        let generated_by = subscription.annotations().get(GENERATED_BY_ANNOTATION);
        if let (None, Some(plan), Some(starting)) = (
            &status.install_plan_ref,
            generated_by.and_then(|name| plan_named(name)),
            subscription.spec.starting_csv.as_deref(),
        ) {
            with_plan_reference(&mut status, starting, plan, fail_forward, now);
        }
        let plan =
            status.install_plan_ref.as_ref().and_then(|reference| reference.name.as_deref()).and_then(plan_named);
        let installed = status.current_csv.as_deref().is_some_and(exists);
        with_csv_state(&mut status, installed, fail_forward && plan.is_some_and(plan_failed), now);
        with_install_plan(&mut status, plan, now);
        next.insert(subscription.name_any(), status);
    }
    next
}

/// Each Subscription's catalog health and the deprecations its catalog declares for what it follows.
fn catalog_states(next: &mut Statuses, subscriptions: &[Subscription], loaded: &[Loaded], now: &Time) {
    let views: Vec<CatalogView> = loaded
        .iter()
        .map(|l| CatalogView {
            name: l.source.name_any(),
            namespace: l.source.namespace().unwrap_or_default(),
            uid: l.source.metadata.uid.clone(),
            resource_version: l.source.metadata.resource_version.clone(),
            healthy: l.catalog.is_some(),
        })
        .collect();
    for subscription in subscriptions {
        let status = next.entry(subscription.name_any()).or_default();
        let spec = &subscription.spec;
        with_catalog_health(status, &spec.source, &spec.source_namespace, &views, now);
        let package = loaded
            .iter()
            .find(|l| l.source.name_any() == spec.source && l.source.namespace() == Some(spec.source_namespace.clone()))
            .and_then(|l| l.catalog.as_ref())
            .and_then(|loaded| loaded.catalog.packages.get(&spec.name));
        with_deprecations(status, spec.channel.as_deref().unwrap_or_default(), package, now);
    }
}

/// The catalogs the namespace resolves from: those served, the global namespace's left out when its one
/// OperatorGroup asks (`EXCLUDE_GLOBAL_RESOLUTION`).
fn sources<'a>(loaded: &'a [Loaded], groups: &[OperatorGroup], global_namespace: &str) -> Vec<Source<'a>> {
    let exclude_global = matches!(groups, [group]
        if group.annotations().get(EXCLUDE_GLOBAL_RESOLUTION).map(String::as_str) == Some("true"));
    loaded
        .iter()
        .filter(|l| !(exclude_global && l.source.namespace().as_deref() == Some(global_namespace)))
        .filter_map(|l| {
            Some(Source {
                name: l.source.name_any(),
                namespace: l.source.namespace().unwrap_or_default(),
                priority: l.source.spec.priority.unwrap_or(0),
                catalog: l.catalog.as_ref()?.catalog.as_ref(),
            })
        })
        .collect()
}

/// Whether every Subscription waits on an InstallPlan.
fn all_waiting(next: &Statuses) -> bool {
    next.values().all(|status| status.install_plan_ref.is_some() && status.state == SubscriptionState::UpgradePending)
}

/// Each Subscription's status after resolution; while every one waits on plans, `currentCSV` stays the plans'.
fn resolution_states(
    next: &mut Statuses,
    subscriptions: &[Subscription],
    outcome: &Outcome,
    all_waiting: bool,
    now: &Time,
) {
    for subscription in subscriptions {
        let status = next.entry(subscription.name_any()).or_default();
        let resolved = match outcome {
            Outcome::Resolved { subscriptions, .. } => subscriptions.get(&subscription.name_any()),
            Outcome::Failed { .. } => None,
        };
        with_resolution(status, resolved.filter(|_| !all_waiting), outcome, now);
    }
}

/// Whether a failure with `message` is new to some Subscription (its Warning event is published once).
fn newly_failed(subscriptions: &[Subscription], message: &str) -> bool {
    subscriptions.iter().any(|subscription| {
        let conditions = subscription.status.as_ref().map(|status| status.conditions.as_slice()).unwrap_or_default();
        !conditions.iter().any(|c| c.type_ == RESOLUTION_FAILED && c.message.as_deref() == Some(message))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;

    use crate::api::v1alpha1::{CatalogSource, SubscriptionCondition};
    use crate::catalog::fbc::Catalog;
    use crate::catalog::LoadedCatalog;

    fn group(spec: serde_json::Value, annotations: serde_json::Value) -> OperatorGroup {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": "ops", "annotations": annotations}, "spec": spec}))
        .expect("group")
    }

    fn loaded(namespace: &str, served: bool) -> Loaded {
        let source: CatalogSource = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource", "metadata": {"name": "community", "namespace": namespace},
            "spec": {"sourceType": "grpc", "image": "catalog:latest"}}))
        .expect("source");
        let catalog = served.then(|| LoadedCatalog {
            image: "catalog:latest".into(),
            digest: "sha256:1".into(),
            catalog: Arc::new(Catalog::default()),
            config_map: None,
        });
        Loaded { source, catalog }
    }

    fn waiting(plan: Option<&str>, state: SubscriptionState) -> SubscriptionStatus {
        let install_plan_ref =
            plan.map(|name| ObjectReference { name: Some(name.into()), ..ObjectReference::default() });
        SubscriptionStatus { install_plan_ref, state, ..SubscriptionStatus::default() }
    }

    #[test]
    fn the_global_catalogs_are_left_out_only_when_the_one_group_asks_and_unserved_ones_always() {
        let catalogs = [loaded("ops", true), loaded("olm", true), loaded("olm", false)];
        let namespaces = |sources: Vec<Source<'_>>| sources.into_iter().map(|s| s.namespace).collect::<Vec<_>>();
        assert_eq!(namespaces(sources(&catalogs, &[group(json!({}), json!({}))], "olm")), ["ops", "olm"]);
        let excluding = group(json!({}), json!({EXCLUDE_GLOBAL_RESOLUTION: "true"}));
        assert_eq!(namespaces(sources(&catalogs, std::slice::from_ref(&excluding), "olm")), ["ops"]);
        let two = [excluding.clone(), excluding];
        assert_eq!(namespaces(sources(&catalogs, &two, "olm")), ["ops", "olm"], "only the namespace's one group");
    }

    #[test]
    fn failing_forward_is_the_one_groups_upgrade_strategy() {
        let forward = group(json!({"upgradeStrategy": "TechPreviewUnsafeFailForward"}), json!({}));
        assert!(fail_forward(std::slice::from_ref(&forward)));
        assert!(!fail_forward(&[group(json!({}), json!({}))]));
        assert!(!fail_forward(&[forward.clone(), forward]), "two groups: OLM's check needs exactly one");
    }

    #[test]
    fn a_namespace_waits_when_every_subscription_waits_on_a_pending_plan() {
        let pending = waiting(Some("install-1"), SubscriptionState::UpgradePending);
        let statuses = |list: &[SubscriptionStatus]| -> Statuses {
            list.iter().enumerate().map(|(at, status)| (format!("s{at}"), status.clone())).collect()
        };
        assert!(all_waiting(&statuses(&[pending.clone(), pending.clone()])));
        assert!(!all_waiting(&statuses(&[pending.clone(), waiting(None, SubscriptionState::UpgradePending)])));
        assert!(!all_waiting(&statuses(&[pending, waiting(Some("install-1"), SubscriptionState::AtLatestKnown)])));
    }

    #[test]
    fn a_resolution_failure_is_new_until_every_subscription_carries_its_message() {
        let failed = |message: &str| -> Subscription {
            let mut subscription: Subscription = serde_json::from_value(json!({
                "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
                "metadata": {"name": "plumbus", "namespace": "ops"},
                "spec": {"source": "community", "sourceNamespace": "olm", "name": "plumbus"}}))
            .expect("subscription");
            let condition = SubscriptionCondition {
                type_: RESOLUTION_FAILED.into(),
                status: "True".into(),
                message: Some(message.into()),
                ..SubscriptionCondition::default()
            };
            subscription.status = Some(SubscriptionStatus { conditions: vec![condition], ..Default::default() });
            subscription
        };
        assert!(!newly_failed(&[failed("no bundle")], "no bundle"));
        assert!(newly_failed(&[failed("no bundle"), failed("other")], "no bundle"));
        assert!(newly_failed(&[failed("other")], "no bundle"));
    }
}
