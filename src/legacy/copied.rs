//! The loop over copied CSVs (OLM v0's `syncCopiedCsv` and `requeueParentCsv`): a copy whose original is gone, failed
//! on a provided-API conflict or no longer targets its namespace is deleted (`copies::dangling`), and a copy changed by
//! anyone but this process wakes its original's pass, whose copier puts it back; the copies of a CSV an Install took
//! over go once an Operator adopts that Install (`adopted_copies`). Copies are watched as metadata only, so thousands
//! of them cost little memory; the original is read from the CSV loop's store and the copier's `ledger` says which
//! changes are this process's own, so a copy written by the copier costs no read.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use kube::api::{Api, ObjectMeta, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use super::adopted_copies::{adopted_operator, adopted_takeover, reowned, OperatorOwner};
use super::copier::is_copy_of;
use super::copier::ledger::Ledger;
use super::copies::{dangling, is_uncopiable, judge, Judgement};
use super::membership::{is_install_record, COPIED_FROM_LABEL};
use crate::api::v1::OPERATOR_NAMESPACE_ANNOTATION;
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::api::v2alpha1::Install;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::listing::Listing;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::install::content::CSV_RECORD_ANNOTATION;
use crate::runtime::Process;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use serde_json::json;
use tokio::sync::mpsc::UnboundedSender;

pub struct Context {
    client: ControllerClient,
    basics: Basics,
    /// The original CSVs, the CSV loop's store.
    originals: Store<ClusterServiceVersion>,
    /// Whether that store has listed the CSVs (the CSV loop's runner waits on the store's own readiness).
    originals_listed: Listing,
    /// What the copier wrote of each copy.
    ledger: Arc<Ledger>,
    /// Wakes an original's pass, which asks for its copies again.
    wake: UnboundedSender<ObjectRef<ClusterServiceVersion>>,
}

#[derive(Debug, thiserror::Error)]
#[error("failed to sync the copied CSV {namespace}/{name}")]
pub struct CopyError {
    namespace: String,
    name: String,
    #[source]
    source: ClientError,
}

impl Categorized for CopyError {
    fn category(&self) -> &'static str {
        "CopiedCsvSyncFailed"
    }

    fn is_conflict(&self) -> bool {
        self.source.is_conflict()
    }
}

impl Reconciler for Context {
    type Object = PartialObjectMeta<ClusterServiceVersion>;
    type Error = CopyError;
    const NAME: &'static str = "copied-csv";

