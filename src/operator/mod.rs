//! The Operator controller: the single entry point users apply. `components`, `index`, `status`, `desired` and
//! `dependencies` decide; `watch` keeps the component index from one watch per component kind; `source` reads the
//! source (a bundle image or a catalog, with the dependencies of what it resolved); `reconcile` brings the
//! Operator's Installs to what it resolved, and writes the status; `projection` carries component labels onto what
//! OLM v0's loops generate; [`controller`] runs them for every Operator.

pub mod components;
pub mod dependencies;
pub mod desired;
pub mod index;
pub mod kinds;
pub mod projection;
pub mod reconcile;
pub mod source;
pub mod status;
pub mod watch;

use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::watcher;

use crate::api::v2alpha1::Operator;
use crate::controller::client::ControllerClient;
use crate::controller::events::Events;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::runtime::Process;
use reconcile::{Context, OperatorOptions, ReconcileError, FIELD_MANAGER};

/// Starts the Operator controller: every Operator, woken also by any change of its components.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let options = &process.options;
    if !options.enable_v2alpha1 {
        return process.disabled("operator", "--enable-v2alpha1");
    }
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        events: Events::new(client.clone(), "olmv2-operator-controller"),
        index: Arc::default(),
        catalogs: process.catalogs.clone(),
        options: OperatorOptions { install_namespace: options.operator_namespace.clone() },
        basics: process.basics(),
    });
    let triggers = watch::component_triggers(client.clone(), context.index.clone());
    // Not woken by its own status writes: every component change made two passes, the second finding nothing to do.
    // Its components, Install and dependencies wake it through the triggers.
    let operators = Api::<Operator>::all(client);
    let controller = watches::controller_of_changes(operators, watcher::Config::default(), watches::changed_by_others)
        .reconcile_on(triggers);
    runner::run(controller, context, process.shutdown()).boxed()
}

impl Reconciler for Context {
    type Object = Operator;
    type Error = ReconcileError;
    const NAME: &'static str = "operator";

    async fn reconcile(self: Arc<Self>, operator: Arc<Operator>) -> Result<Action, ReconcileError> {
        reconcile::reconcile(operator, self).await
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}
