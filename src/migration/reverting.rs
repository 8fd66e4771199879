//! The reverting loop (with `--enable-v2alpha1`): every Operator annotated [`REVERT_ANNOTATION`] is made a
//! Subscription again when `revert_plan` says it can be, one step at a time so that a pass interrupted anywhere is
//! finished by the next: the Subscription made (on behalf of the Operator's creator), the Install handed to it (the
//! Subscription annotation back, the Operator's reference and label gone), the Operator deleted. Nothing is
//! re-installed: the Install, its account, grants and objects stay.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::json;

use super::revert::{made_by_plan, revert_plan, subscription_for, REVERT_ANNOTATION};
use super::AdoptionError;
use crate::access::{allowed, AccessCheck};
use crate::api::component::component_label_key;
use crate::api::v1alpha1::Subscription;
use crate::api::v2alpha1::{
    Install, Operator, ADOPTED_FROM_ANNOTATION, ADOPTED_FROM_UID_ANNOTATION, CREATOR_ANNOTATION,
    SUBSCRIPTION_ANNOTATION,
};
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::conditions::Transition;
use crate::controller::events::Events;
use crate::controller::runner::{self, Reconciler};
use crate::controller::watches;
use crate::metrics::Metrics;
use crate::runtime::Process;
use crate::webhook::csv_author::recorded_author;

pub struct Context {
    client: ControllerClient,
    events: Events,
    default_namespace: String,
    controller_namespace: String,
    metrics: Arc<Metrics>,
    retry: Duration,
    resync: Duration,
}

impl Reconciler for Context {
    type Object = Operator;
    type Error = AdoptionError;
    const NAME: &'static str = "revert";