    async fn reconcile(
        self: Arc<Self>,
        copy: Arc<PartialObjectMeta<ClusterServiceVersion>>,
    ) -> Result<Action, CopyError> {
        let (namespace, name) = (copy.namespace().unwrap_or_default(), copy.name_any());
        let error = |source| CopyError { namespace: namespace.clone(), name: name.clone(), source };
        let origin = copy
            .annotations()
            .get(OPERATOR_NAMESPACE_ANNOTATION)
            .or_else(|| copy.labels().get(COPIED_FROM_LABEL))
            .cloned()
            .unwrap_or_default();
        // The original as the CSV loop's watch holds it; a copy that looks dangling or orphaned by it is judged again
        // on the original and the copy read live (the store may lag), before anything is deleted.
        if !self.originals_listed.ready().await {
            return Ok(Action::await_change());
        }
        let stored = (!origin.is_empty()).then(|| self.originals.get(&ObjectRef::new(&name).within(&origin))).flatten();
        let own = self.ledger.is_own(&namespace, &name, copy.resource_version().as_deref());
        match (judge(&copy.metadata, stored.as_deref(), own), stored) {
            (Judgement::Keep, _) => return Ok(Action::await_change()),
            (Judgement::SyncOriginal, Some(parent)) => {
                let _ = self.wake.send(ObjectRef::from_obj(parent.as_ref()));
                return Ok(Action::await_change());
            }
            (Judgement::AdoptedRecord, Some(record)) => {
                return self.remove_if_adopted(&copy.metadata, &record).await.map_err(error);
            }
            _ => {}
        }
        let copies = self.client.namespaced::<ClusterServiceVersion>(&namespace);
        let Some(full) = copies.get_opt(&name).await.map_err(error)? else { return Ok(Action::await_change()) };
        let parent = if origin.is_empty() {
            None
        } else {
            self.client.namespaced::<ClusterServiceVersion>(&origin).get_opt(&name).await.map_err(error)?
        };
        if let Some(record) = parent.as_ref().filter(|parent| is_install_record(parent)) {
            return self.remove_if_adopted(&full.metadata, record).await.map_err(error);
        }
        if dangling(&full, parent.as_ref()) {
            tracing::info!(copy = %name, %namespace, "removing a copied CSV its original no longer wants");
            copies.ensure_deleted(&name).await.map_err(error)?;
            self.ledger.forget(&namespace, &name);
            return Ok(Action::await_change());
        }
        if let Some(parent) = parent.filter(|parent| !is_uncopiable(parent)) {
            let _ = self.wake.send(ObjectRef::from_obj(&parent));
        }
        Ok(Action::await_change())
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

impl Context {
    /// The copy of an operator OLM v0 installed that an Install took over (`record`, its original) goes once the
    /// Install is adopted. Copies of any other record are left as they are (an Install's record is never copied).
    async fn remove_if_adopted(
        &self,
        copy: &ObjectMeta,
        record: &ClusterServiceVersion,
    ) -> Result<Action, ClientError> {
        let install_name = record.annotations().get(CSV_RECORD_ANNOTATION).cloned().unwrap_or_default();
        if install_name.is_empty() {
            return Ok(Action::await_change());
        }
        let install = self.client.all::<Install>().get_opt(&install_name).await?;
        if let Some(operator) = install.as_ref().and_then(|install| adopted_operator(record, install)) {
            self.remove_for(copy, &operator).await?;
        }
        Ok(Action::await_change())
    }

    /// Passes what `copy` owns in its namespace (Roles and RoleBindings: what the CSV's operator was given there) to
    /// the Operator, then deletes the copy, orphaning any other dependent (`adopted_copies`).
    async fn remove_for(&self, copy: &ObjectMeta, operator: &OperatorOwner) -> Result<(), ClientError> {
        let (namespace, name) = (copy.namespace.clone().unwrap_or_default(), copy.name.clone().unwrap_or_default());
        let copy_uid = copy.uid.clone().unwrap_or_default();
        self.reown::<Role>(&namespace, &copy_uid, operator).await?;
        self.reown::<RoleBinding>(&namespace, &copy_uid, operator).await?;
        self.client.namespaced::<ClusterServiceVersion>(&namespace).delete_if_uid(&name, &copy_uid, true).await?;
        self.ledger.forget(&namespace, &name);
        tracing::info!(copy = %name, %namespace, operator = %operator.name, "removed the copy of an adopted operator's CSV");
        Ok(())
    }

    /// Gives the objects of kind `K` in `namespace` owned by the copy `copy_uid` the Operator as owner instead, each
    /// only at the version read.
    async fn reown<K>(&self, namespace: &str, copy_uid: &str, operator: &OperatorOwner) -> Result<(), ClientError>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let objects = self.client.namespaced::<K>(namespace);
        for object in objects.list().await? {
            if let Some(owners) = reowned(object.owner_references(), copy_uid, operator) {
                let body = json!({"metadata": {"ownerReferences": owners}});
                objects.merge_patch(&object.name_any(), &body, object.resource_version().as_deref()).await?;
            }
        }
        Ok(())
    }
}

/// The CSVs selected by `labels` that are deleted, as metadata.
pub fn deletions(
    client: kube::Client,
    labels: &str,
) -> impl futures_util::Stream<Item = Result<PartialObjectMeta<ClusterServiceVersion>, watcher::Error>> + Send + 'static
{
    use futures_util::StreamExt;
    let csvs = Api::<PartialObjectMeta<ClusterServiceVersion>>::all(client);
    watcher(csvs, watcher::Config::default().labels(labels)).default_backoff().filter_map(|event| async move {
        match event {
            Ok(watcher::Event::Delete(csv)) => Some(Ok(csv)),
            Ok(_) => None,
            Err(error) => Some(Err(error)),
        }
    })
}

/// Originals that are deleted, or that are Install records (their copies go once the Install is an Operator's:
/// `adopted_copies`), as metadata.
fn originals_followed(
    client: kube::Client,
) -> impl futures_util::Stream<Item = Result<PartialObjectMeta<ClusterServiceVersion>, watcher::Error>> + Send + 'static
{
    use futures_util::StreamExt;
    let csvs = Api::<PartialObjectMeta<ClusterServiceVersion>>::all(client);
    let originals = watcher::Config::default().labels(&format!("!{COPIED_FROM_LABEL}"));
    watcher(csvs, originals).default_backoff().filter_map(|event| async move {
        match event {
            Ok(watcher::Event::Delete(csv)) => Some(Ok(csv)),
            Ok(watcher::Event::Apply(csv) | watcher::Event::InitApply(csv))
                if csv.annotations().contains_key(CSV_RECORD_ANNOTATION) =>
            {
                Some(Ok(csv))
            }
            Ok(_) => None,
            Err(error) => Some(Err(error)),
        }
    })
}

/// Installs (as metadata) that took over a CSV and are controlled by an Operator: the copies of that CSV go then
/// (`adopted_copies`), and the Operator's reference may come after every change of the record. Every change of such
/// an Install wakes the copies still there: a pass that read the CSV loop's store before it held the record's
/// annotation keeps them, and the Install's next status write tries again; once they are gone, it wakes none.
fn installs_adopted(
    client: kube::Client,
) -> impl futures_util::Stream<Item = Result<PartialObjectMeta<Install>, watcher::Error>> + Send + 'static {
    use futures_util::TryStreamExt;
    watches::metadata::<Install>(client, watcher::Config::default())
        .applied_objects()
        .try_filter(|install| std::future::ready(adopted_takeover(&install.metadata).is_some()))
}

