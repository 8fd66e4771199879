//! Migration from OLM v0's Subscriptions to Operators (`docs/migration.md`). `plan` decides, for every Subscription,
//! which Operator adopts it and what is left to do; this loop does it for the Subscriptions it is asked to adopt
//! (`--adopt-subscriptions`, or a namespace annotated [`ADOPT_ANNOTATION`]), one step at a time so that a pass
//! interrupted anywhere is finished by the next: the Operator made (or an existing one associated), the Install put
//! under it, the Subscription deleted. The running operator is never touched: its Install, account, grants and
//! applied objects stay; the Operator's label reaches them as its Install applies again. `olmv2 migrate` (in
//! `cmd::migrate`) prints the same plan, and asks for it.

pub mod plan;
pub mod revert;
pub mod reverting;
pub mod snapshot;

pub use snapshot::Snapshot;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::json;

use crate::access::{allowed, AccessCheck};
use crate::api::component::component_label_key;
use crate::api::v1alpha1::Subscription;
use crate::api::v2alpha1::{
    Install, Operator, OperatorSpec, UpdateApproval, ADOPTED_FROM_ANNOTATION, ADOPTED_FROM_UID_ANNOTATION,
    CREATOR_ANNOTATION, OPERATOR_INSTALL_ANNOTATION, SUBSCRIPTION_ANNOTATION,
};
use crate::catalog::CatalogCache;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::conditions::Transition;
use crate::controller::events::Events;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::install::cluster::creator_of;
use crate::runtime::Process;
use crate::webhook::csv_author::recorded_author;
use plan::{adopted_from, CsvTakeover, OperatorChoice, SubscriptionPlan};

/// A namespace annotated so (`"true"`) has its Subscriptions adopted into Operators.
pub const ADOPT_ANNOTATION: &str = "operators.coreos.com/adopt-subscriptions";

/// The field manager of the adoption loop's writes.
pub const FIELD_MANAGER: &str = "olmv2-adoption";

pub struct Context {
    client: ControllerClient,
    events: Events,
    catalogs: Arc<CatalogCache>,
    /// Every namespace is asked (`--adopt-subscriptions`).
    all: bool,
    default_namespace: String,
    basics: Basics,
}

