//! The OperatorGroup loop of OLM v0: `decide` is one pass's decisions; [`controller`] reads what they need, writes
//! what they say, and is woken by the group's namespace-mates (the `MultipleOperatorGroup` condition), by namespace
//! label changes (selector groups), and by the CSVs of its namespace (annotations, provided APIs).

pub mod decide;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;
use serde_json::json;

use self::decide::{decide, Account, Observed};
use super::roles::role_differs;
use crate::api::v1::{OperatorGroup, PROVIDED_APIS_ANNOTATION};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::runner::{self, Reconciler};
use crate::controller::watches;
use crate::metrics::Metrics;
use crate::runtime::Process;

/// The field manager of the OperatorGroup loop's writes.
pub const FIELD_MANAGER: &str = "olmv2-operatorgroup";

pub struct Context {
    client: ControllerClient,
    metrics: Arc<Metrics>,
    retry: Duration,
    resync: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("failed to read what OperatorGroup {namespace}/{name} needs ({what})")]
    Read {
        namespace: String,
        name: String,
        what: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("failed to write {what} of OperatorGroup {namespace}/{name}")]
    Write {
        namespace: String,
        name: String,
        what: String,
        #[source]
        source: ClientError,
    },
}

impl Categorized for ReconcileError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "OperatorGroupReadFailed",
            Self::Write { .. } => "OperatorGroupWriteFailed",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Self::Read { source, .. } | Self::Write { source, .. } => source.is_conflict(),
        }
    }
}

impl Reconciler for Context {
    type Object = OperatorGroup;
    type Error = ReconcileError;
    const NAME: &'static str = "operatorgroup";

    async fn reconcile(self: Arc<Self>, group: Arc<OperatorGroup>) -> Result<Action, ReconcileError> {
        reconcile(&self, &group).await
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn retry(&self) -> Duration {
        self.retry
    }
}

async fn reconcile(ctx: &Context, group: &OperatorGroup) -> Result<Action, ReconcileError> {
    if group.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = group.namespace().unwrap_or_default();
    let name = group.name_any();
    let read = |what: &'static str| {
        let (namespace, name) = (namespace.clone(), name.clone());
        move |source| ReconcileError::Read { namespace, name, what, source }
    };
    let groups = ctx.client.namespaced::<OperatorGroup>(&namespace).list().await.map_err(read("OperatorGroups"))?;
    let account_name = group.spec.service_account_name.clone().filter(|name| !name.is_empty());
    let account = match &account_name {
        Some(account) => ctx
            .client
            .namespaced::<ServiceAccount>(&namespace)
            .get_opt(account)
            .await
            .map_err(read("ServiceAccount"))?,
        None => None,
    };
    let namespaces = if group.spec.target_namespaces.is_empty() && !group.spec.is_global() {
        ctx.client
            .all::<Namespace>()
            .list()
            .await
            .map_err(read("Namespaces"))?
            .into_iter()
            .map(|namespace| (namespace.name_any(), namespace.metadata.labels.unwrap_or_default()))
            .collect()
    } else {
        Vec::new()
    };
    let csvs = ctx.client.namespaced::<ClusterServiceVersion>(&namespace).list().await.map_err(read("CSVs"))?;
    let observed = Observed {
        group,
        groups_in_namespace: groups.len(),
        account: match (&account_name, &account) {
            (None, _) => Account::NotNamed,
            (Some(name), None) => Account::Missing(name),
            (Some(_), Some(account)) => Account::Found(account),
        },
        namespaces: &namespaces,
        csvs: &csvs,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
    };
    let decision = decide(&observed);
    let write = |what: &str| {
        let (namespace, name, what) = (namespace.clone(), name.clone(), what.to_owned());
        move |source| ReconcileError::Write { namespace, name, what, source }
    };
    let groups_api = ctx.client.namespaced::<OperatorGroup>(&namespace);
    if let Some(status) = &decision.status {
        groups_api.apply_status(&name, status, None).await.map_err(write("the status"))?;
    }
    let unlabelled =
        account.as_ref().is_some_and(|account| account.labels().get("olm.managed").map(String::as_str) != Some("true"));
    if let (Some(account), true) = (&account_name, unlabelled) {
        // OLM marks the account it installs with as OLM-managed.
        let label = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account,
            "namespace": namespace, "labels": {"olm.managed": "true"}}});
        ctx.client
            .namespaced::<ServiceAccount>(&namespace)
            .apply(account, &label, None)
            .await
            .map_err(write("the label of its ServiceAccount"))?;
    }
    if let Some(reason) = decision.stopped {
        tracing::warn!(operatorgroup = %name, namespace = %namespace, %reason, "operator group not synced");
        return Ok(Action::requeue(ctx.retry));
    }
    if decision
        .status
        .as_ref()
        .is_some_and(|status| status.namespaces != group.status.clone().unwrap_or_default().namespaces)
    {
        // The targets changed: members are annotated on the next pass, from the status written.
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    let csvs_api = ctx.client.namespaced::<ClusterServiceVersion>(&namespace);
    for (csv, annotations) in &decision.annotate {
        csvs_api
            .merge_patch(csv, &json!({"metadata": {"annotations": annotations}}), None)
            .await
            .map_err(write(&format!("the annotations of CSV {csv}")))?;
    }
    let roles = ctx.client.all::<ClusterRole>();
    for role in &decision.roles {
        let role_name = role["metadata"]["name"].as_str().unwrap_or_default();
        let current = roles.get_opt(role_name).await.map_err(read("ClusterRoles"))?;
        if role_differs(current.as_ref(), role) {
            roles.apply(role_name, role, None).await.map_err(write(&format!("ClusterRole {role_name}")))?;
        }
    }
    if let Some(provided) = &decision.provided_apis {
        let patch = json!({"metadata": {"annotations": {PROVIDED_APIS_ANNOTATION: provided}}});
        groups_api
            .merge_patch(&name, &patch, group.metadata.resource_version.as_deref())
            .await
            .map_err(write(PROVIDED_APIS_ANNOTATION))?;
    }
    Ok(Action::requeue(ctx.resync))
}