/// Keeps of a copy what this loop and the copier read from the store: its name, namespace, uid and resourceVersion,
/// its `olm.operatorNamespace` annotation and its `olm.copiedFrom` label, which the watch selects every stored copy
/// by. A copy carries its original's annotations (a real operator's examples and description among them, kilobytes),
/// and there is one per namespace; whether a copy drifted is judged on the copy read live. Where the label names the
/// namespace the annotation names, as the copier writes them, the labels go altogether (`copier::copied_from` reads
/// the label, else the annotation): a map is a node of half a KiB however few its entries (6.9 MiB less at 10,400
/// copies in the side-by-side bench, docs/operations.md).
fn what_copies_read(copy: &mut PartialObjectMeta<ClusterServiceVersion>) {
    fn only(map: &mut Option<BTreeMap<String, String>>, kept: &str) {
        if let Some(entries) = map.as_mut() {
            entries.retain(|key, _| key == kept);
        }
        if map.as_ref().is_some_and(BTreeMap::is_empty) {
            *map = None;
        }
    }
    watches::untyped(copy);
    let metadata = &mut copy.metadata;
    only(&mut metadata.annotations, OPERATOR_NAMESPACE_ANNOTATION);
    only(&mut metadata.labels, COPIED_FROM_LABEL);
    let named = |map: &Option<BTreeMap<String, String>>, key: &str| map.as_ref().and_then(|map| map.get(key)).cloned();
    let origin = named(&metadata.labels, COPIED_FROM_LABEL);
    if origin.is_some() && origin == named(&metadata.annotations, OPERATOR_NAMESPACE_ANNOTATION) {
        metadata.labels = None;
    }
}

/// The copies in `copies` of the CSV `name` in `namespace`.
fn copies_of(
    copies: &Store<PartialObjectMeta<ClusterServiceVersion>>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<PartialObjectMeta<ClusterServiceVersion>>> {
    copies
        .state()
        .iter()
        .filter(|copy| is_copy_of(copy, namespace, name))
        .map(|copy| ObjectRef::from_obj(copy.as_ref()))
        .collect()
}

/// The copied-CSV loop, built by the CSV loop, whose store of originals it reads (once `originals_listed`) and whose
/// passes it wakes (`wake`); its store of copies (metadata) is the copier's view of the cluster, listed once its
/// [`Listing`] says so.
pub fn controller(
    process: &Process,
    originals: Store<ClusterServiceVersion>,
    originals_listed: Listing,
    ledger: Arc<Ledger>,
    wake: UnboundedSender<ObjectRef<ClusterServiceVersion>>,
) -> (Store<PartialObjectMeta<ClusterServiceVersion>>, Listing, BoxFuture<'static, ()>) {
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), super::csv::FIELD_MANAGER),
        basics: process.basics(),
        originals,
        originals_listed,
        ledger,
        wake,
    });
    // Metadata only: `Api<PartialObjectMeta<_>>` watches and lists without specs and statuses.
    let (controller, copies_listed) = watches::controller_listed_kept(
        Api::<PartialObjectMeta<ClusterServiceVersion>>::all(client.clone()),
        watcher::Config::default().labels(COPIED_FROM_LABEL),
        what_copies_read,
    );
    let copies = controller.store();
    let (followed, adopting) = (copies.clone(), copies.clone());
    // An original deleted takes its copies with it (they are found dangling); one deleted while the controller was
    // down is found by the first pass over every copy. An original taken over by an Install wakes its copies too,
    // and so does that Install once an Operator adopts it.
    let controller = controller
        .watches_stream(
            originals_followed(client.clone()),
            move |original: PartialObjectMeta<ClusterServiceVersion>| {
                copies_of(&followed, &original.namespace().unwrap_or_default(), &original.name_any())
            },
        )
        .watches_stream(installs_adopted(client), move |install: PartialObjectMeta<Install>| {
            adopted_takeover(&install.metadata)
                .map(|(namespace, name)| copies_of(&adopting, &namespace, &name))
                .unwrap_or_default()
        });
    (copies, copies_listed, runner::run(controller, context, process.shutdown()).boxed())
}

