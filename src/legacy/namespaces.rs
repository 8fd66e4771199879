//! The namespace labels of OLM v0's `syncNamespace`: a namespace targeted by an OperatorGroup that does not target
//! every namespace carries `olm.operatorgroup.uid/<group uid>: ""` (operators' webhooks select namespaces with it),
//! and loses it when the group stops targeting it, turns global, or goes. A loop over namespaces, woken by every
//! group change, so that a label is never left behind, even for a group deleted while the controller was down.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::{json, Map, Value};

use crate::api::v1::OperatorGroup;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::listing;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::runtime::Process;

/// The prefix of a namespace's group label keys.
pub const GROUP_LABEL_PREFIX: &str = "olm.operatorgroup.uid/";

/// The uids of the groups that target `namespace` and do not target every namespace (from their status, as OLM).
pub fn targeting_groups<'a>(namespace: &str, groups: impl IntoIterator<Item = &'a OperatorGroup>) -> BTreeSet<String> {
    groups
        .into_iter()
        .filter(|group| group.metadata.deletion_timestamp.is_none())
        .filter_map(|group| {
            let namespaces = &group.status.as_ref()?.namespaces;
            let global = namespaces.iter().any(String::is_empty);
            (!global && namespaces.iter().any(|target| target == namespace)).then(|| group.uid()).flatten()
        })
        .collect()
}

/// The merge patch that brings a namespace's group labels to `wanted` (uids), or None when they are right.
pub fn label_patch(labels: &BTreeMap<String, String>, wanted: &BTreeSet<String>) -> Option<Value> {
    let mut patch = Map::new();
    for key in labels.keys().filter(|key| key.starts_with(GROUP_LABEL_PREFIX)) {
        if !wanted.contains(&key[GROUP_LABEL_PREFIX.len()..]) {
            patch.insert(key.clone(), Value::Null);
        }
    }
    for uid in wanted {
        let key = format!("{GROUP_LABEL_PREFIX}{uid}");
        if !labels.contains_key(&key) {
            patch.insert(key, json!(""));
        }
    }
    (!patch.is_empty()).then(|| json!({"metadata": {"labels": patch}}))
}

pub struct Context {
    client: ControllerClient,
    groups: Store<OperatorGroup>,
    basics: Basics,
}

/// How long a pass waits for the OperatorGroups to be listed before it tries again later.
const GROUPS_LISTED: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
#[error("failed to write the OperatorGroup labels of namespace {namespace}")]
pub struct LabelError {
    namespace: String,
    #[source]
    source: ClientError,
}

impl Categorized for LabelError {
    fn category(&self) -> &'static str {
        "NamespaceLabelFailed"
    }
}

impl Reconciler for Context {
    type Object = PartialObjectMeta<Namespace>;
    type Error = LabelError;
    const NAME: &'static str = "operatorgroup-namespaces";