    async fn reconcile(self: Arc<Self>, operator: Arc<Operator>) -> Result<Action, AdoptionError> {
        let asked = operator.annotations().get(REVERT_ANNOTATION).is_some_and(|value| value == "true");
        if !asked || operator.metadata.deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let name = operator.name_any();
        let installs = self
            .client
            .all::<Install>()
            .list()
            .await
            .map_err(|source| AdoptionError::Read { what: "Installs", source })?;
        let plan = revert_plan(&operator, &installs, &self.default_namespace, &self.controller_namespace);
        let creator = operator.annotations().get(CREATOR_ANNOTATION).map(String::as_str);
        let subscriptions = self.client.namespaced::<Subscription>(&plan.namespace);
        let existing = subscriptions
            .get_opt(&plan.package)
            .await
            .map_err(|source| AdoptionError::Read { what: "the Subscription", source })?;
        let ours = existing.as_ref().is_some_and(|s| made_by_plan(s, &plan, creator));
        let install = installs.iter().find(|install| install.name_any() == plan.install);
        let key = format!("{}/{}", plan.namespace, plan.package);
        let owned_by_it =
            install.is_some_and(|i| i.owner_references().iter().any(|o| Some(&o.uid) == operator.uid().as_ref()));
        // A pass that handed the Install over already: only the Operator is left to delete.
        let handed_over = ours
            && install.is_some_and(|i| {
                i.owner_references().iter().all(|o| o.kind != "Operator")
                    && i.annotations().get(SUBSCRIPTION_ANNOTATION) == Some(&key)
            });
        if !handed_over {
            if let Some(blocked) = &plan.blocked {
                self.refuse(&operator, blocked.message.clone()).await;
                return Ok(Action::requeue(self.resync));
            }
            if !owned_by_it {
                let message =
                    format!("Install {} is not Operator {name}'s: there is nothing to hand back", plan.install);
                self.refuse(&operator, message).await;
                return Ok(Action::requeue(self.resync));
            }
            // 1. The Subscription, made on behalf of the Operator's creator, who must be able to make it.
            match &existing {
                Some(_) if ours => {}
                Some(_) => {
                    let message = format!(
                        "a Subscription {key} exists that is not the one Operator {name} becomes: it is left alone"
                    );
                    self.refuse(&operator, message).await;
                    return Ok(Action::requeue(self.resync));
                }
                None => {
                    if !self.creator_may_subscribe(&operator, &plan.namespace).await? {
                        let author = recorded_author(operator.annotations());
                        let who = author.map_or("nobody recorded".to_owned(), |c| c.username);
                        let message = format!(
                            "Operator {name}'s creator ({who}) may not create Subscriptions in namespace {}: the \
                             Subscription would be made on their behalf",
                            plan.namespace
                        );
                        self.refuse(&operator, message).await;
                        return Ok(Action::requeue(self.resync));
                    }
                    let body: Subscription =
                        serde_json::from_value(subscription_for(&plan, creator)).map_err(|error| {
                            AdoptionError::CreateSubscription { name: key.clone(), source: ClientError::Encode(error) }
                        })?;
                    subscriptions
                        .create(&body)
                        .await
                        .map_err(|source| AdoptionError::CreateSubscription { name: key.clone(), source })?;
                }
            }
            // 2. The Install handed to the Subscription, while it is still the Operator's.
            if let Some(install) = install {
                let owners: Vec<serde_json::Value> = install
                    .owner_references()
                    .iter()
                    .filter(|owner| Some(&owner.uid) != operator.uid().as_ref())
                    .filter_map(|owner| serde_json::to_value(owner).ok())
                    .collect();
                let body = json!({"metadata": {
                    "labels": {component_label_key(&name): null},
                    "annotations": {SUBSCRIPTION_ANNOTATION: key, ADOPTED_FROM_ANNOTATION: null,
                                    ADOPTED_FROM_UID_ANNOTATION: null},
                    "ownerReferences": owners,
                }});
                self.client
                    .all::<Install>()
                    .merge_patch(&plan.install, &body, install.resource_version().as_deref())
                    .await
                    .map_err(|source| AdoptionError::HandBackInstall { install: plan.install.clone(), source })?;
            }
        }
        // 3. The Operator, which owns nothing of the operator any more (whatever it made meanwhile is orphaned, not
        // deleted).
        let uid = operator.uid().unwrap_or_default();
        self.client
            .all::<Operator>()
            .delete_if_uid(&name, &uid, true)
            .await
            .map_err(|source| AdoptionError::DeleteOperator { name: name.clone(), source })?;
        tracing::info!(operator = %name, subscription = %key, "reverted to a Subscription");
        Ok(Action::await_change())
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn retry(&self) -> Duration {
        self.retry
    }
}

impl Context {
    /// Whether the Operator's creator may create Subscriptions in `namespace` (what making one by hand takes).
    async fn creator_may_subscribe(&self, operator: &Operator, namespace: &str) -> Result<bool, AdoptionError> {
        let Some(creator) = recorded_author(operator.annotations()) else { return Ok(false) };
        let check = AccessCheck::resource(Some(namespace), "create", "operators.coreos.com", "subscriptions", "");
        allowed(self.client.kube(), &creator, &check).await.map_err(|source| AdoptionError::ReviewAccess {
            user: creator.username.clone(),
            what: format!("Subscriptions of namespace {namespace}"),
            source,
        })
    }

    async fn refuse(&self, operator: &Operator, message: String) {
        tracing::info!(operator = %operator.name_any(), "{message}");
        let transition = Transition { warning: true, reason: "RevertFailed".into(), note: message };
        self.events.publish(operator, &[transition]).await;
    }
}

/// Starts the reverting loop (with `--enable-v2alpha1`).
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let options = &process.options;
    if !options.enable_v2alpha1 {
        return process.disabled("revert", "--enable-v2alpha1");
    }
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), super::FIELD_MANAGER),
        events: Events::new(client.clone(), "olmv2-adoption"),
        default_namespace: options.operator_namespace.clone(),
        controller_namespace: options.namespace.clone(),
        metrics: process.metrics.clone(),
        retry: options.retry,
        resync: options.resync,
    });
    let controller = watches::controller(Api::<Operator>::all(client), watcher::Config::default());
    runner::run(controller, context, process.shutdown()).boxed()
}