#[cfg(test)]
mod tests {
    use kube::api::TypeMeta;
    use serde_json::json;

    use super::*;
    use crate::api::v1::OPERATOR_GROUP_ANNOTATION;
    use crate::legacy::copier::copied_from;

    fn original(targets: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "plumbus.v1", "namespace": "ops", "uid": "o",
                "annotations": {OPERATOR_NAMESPACE_ANNOTATION: "ops", "olm.targetNamespaces": targets}},
            "spec": {"displayName": "Plumbus", "install": {"strategy": "deployment"}},
            "status": {"phase": "Succeeded"}}))
        .expect("a CSV")
    }

    fn copy_in(namespace: &str) -> PartialObjectMeta<ClusterServiceVersion> {
        PartialObjectMeta {
            types: Some(TypeMeta { api_version: "meta.k8s.io/v1".into(), kind: "PartialObjectMetadata".into() }),
            metadata: serde_json::from_value(json!({"name": "plumbus.v1", "namespace": namespace, "uid": "c",
                "resourceVersion": "12",
                "labels": {COPIED_FROM_LABEL: "ops", "app.kubernetes.io/name": "plumbus"},
                "annotations": {OPERATOR_NAMESPACE_ANNOTATION: "ops", OPERATOR_GROUP_ANNOTATION: "global",
                    "alm-examples": "[{\"kind\": \"Plumbus\", \"spec\": {\"size\": 3}}]",
                    "description": "Makes plumbuses."}}))
            .expect("metadata"),
            _phantom: std::marker::PhantomData,
        }
    }

    #[test]
    fn a_stored_copy_keeps_only_what_is_read_and_is_judged_as_the_whole_copy() {
        let keys = |map: &Option<BTreeMap<String, String>>| {
            map.iter().flatten().map(|(key, _)| key.clone()).collect::<Vec<_>>()
        };
        // As the copier writes it; its annotation changed by hand; its annotation removed by hand.
        let annotated = |namespace: &str, operator_namespace: Option<&str>| {
            let mut copy = copy_in(namespace);
            let annotations = copy.metadata.annotations.get_or_insert_with(BTreeMap::new);
            match operator_namespace {
                Some(value) => annotations.insert(OPERATOR_NAMESPACE_ANNOTATION.to_owned(), value.to_owned()),
                None => annotations.remove(OPERATOR_NAMESPACE_ANNOTATION),
            };
            copy
        };
        for (operator_namespace, labels_kept) in [(Some("ops"), false), (Some("elsewhere"), true), (None, true)] {
            for (namespace, targets) in [("a", ""), ("a", "b"), ("ops", ""), ("b", "a,b")] {
                let whole = annotated(namespace, operator_namespace);
                let mut kept = whole.clone();
                what_copies_read(&mut kept);
                let case = format!("{namespace}, annotation {operator_namespace:?}, targets {targets:?}");
                assert_eq!(kept.types, None);
                let labels: &[&str] = if labels_kept { &[COPIED_FROM_LABEL] } else { &[] };
                assert_eq!(keys(&kept.metadata.labels), labels, "{case}");
                let annotations: &[&str] =
                    if operator_namespace.is_some() { &[OPERATOR_NAMESPACE_ANNOTATION] } else { &[] };
                assert_eq!(keys(&kept.metadata.annotations), annotations, "{case}");
                assert_eq!((kept.name_any(), kept.namespace()), (whole.name_any(), whole.namespace()));
                assert_eq!((kept.uid(), kept.resource_version()), (whole.uid(), whole.resource_version()));
                assert_eq!(copied_from(&kept), Some("ops"), "{case}");
                for origin in ["ops", "elsewhere", "a"] {
                    assert_eq!(is_copy_of(&kept, origin, "plumbus.v1"), origin == "ops", "{case}: {origin}");
                }
                for parent in [Some(original(targets)), None] {
                    for own in [true, false] {
                        let (kept_judged, whole_judged) =
                            (judge(&kept.metadata, parent.as_ref(), own), judge(&whole.metadata, parent.as_ref(), own));
                        assert_eq!(kept_judged, whole_judged, "{case}, own {own}");
                    }
                }
            }
        }
        let mut unannotated = annotated("a", None);
        what_copies_read(&mut unannotated);
        assert_eq!(judge(&unannotated.metadata, Some(&original("")), true), Judgement::ReadLive, "no namespace: read");
    }
}