#[derive(Debug, thiserror::Error)]
pub enum AdoptionError {
    #[error("failed to read {what}")]
    Read {
        what: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("failed to create Install {name}")]
    CreateInstall {
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to create Operator {name}")]
    CreateOperator {
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to associate Operator {name} with Install {install}")]
    AssociateOperator {
        name: String,
        install: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to put Install {install} under Operator {operator}")]
    AdoptInstall {
        install: String,
        operator: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to delete Subscription {subscription}")]
    DeleteSubscription {
        subscription: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to create Subscription {name}")]
    CreateSubscription {
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to hand Install {install} back to its Subscription")]
    HandBackInstall {
        install: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to delete Operator {name}")]
    DeleteOperator {
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("Operator {name} was created by someone else meanwhile")]
    OperatorTaken { name: String },
    #[error("failed to review whether {user} may use {what}")]
    ReviewAccess {
        user: String,
        what: String,
        #[source]
        source: kube::Error,
    },
}

impl Categorized for AdoptionError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "AdoptionReadFailed",
            Self::CreateOperator { .. } => "OperatorCreateFailed",
            Self::CreateInstall { .. } => "InstallCreateFailed",
            Self::AssociateOperator { .. } => "OperatorAssociateFailed",
            Self::AdoptInstall { .. } => "InstallAdoptFailed",
            Self::DeleteSubscription { .. } => "SubscriptionDeleteFailed",
            Self::ReviewAccess { .. } => "AccessReviewFailed",
            Self::OperatorTaken { .. } => "OperatorNameTaken",
            Self::CreateSubscription { .. } => "SubscriptionCreateFailed",
            Self::DeleteOperator { .. } => "OperatorDeleteFailed",
            Self::HandBackInstall { .. } => "InstallHandBackFailed",
        }
    }
}

/// Whether a namespace's annotations ask for its Subscriptions to be adopted.
pub fn asks_adoption(annotations: &BTreeMap<String, String>) -> bool {
    annotations.get(ADOPT_ANNOTATION).is_some_and(|value| value == "true")
}

impl Reconciler for Context {
    type Object = Subscription;
    type Error = AdoptionError;
    const NAME: &'static str = "adoption";

    async fn reconcile(self: Arc<Self>, subscription: Arc<Subscription>) -> Result<Action, AdoptionError> {
        if subscription.metadata.deletion_timestamp.is_some() {
            return Ok(Action::await_change());
        }
        let namespace = subscription.namespace().unwrap_or_default();
        let name = subscription.name_any();
        // Cheap first: most Subscriptions are in namespaces nobody asked to migrate.
        if !self.all {
            let namespaces = self.client.all::<PartialObjectMeta<Namespace>>();
            let read = |source| AdoptionError::Read { what: "Namespace", source };
            let asked =
                namespaces.get_opt(&namespace).await.map_err(read)?.is_some_and(|n| asks_adoption(n.annotations()));
            if !asked {
                return Ok(Action::await_change());
            }
        }
        let snapshot = Snapshot::read(&self.client, Some(&self.catalogs)).await?;
        let plans = snapshot.plan(self.all, &self.default_namespace);
        let Some(plan) = plans.into_iter().find(|p| p.namespace == namespace && p.name == name) else {
            return Ok(Action::await_change());
        };
        if let Some(blocked) = &plan.blocked {
            let key = format!("{namespace}/{name}");
            tracing::info!(subscription = %key, reason = blocked.reason, "{}", blocked.message);
            let transition = Transition {
                warning: !blocked.transient,
                reason: "AdoptionFailed".into(),
                note: blocked.message.clone(),
            };
            self.events.publish(&*subscription, &[transition]).await;
            return Ok(Action::requeue(if blocked.transient { self.basics.retry } else { self.basics.resync }));
        }
        self.adopt(&subscription, &plan, &snapshot).await?;
        Ok(Action::await_change())
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

impl Context {
    /// The steps of `plan` not done yet, in order.
    async fn adopt(
        &self,
        subscription: &Subscription,
        plan: &SubscriptionPlan,
        snapshot: &Snapshot,
    ) -> Result<(), AdoptionError> {
        if let Some(takeover) = plan.takeover.as_ref().filter(|takeover| takeover.to_create) {
            return self.create_takeover(subscription, plan, takeover).await;
        }
        let (Some(choice), Some(install_name)) = (&plan.operator, &plan.install) else { return Ok(()) };
        let origin = adopted_from(&plan.namespace, &plan.name);
        let Some(install) = snapshot.installs.iter().find(|install| install.name_any() == *install_name) else {
            return Ok(());
        };
        let operators = self.client.all::<Operator>();
        let operator = if !choice.exists {
            self.create_operator(subscription, choice, install, &origin).await?
        } else {
            let existing = operators
                .get(&choice.name)
                .await
                .map_err(|source| AdoptionError::Read { what: "the Operator", source })?;
            if choice.associated {
                existing
            } else {
                let body = json!({"metadata": {"annotations": {
                    OPERATOR_INSTALL_ANNOTATION: install_name, ADOPTED_FROM_ANNOTATION: origin}}});
                operators.merge_patch(&choice.name, &body, existing.resource_version().as_deref()).await.map_err(
                    |source| AdoptionError::AssociateOperator {
                        name: choice.name.clone(),
                        install: install_name.clone(),
                        source,
                    },
                )?
            }
        };
        let subscription_uid = subscription.uid().unwrap_or_default();
        if !plan.install_adopted {
            let owner = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
                "name": operator.name_any(), "uid": operator.uid().unwrap_or_default(),
                "controller": true, "blockOwnerDeletion": true});
            // A merge patch replaces the list: the references it has (none, as the controller made it) are kept.
            let mut owners: Vec<serde_json::Value> =
                install.owner_references().iter().filter_map(|o| serde_json::to_value(o).ok()).collect();
            owners.push(owner);
            let body = json!({"metadata": {
                "labels": {component_label_key(&operator.name_any()): ""},
                "annotations": {SUBSCRIPTION_ANNOTATION: null, ADOPTED_FROM_ANNOTATION: origin,
                                ADOPTED_FROM_UID_ANNOTATION: subscription_uid},
                "ownerReferences": owners,
            }});
            self.client
                .all::<Install>()
                .merge_patch(install_name, &body, install.resource_version().as_deref())
                .await
                .map_err(|source| AdoptionError::AdoptInstall {
                    install: install_name.clone(),
                    operator: operator.name_any(),
                    source,
                })?;
            let operator_name = operator.name_any();
            tracing::info!(install = %install_name, operator = %operator_name, "the Install is under its Operator");
        }
        let key = format!("{}/{}", plan.namespace, plan.name);
        self.client
            .namespaced::<Subscription>(&plan.namespace)
            .delete_if_uid(&plan.name, &subscription_uid, false)
            .await
            .map_err(|source| AdoptionError::DeleteSubscription { subscription: key.clone(), source })?;
        tracing::info!(subscription = %key, operator = %operator.name_any(), "adopted");
        Ok(())
    }

    /// Makes the Install that takes over an operator OLM v0 installed (`plan::takeover_manifest`): the first step of
    /// its adoption, the others waiting until a person approved what it needs and it applied. One made by a pass
    /// that did not see the answer is found by the next.
    async fn create_takeover(
        &self,
        subscription: &Subscription,
        plan: &SubscriptionPlan,
        takeover: &CsvTakeover,
    ) -> Result<(), AdoptionError> {
        let (Some(image), Some(name)) = (takeover.image.as_deref(), plan.install.as_ref()) else { return Ok(()) };
        let body = plan::takeover_manifest(subscription, &takeover.csv, &takeover.uid, image);
        let install: Install = serde_json::from_value(body)
            .map_err(|error| AdoptionError::CreateInstall { name: name.clone(), source: ClientError::Encode(error) })?;
        match self.client.all::<Install>().create(&install).await {
            Ok(_) => {}
            Err(error) if error.code() == Some(409) => return Ok(()),
            Err(source) => return Err(AdoptionError::CreateInstall { name: name.clone(), source }),
        }
        let note = format!(
            "made Install {name} to take over CSV {}, which OLM v0 installed, from bundle {image}: it waits for a \
             person who holds what it needs to approve it (`olmv2 migrate apply --approve`, or `kubectl olmv2 approve \
             {name}`), then the Subscription is adopted",
            takeover.csv
        );
        tracing::info!(install = %name, csv = %takeover.csv, "{note}");
        let transition = Transition { warning: false, reason: "TakeoverInstallCreated".into(), note };
        self.events.publish(subscription, &[transition]).await;
        Ok(())
    }

    /// Creates the Operator for `plan` on behalf of the Subscription's author (the Install's creator), named
    /// after the package. It keeps Automatic updates only when that author may `install` from the CatalogSource,
    /// what naming a CatalogSource in an Operator takes: otherwise every update waits for a person (Manual), and
    /// an event says why.
    async fn create_operator(
        &self,
        subscription: &Subscription,
        choice: &OperatorChoice,
        install: &Install,
        origin: &str,
    ) -> Result<Operator, AdoptionError> {
        let mut spec = choice.spec.clone();
        let demoted_because = self.demote_unless_allowed(subscription, choice, install, origin, &mut spec).await?;
        let body = operator_manifest(choice, install, origin, &spec)?;
        let created = self.create_or_find_operator(&body, choice, install, origin).await?;
        tracing::info!(operator = %choice.name, subscription = %origin, "created an Operator for a Subscription");
        if let Some(note) = demoted_because {
            let transition = Transition { warning: true, reason: "AdoptedWithManualApproval".into(), note };
            self.events.publish(&created, &[transition]).await;
        }
        Ok(created)
    }

    /// Keeps the Automatic updates of `spec`'s CatalogSource only when the Subscription's authors may `install` from
    /// it (`lacking_install`); otherwise makes them Manual and answers the note saying why, for an event.
    async fn demote_unless_allowed(
        &self,
        subscription: &Subscription,
        choice: &OperatorChoice,
        install: &Install,
        origin: &str,
        spec: &mut OperatorSpec,
    ) -> Result<Option<String>, AdoptionError> {
        let catalog = subscription.spec.source.clone();
        let catalog_namespace = subscription.spec.source_namespace.clone();
        let Some(updates) = spec.updates.as_mut().and_then(|u| u.catalog_source.as_mut()) else { return Ok(None) };
        if updates.approval != UpdateApproval::Automatic {
            return Ok(None);
        }
        let Some(who) = self.lacking_install(subscription, install, &catalog_namespace, &catalog).await? else {
            return Ok(None);
        };
        updates.approval = UpdateApproval::Manual;
        Ok(Some(format!(
            "{origin} approved its updates automatically, but its author ({who}) may not install from \
             CatalogSource {catalog_namespace}/{catalog}: every update of Operator {} waits for a person; \
             grant the verb install on it and set approval: Automatic to change that",
            choice.name
        )))
    }

    /// Who may not `install` from CatalogSource `catalog_namespace/catalog` ("nobody recorded" when one is not
    /// known), if anyone: both whom the Install was made for (the Operator's creator) and whoever last wrote the
    /// Subscription's spec (its recorded author) chose that catalog.
    async fn lacking_install(
        &self,
        subscription: &Subscription,
        install: &Install,
        catalog_namespace: &str,
        catalog: &str,
    ) -> Result<Option<String>, AdoptionError> {
        let creator = creator_of(install);
        let check = AccessCheck::resource(
            Some(catalog_namespace),
            "install",
            "operators.coreos.com",
            "catalogsources",
            catalog,
        );
        // (Whoever created it or last changed its spec.)
        let author = recorded_author(subscription.annotations());
        for person in [&creator, &author] {
            let Some(person) = person else { return Ok(Some("nobody recorded".to_owned())) };
            let may =
                allowed(self.client.kube(), person, &check).await.map_err(|source| AdoptionError::ReviewAccess {
                    user: person.username.clone(),
                    what: format!("CatalogSource {catalog_namespace}/{catalog}"),
                    source,
                })?;
            if !may {
                return Ok(Some(person.username.clone()));
            }
        }
        Ok(None)
    }

    /// Creates the Operator `body` for `choice`, or finds it. Made by a pass that did not get to see its answer, it
    /// is the one; made by someone else meanwhile, it is not, and the next pass finds the name taken.
    async fn create_or_find_operator(
        &self,
        body: &Operator,
        choice: &OperatorChoice,
        install: &Install,
        origin: &str,
    ) -> Result<Operator, AdoptionError> {
        let operators = self.client.all::<Operator>();
        match operators.create(body).await {
            Ok(created) => Ok(created),
            Err(error) if error.code() == Some(409) => {
                let found = operators
                    .get(&choice.name)
                    .await
                    .map_err(|source| AdoptionError::Read { what: "the Operator", source })?;
                let annotations = found.annotations();
                let ours = annotations.get(OPERATOR_INSTALL_ANNOTATION) == Some(&install.name_any())
                    && annotations.get(ADOPTED_FROM_ANNOTATION).map(String::as_str) == Some(origin);
                if !ours {
                    return Err(AdoptionError::OperatorTaken { name: choice.name.clone() });
                }
                Ok(found)
            }
            Err(source) => Err(AdoptionError::CreateOperator { name: choice.name.clone(), source }),
        }
    }
}

/// The Operator generated for `choice` with `spec`: it names the Install it takes over and the Subscription it
/// adopts (`origin`), and carries the creator the Install recorded, whose rights its Install keeps.
fn operator_manifest(
    choice: &OperatorChoice,
    install: &Install,
    origin: &str,
    spec: &OperatorSpec,
) -> Result<Operator, AdoptionError> {
    let mut annotations = json!({OPERATOR_INSTALL_ANNOTATION: install.name_any(), ADOPTED_FROM_ANNOTATION: origin});
    if let Some(recorded) = install.annotations().get(CREATOR_ANNOTATION) {
        annotations[CREATOR_ANNOTATION] = json!(recorded);
    }
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v2alpha1",
        "kind": "Operator",
        "metadata": {"name": choice.name, "annotations": annotations},
        "spec": spec,
    }))
    .map_err(|error| AdoptionError::CreateOperator { name: choice.name.clone(), source: ClientError::Encode(error) })
}

/// Starts the adoption loop (with `--enable-v2alpha1`): every Subscription, woken also when its namespace asks for
/// adoption and when its Install changes (installed at last, or adopted by a pass that did not finish).
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let options = &process.options;
    if !options.enable_v2alpha1 {
        return process.disabled("adoption", "--enable-v2alpha1");
    }
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        events: Events::new(client.clone(), "olmv2-adoption"),
        catalogs: process.catalogs.clone(),
        all: options.adopt_subscriptions,
        default_namespace: options.operator_namespace.clone(),
        basics: process.basics(),
    });
    let controller = watches::controller(Api::<Subscription>::all(client.clone()), watcher::Config::default());
    let subscriptions = controller.store();
    let controller = controller
        .watches(Api::<Namespace>::all(client.clone()), watcher::Config::default(), move |namespace| {
            if !asks_adoption(namespace.annotations()) {
                return Vec::new();
            }
            let name = namespace.name_any();
            subscriptions
                .state()
                .iter()
                .filter(|subscription| subscription.namespace().as_deref() == Some(name.as_str()))
                .map(|subscription| ObjectRef::from_obj(subscription.as_ref()))
                .collect()
        })
        .watches(Api::<Install>::all(client), watcher::Config::default(), |install| {
            let annotations = install.annotations();
            let key = annotations.get(SUBSCRIPTION_ANNOTATION).map(String::as_str).or_else(|| {
                annotations.get(ADOPTED_FROM_ANNOTATION).and_then(|origin| origin.strip_prefix("Subscription "))
            })?;
            let (namespace, name) = key.split_once('/')?;
            Some(ObjectRef::<Subscription>::new(name).within(namespace))
        });
    runner::run(controller, context, process.shutdown()).boxed()
}
