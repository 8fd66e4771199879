//! The OperatorGroup loop of OLM v0: `decide` is one pass's decisions; `steps` reads what they need and writes what
//! they say; [`controller`] runs the pass, and is woken by the group's namespace-mates (the `MultipleOperatorGroup` condition), by namespace
//! label changes (selector groups), and by the CSVs of its namespace (annotations, provided APIs).

pub mod decide;
mod steps;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use self::decide::{decide, Observed};
use self::steps::Place;
use crate::api::v1::{
    OperatorGroup, OPERATOR_GROUP_ANNOTATION, OPERATOR_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION,
};
use crate::api::v1alpha1::{
    ApiServiceDefinitions, ApiServiceDescription, ClusterServiceVersion, ClusterServiceVersionSpec,
    ClusterServiceVersionStatus, CrdDescription, CustomResourceDefinitions,
};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::rbac_cache::RbacCache;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::install::content::CSV_RECORD_ANNOTATION;
use crate::runtime::Process;

/// The field manager of the OperatorGroup loop's writes.
pub const FIELD_MANAGER: &str = "olmv2-operatorgroup";

pub struct Context {
    client: ControllerClient,
    basics: Basics,
    /// The process's RBAC, for the group's aggregating ClusterRoles as stored.
    rbac: Arc<RbacCache>,
    /// The groups, the loop's own store: how many a namespace holds (listed live unless it shows exactly one).
    groups: Store<OperatorGroup>,
    /// The original CSVs, trimmed to what a pass reads ([`what_groups_read`]): a pass listed its namespace's CSVs
    /// live before.
    csvs: Store<ClusterServiceVersion>,
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

/// How long a pass waits for the CSVs' watch to list them once before listing them live.
pub(super) const CSVS_LISTED: Duration = Duration::from_secs(5);

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

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

/// One pass: observe, decide (`decide`, pure), then the write steps. A pass that stopped early (a missing account,
/// targets that cannot be computed) is retried; one that changed the targets comes back at once, so that members are
/// annotated from the status written.
async fn reconcile(ctx: &Context, group: &OperatorGroup) -> Result<Action, ReconcileError> {
    if group.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let place = Place::of(group);
    let read = steps::observe(ctx, group, &place).await?;
    let decision = decide(&Observed {
        group,
        groups_in_namespace: read.groups_in_namespace,
        account: read.account(),
        namespaces: &read.namespaces,
        csvs: &read.csvs,
        now: Time(k8s_openapi::jiff::Timestamp::now()),
    });
    steps::write_status(ctx, &decision, &place).await?;
    steps::label_account(ctx, &read, &place).await?;
    if let Some(reason) = &decision.stopped {
        tracing::warn!(operatorgroup = %place.name, namespace = %place.namespace, %reason, "operator group not synced");
        return Ok(Action::requeue(ctx.basics.retry));
    }
    if decision.targets_changed(group) {
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    steps::annotate_members(ctx, &decision, &place).await?;
    steps::ensure_roles(ctx, &decision, &place).await?;
    steps::prune_provided_apis(ctx, group, &decision, &place).await?;
    Ok(Action::requeue(ctx.basics.resync))
}

/// Starts the OperatorGroup loop.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let controller = watches::controller(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default());
    let groups = controller.store();
    let (csvs, csvs_writer) = kube::runtime::reflector::store::<ClusterServiceVersion>();
    let csv_changes = kube::runtime::reflector(
        csvs_writer,
        watches::trimmed(Api::all(client.clone()), csv_watch()).modify(what_groups_read),
    );
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        basics: process.basics(),
        rbac: process.rbac.clone(),
        groups: groups.clone(),
        csvs,
    });
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
        .watches_stream(csv_changes.touched_objects(), move |csv| {
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

/// Keeps of a CSV what a group's pass reads (`decide`): its metadata with the group's and the install record's
/// annotations, its owned APIs without their descriptors, its phase. The install strategy, descriptions, icons and
/// `last-applied-configuration` (a copy of the whole CSV) are most of a CSV, and this loop holds every original.
fn what_groups_read(csv: &mut ClusterServiceVersion) {
    const READ: [&str; 4] =
        [OPERATOR_GROUP_ANNOTATION, OPERATOR_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION, CSV_RECORD_ANNOTATION];
    if let Some(annotations) = &mut csv.metadata.annotations {
        annotations.retain(|key, _| READ.contains(&key.as_str()));
    }
    let crds = csv.spec.custom_resource_definitions.take().map(|crds| CustomResourceDefinitions {
        owned: crds
            .owned
            .into_iter()
            .map(|crd| CrdDescription {
                name: crd.name,
                version: crd.version,
                kind: crd.kind,
                ..CrdDescription::default()
            })
            .collect(),
        ..CustomResourceDefinitions::default()
    });
    let apis = csv.spec.api_service_definitions.take().map(|apis| ApiServiceDefinitions {
        owned: apis
            .owned
            .into_iter()
            .map(|api| ApiServiceDescription {
                name: api.name,
                group: api.group,
                version: api.version,
                kind: api.kind,
                ..ApiServiceDescription::default()
            })
            .collect(),
        ..ApiServiceDefinitions::default()
    });
    csv.spec = ClusterServiceVersionSpec {
        custom_resource_definitions: crds,
        api_service_definitions: apis,
        ..ClusterServiceVersionSpec::default()
    };
    let phase = csv.status.as_ref().map(|status| status.phase).unwrap_or_default();
    csv.status = Some(ClusterServiceVersionStatus { phase, ..ClusterServiceVersionStatus::default() });
}

/// The CSVs that concern groups: originals only (copies carry `olm.copiedFrom`), so that thousands of copies are
/// neither held nor watched here.
pub fn csv_watch() -> watcher::Config {
    watcher::Config::default().labels(&format!("!{}", super::membership::COPIED_FROM_LABEL))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::decide::{decide, Account, Observed};
    use super::*;

    fn member(name: &str, annotations: serde_json::Value, phase: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "ops", "annotations": annotations},
            "spec": {"description": "long", "install": {"strategy": "deployment", "spec": {"deployments": [
                         {"name": "plumbus", "spec": {"selector": {}, "template": {}}}]}},
                     "customresourcedefinitions": {
                         "owned": [{"name": "plumbuses.example.com", "version": "v1", "kind": "Plumbus",
                                    "displayName": "Plumbus", "specDescriptors": [{"path": "size"}]}],
                         "required": [{"name": "grumbos.example.com", "version": "v1", "kind": "Grumbo"}]},
                     "apiservicedefinitions": {"owned": [{"name": "fleebs", "group": "fleeb.example.com",
                         "version": "v1", "kind": "Fleeb", "deploymentName": "plumbus"}]}},
            "status": {"phase": phase, "reason": "InstallSucceeded", "message": "done"}}))
        .expect("csv")
    }

    /// The group's pass decides the same on the CSVs as this loop stores them as on the CSVs as they are: members
    /// to annotate, the roles' APIs, the provided APIs pruned or waited for.
    #[test]
    fn a_pass_decides_the_same_on_trimmed_csvs() {
        let group: OperatorGroup = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup", "metadata": {"name": "og", "namespace": "ops",
                "annotations": {"olm.providedAPIs": "Gone.v1.example.com,Plumbus.v1.example.com"}},
            "spec": {}, "status": {"namespaces": [""]}}))
        .expect("group");
        let annotated = json!({"olm.operatorGroup": "og", "olm.operatorNamespace": "ops", "olm.targetNamespaces": "",
            "kubectl.kubernetes.io/last-applied-configuration": "{}", "alm-examples": "[]"});
        let record = json!({"v2alpha1.operators.coreos.com/install-record": "x"});
        let cases = [
            vec![member("a", json!({"alm-examples": "[]"}), "Succeeded")],
            vec![member("a", annotated.clone(), "Succeeded")],
            vec![member("a", annotated, "Pending"), member("b", json!({}), "")],
            vec![member("a", record, "Succeeded")],
        ];
        for csvs in cases {
            let trimmed: Vec<ClusterServiceVersion> = csvs
                .iter()
                .cloned()
                .map(|mut csv| {
                    what_groups_read(&mut csv);
                    csv
                })
                .collect();
            assert!(trimmed.iter().all(|csv| csv.spec.install.spec.deployments.is_empty()
                && csv.spec.description.is_none()
                && !csv.annotations().contains_key("kubectl.kubernetes.io/last-applied-configuration")));
            let observed = |csvs| Observed {
                group: &group,
                groups_in_namespace: 1,
                account: Account::NotNamed,
                namespaces: &[],
                csvs,
                now: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            };
            assert_eq!(decide(&observed(&trimmed)), decide(&observed(&csvs)));
        }
    }
}