    async fn reconcile(self: Arc<Self>, namespace: Arc<PartialObjectMeta<Namespace>>) -> Result<Action, LabelError> {
        let name = namespace.name_any();
        // Until every group has been read, a missing one would look deleted and its labels would be removed. The
        // wait is bounded: a stopping controller no longer polls the watch that lists them, and a pass waiting for
        // ever held the stop for its whole grace.
        if !listing::listed(&self.groups, GROUPS_LISTED).await {
            return Ok(Action::requeue(self.basics.retry));
        }
        let groups = self.groups.state();
        let wanted = targeting_groups(&name, groups.iter().map(AsRef::as_ref));
        if let Some(patch) = label_patch(namespace.labels(), &wanted) {
            self.client
                .all::<Namespace>()
                .merge_patch(&name, &patch, None)
                .await
                .map_err(|source| LabelError { namespace: name.clone(), source })?;
        }
        Ok(Action::await_change())
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

/// Drops from a namespace's metadata what the loop does not read: annotations, owners, finalizers and every label
/// but the groups' (a map of one label, `kubernetes.io/metadata.name`, is a node of half a KiB; a thousand
/// namespaces, a thousand of them).
fn group_labels_only(namespace: &mut PartialObjectMeta<Namespace>) {
    watches::untyped(namespace);
    let metadata = &mut namespace.metadata;
    metadata.annotations = None;
    metadata.owner_references = None;
    metadata.finalizers = None;
    let labels = metadata.labels.take().unwrap_or_default();
    let kept: BTreeMap<String, String> =
        labels.into_iter().filter(|(key, _)| key.starts_with(GROUP_LABEL_PREFIX)).collect();
    metadata.labels = (!kept.is_empty()).then_some(kept);
}

/// Starts the namespace label loop.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let (groups, writer) = kube::runtime::reflector::store::<OperatorGroup>();
    let group_changes = kube::runtime::reflector(
        writer,
        watches::trimmed(Api::<OperatorGroup>::all(client.clone()), watcher::Config::default()),
    );
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), super::operatorgroup::FIELD_MANAGER),
        groups,
        basics: process.basics(),
    });
    // Names and the groups' labels are all a pass reads: the store holds namespaces' metadata, and of it no more.
    let controller = watches::controller_kept(
        Api::<PartialObjectMeta<Namespace>>::all(client),
        watcher::Config::default(),
        group_labels_only,
    );
    let namespaces = controller.store();
    let controller = controller.watches_stream(
        kube::runtime::WatchStreamExt::touched_objects(group_changes),
        move |group: OperatorGroup| {
            // The namespaces the group targets now, and those labelled for it (which it may no longer target).
            let label = format!("{GROUP_LABEL_PREFIX}{}", group.uid().unwrap_or_default());
            let targeted: BTreeSet<String> = group
                .status
                .map(|status| status.namespaces)
                .unwrap_or_default()
                .into_iter()
                .filter(|n| !n.is_empty())
                .collect();
            namespaces
                .state()
                .iter()
                .filter(|namespace| targeted.contains(&namespace.name_any()) || namespace.labels().contains_key(&label))
                .map(|namespace| ObjectRef::from_obj(namespace.as_ref()))
                .collect::<Vec<_>>()
        },
    );
    runner::run(controller, context, process.shutdown()).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(uid: &str, namespaces: &[&str], deleting: bool) -> OperatorGroup {
        let mut group: OperatorGroup = serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1",
            "kind": "OperatorGroup", "metadata": {"name": uid, "namespace": "ops", "uid": uid}, "spec": {},
            "status": {"namespaces": namespaces}}))
        .expect("group");
        if deleting {
            group.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        group
    }

    /// A pass while the groups are not listed yet (their watch stopped, as in a stopping controller) comes back
    /// after its retry interval rather than waiting for them, and writes nothing.
    #[tokio::test(start_paused = true)]
    async fn a_pass_before_the_groups_are_listed_is_tried_again_rather_than_waiting() {
        let (groups, _writer) = kube::runtime::reflector::store::<OperatorGroup>();
        // Nothing answers at this address: a write would fail the pass.
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().expect("url"))).expect("client");
        let retry = Duration::from_secs(30);
        let context = Arc::new(Context {
            client: ControllerClient::new(client, "test"),
            groups,
            basics: Basics { metrics: Arc::default(), retry, resync: Duration::from_secs(300) },
        });
        // Labelled for a group: with the groups taken as read (none), the pass would remove the label.
        let mut namespace = PartialObjectMeta::<Namespace>::default();
        namespace.metadata.name = Some("ops".into());
        namespace.metadata.labels = Some(BTreeMap::from([(format!("{GROUP_LABEL_PREFIX}x"), String::new())]));
        let pass = tokio::time::timeout(Duration::from_secs(60), context.reconcile(Arc::new(namespace))).await;
        let action = pass.expect("the pass ends while the groups are unlisted").expect("no write failed");
        assert_eq!(action, Action::requeue(retry));
    }

    #[test]
    fn a_stored_namespace_keeps_only_the_groups_labels() {
        let types = kube::api::TypeMeta { api_version: "meta.k8s.io/v1".into(), kind: "PartialObjectMetadata".into() };
        let mut namespace = PartialObjectMeta::<Namespace> { types: Some(types), ..Default::default() };
        namespace.metadata.name = Some("ops".into());
        namespace.metadata.annotations = Some(BTreeMap::from([("a".to_owned(), "b".to_owned())]));
        namespace.metadata.finalizers = Some(vec!["kubernetes".to_owned()]);
        namespace.metadata.owner_references = Some(vec![Default::default()]);
        let group_label = format!("{GROUP_LABEL_PREFIX}x");
        namespace.metadata.labels = Some(BTreeMap::from([
            ("kubernetes.io/metadata.name".to_owned(), "ops".to_owned()),
            (group_label.clone(), String::new()),
        ]));
        group_labels_only(&mut namespace);
        assert_eq!(namespace.labels(), &BTreeMap::from([(group_label, String::new())]));
        assert!(namespace.annotations().is_empty());
        assert!(namespace.finalizers().is_empty() && namespace.owner_references().is_empty());
        assert_eq!(namespace.name_any(), "ops");
        assert_eq!(namespace.types, None, "the store's type says what it holds");
        namespace.metadata.labels = Some(BTreeMap::from([("team".to_owned(), "a".to_owned())]));
        group_labels_only(&mut namespace);
        assert_eq!(namespace.metadata.labels, None, "no group label: no map");
    }

    #[test]
    fn only_groups_targeting_some_namespaces_label_them() {
        let groups = [
            group("a", &["x", "y"], false),
            group("b", &[""], false),
            group("c", &["x"], true),
            group("d", &["y"], false),
        ];
        assert_eq!(targeting_groups("x", &groups), BTreeSet::from(["a".to_owned()]));
        assert_eq!(targeting_groups("y", &groups), BTreeSet::from(["a".to_owned(), "d".to_owned()]));
        assert!(targeting_groups("z", &groups).is_empty());
    }

    #[test]
    fn labels_follow_the_groups_and_others_are_untouched() {
        let labels: BTreeMap<String, String> = [
            ("olm.operatorgroup.uid/gone".to_owned(), String::new()),
            ("olm.operatorgroup.uid/kept".to_owned(), String::new()),
            ("team".to_owned(), "x".to_owned()),
        ]
        .into();
        let wanted = BTreeSet::from(["kept".to_owned(), "new".to_owned()]);
        assert_eq!(
            label_patch(&labels, &wanted),
            Some(
                json!({"metadata": {"labels": {"olm.operatorgroup.uid/gone": null, "olm.operatorgroup.uid/new": ""}}})
            )
        );
        let settled: BTreeMap<String, String> =
            [("olm.operatorgroup.uid/kept".to_owned(), String::new()), ("team".to_owned(), "x".to_owned())].into();
        assert_eq!(label_patch(&settled, &BTreeSet::from(["kept".to_owned()])), None);
    }
}
