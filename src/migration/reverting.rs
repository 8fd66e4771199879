//! The reverting loop (with `--enable-v2alpha1`): every Operator annotated [`REVERT_ANNOTATION`] is made a
//! Subscription again when `revert_plan` says it can be, one step at a time so that a pass interrupted anywhere is
//! finished by the next: the Subscription made (on behalf of the Operator's creator), the Install handed to it (the
//! Subscription annotation back, the Operator's reference and label gone), the Operator deleted. Nothing is
//! re-installed: the Install, its account, grants and objects stay.

use std::ops::ControlFlow;
use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use serde_json::json;

use super::revert::{revert_pass, revert_plan, subscription_for, RevertPass, RevertPlan, REVERT_ANNOTATION};
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
use crate::controller::next;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::runtime::Process;
use crate::webhook::csv_author::recorded_author;

pub struct Context {
    client: ControllerClient,
    events: Events,
    default_namespace: String,
    controller_namespace: String,
    basics: Basics,
}

impl Reconciler for Context {
    type Object = Operator;
    type Error = AdoptionError;
    const NAME: &'static str = "revert";

    /// One pass: read the Operator's Installs and the Subscription of its name, decide (`revert_pass`, pure), then
    /// the steps in order: the Subscription, the Install handed over, the Operator deleted.
    async fn reconcile(self: Arc<Self>, operator: Arc<Operator>) -> Result<Action, AdoptionError> {
        let asked = operator.annotations().get(REVERT_ANNOTATION).is_some_and(|value| value == "true");
        if !asked || operator.metadata.deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let installs = self
            .client
            .all::<Install>()
            .list()
            .await
            .map_err(|source| AdoptionError::Read { what: "Installs", source })?;
        let plan = revert_plan(&operator, &installs, &self.default_namespace, &self.controller_namespace);
        let creator = operator.annotations().get(CREATOR_ANNOTATION).map(String::as_str);
        let existing = self
            .client
            .namespaced::<Subscription>(&plan.namespace)
            .get_opt(&plan.package)
            .await
            .map_err(|source| AdoptionError::Read { what: "the Subscription", source })?;
        let install = installs.iter().find(|install| install.name_any() == plan.install);
        match revert_pass(&operator, &plan, install, existing.as_ref(), creator) {
            RevertPass::Refuse(message) => {
                self.refuse(&operator, message).await;
                return Ok(Action::requeue(self.basics.resync));
            }
            RevertPass::Proceed { subscribe, hand_over } => {
                if subscribe {
                    next!(self.subscribe(&operator, &plan, creator).await?);
                }
                if let (true, Some(install)) = (hand_over, install) {
                    self.hand_over(&operator, &plan, install).await?;
                }
            }
        }
        self.delete_operator(&operator, &plan).await?;
        Ok(Action::await_change())
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

impl Context {
    /// Makes the Subscription on behalf of the Operator's creator, who must be able to make it by hand; a creator
    /// who may not is refused, and the pass ends.
    async fn subscribe(
        &self,
        operator: &Operator,
        plan: &RevertPlan,
        creator: Option<&str>,
    ) -> Result<ControlFlow<Action>, AdoptionError> {
        let key = format!("{}/{}", plan.namespace, plan.package);
        if !self.creator_may_subscribe(operator, &plan.namespace).await? {
            let who = recorded_author(operator.annotations()).map_or("nobody recorded".to_owned(), |c| c.username);
            let message = format!(
                "Operator {}'s creator ({who}) may not create Subscriptions in namespace {}: the Subscription would \
                 be made on their behalf",
                operator.name_any(),
                plan.namespace
            );
            self.refuse(operator, message).await;
            return Ok(ControlFlow::Break(Action::requeue(self.basics.resync)));
        }
        let body: Subscription = serde_json::from_value(subscription_for(plan, creator)).map_err(|error| {
            AdoptionError::CreateSubscription { name: key.clone(), source: ClientError::Encode(error) }
        })?;
        self.client
            .namespaced::<Subscription>(&plan.namespace)
            .create(&body)
            .await
            .map_err(|source| AdoptionError::CreateSubscription { name: key, source })?;
        Ok(ControlFlow::Continue(()))
    }

    /// Hands the Install to the Subscription while it is still the Operator's: the Subscription annotation back, the
    /// Operator's reference, label and adoption marks gone (at the version read).
    async fn hand_over(&self, operator: &Operator, plan: &RevertPlan, install: &Install) -> Result<(), AdoptionError> {
        let owners: Vec<serde_json::Value> = install
            .owner_references()
            .iter()
            .filter(|owner| Some(&owner.uid) != operator.uid().as_ref())
            .filter_map(|owner| serde_json::to_value(owner).ok())
            .collect();
        let body = json!({"metadata": {
            "labels": {component_label_key(&operator.name_any()): null},
            "annotations": {SUBSCRIPTION_ANNOTATION: format!("{}/{}", plan.namespace, plan.package),
                            ADOPTED_FROM_ANNOTATION: null, ADOPTED_FROM_UID_ANNOTATION: null},
            "ownerReferences": owners,
        }});
        self.client
            .all::<Install>()
            .merge_patch(&plan.install, &body, install.resource_version().as_deref())
            .await
            .map_err(|source| AdoptionError::HandBackInstall { install: plan.install.clone(), source })?;
        Ok(())
    }

    /// Deletes the Operator, which owns nothing of the operator any more (whatever it made meanwhile is orphaned,
    /// not deleted).
    async fn delete_operator(&self, operator: &Operator, plan: &RevertPlan) -> Result<(), AdoptionError> {
        let name = operator.name_any();
        let uid = operator.uid().unwrap_or_default();
        self.client
            .all::<Operator>()
            .delete_if_uid(&name, &uid, true)
            .await
            .map_err(|source| AdoptionError::DeleteOperator { name: name.clone(), source })?;
        tracing::info!(operator = %name, subscription = %format!("{}/{}", plan.namespace, plan.package), "reverted to a Subscription");
        Ok(())
    }

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
        basics: process.basics(),
    });
    // Woken by what others change (the revert annotation, a deletion), not by the Operator loop's status writes:
    // each component change wrote an Operator's status and woke this loop for nothing.
    // Its store holds no status: a revert reads the Operator's spec and annotations only. What a refusal waits on
    // (the Operator's Installs) wakes the Operators owning them.
    let installs = watches::metadata::<Install>(client.clone(), watcher::Config::default()).touched_objects();
    let controller = watches::controller_of_changes_kept(
        Api::<Operator>::all(client),
        watcher::Config::default(),
        watches::changed_by_others,
        |operator| operator.status = None,
    )
    .watches_stream(installs, |install| {
        install
            .owner_references()
            .iter()
            .find(|owner| owner.kind == "Operator")
            .map(|owner| ObjectRef::<Operator>::new(&owner.name))
    });
    runner::run(controller, context, process.shutdown()).boxed()
}