/// Starts the OperatorGroup loop.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        metrics: process.metrics.clone(),
        retry: process.options.retry,
        resync: process.options.resync,
    });
    let controller = watches::controller(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default());
    let groups = controller.store();
    let siblings = groups.clone();
    let selecting = groups.clone();
    let controller = controller
        .watches(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default(), move |changed| {
            // A group joining or leaving a namespace changes its mates' MultipleOperatorGroup condition.
            let namespace = changed.namespace();
            siblings
                .state()
                .iter()
                .filter(|group| group.namespace() == namespace)
                .map(|group| ObjectRef::from_obj(group.as_ref()))
                .collect::<Vec<_>>()
        })
        // Which namespaces exist is all a selector needs: their metadata is watched, not whole objects.
        .watches_stream(
            watches::metadata::<Namespace>(client.clone(), watcher::Config::default()).touched_objects(),
            move |_| {
                selecting
                    .state()
                    .iter()
                    .filter(|group| group.spec.target_namespaces.is_empty() && !group.spec.is_global())
                    .map(|group| ObjectRef::from_obj(group.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .watches(Api::<ClusterServiceVersion>::all(client), csv_watch(), move |csv| {
            let namespace = csv.namespace();
            groups
                .state()
                .iter()
                .filter(|group| group.namespace() == namespace)
                .map(|group| ObjectRef::from_obj(group.as_ref()))
                .collect::<Vec<_>>()
        });
    runner::run(controller, context, process.shutdown()).boxed()
}

/// The CSVs that concern groups: originals only (copies carry `olm.copiedFrom`), so that thousands of copies are
/// neither held nor watched here.
pub fn csv_watch() -> watcher::Config {
    watcher::Config::default().labels(&format!("!{}", super::membership::COPIED_FROM_LABEL))
}
