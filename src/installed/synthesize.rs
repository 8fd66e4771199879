//! What the Installed API holds (seed 002, 'The `Installed` Resource'), decided from the cluster's CSVs,
//! Subscriptions, OperatorGroups and Installs: each operator installed (an original CSV: an Install's record, or a CSV
//! OLM v0 or a person installed; never a copy) is listed in every namespace it watches, named after its CSV, with the
//! Subscription that installed it (the one of its namespace whose `installedCSV` it is) and the CSV sanitized (no
//! `olm.targetNamespaces`, no client or author records) in its status, and the labels `operators.coreos.com/csv` and
//! `operators.coreos.com/sub`. What a request builds is all there is: nothing is stored per namespace. Pure functions.
//!
//! Where an operator is listed is read only from what the controller writes, never from the CSV, which whoever may
//! write CSVs in its namespace writes whole (forged `olm.targetNamespaces` would list a CSV in
//! namespaces its author holds no rights in). The `status.namespaces` of the one OperatorGroup of its namespace
//! (OLM v0's rule: several groups are none); without one, its own namespace, except for an Install's record that
//! the Install's status lists as applied, which watches what the Install decided without a group.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use serde_json::{json, Value};

use crate::api::v1::{OperatorGroup, TARGET_NAMESPACES_ANNOTATION};
use crate::api::v1alpha1::is_copied;
use crate::api::v1alpha1::{ClusterServiceVersion, Subscription};
use crate::api::v2alpha1::{Install, CREATOR_ANNOTATION};

/// The group, version and kind served.
pub const GROUP: &str = "packages.operators.coreos.com";
pub const VERSION: &str = "v2alpha1";
pub const KIND: &str = "Installed";

/// The labels naming what an Installed object tracks.
pub const CSV_LABEL: &str = "operators.coreos.com/csv";
pub const SUBSCRIPTION_LABEL: &str = "operators.coreos.com/sub";

/// CSV annotations never shown to the readers of a namespace the operator watches: where else it watches, and who
/// created or last applied it (a person's name and groups, a client's whole copy of the object).
const SANITIZED_ANNOTATIONS: &[&str] =
    &[TARGET_NAMESPACES_ANNOTATION, CREATOR_ANNOTATION, "kubectl.kubernetes.io/last-applied-configuration"];

/// Which namespaces an installed operator watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Watches {
    All,
    Namespaces(BTreeSet<String>),
}

impl Watches {
    pub fn includes(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Namespaces(namespaces) => namespaces.contains(namespace),
        }
    }
}

/// An installed operator, as the Installed API tracks it.
#[derive(Clone, Debug)]
pub struct Tracked<'a> {
    pub csv: &'a ClusterServiceVersion,
    pub subscription: Option<&'a Subscription>,
    pub watches: Watches,
}

/// The OperatorGroups as the Installed API keeps them, by (namespace, name): each one's `status.namespaces`, which
/// only the controller's OperatorGroup loop (or OLM v0's) writes; `[""]` means all namespaces, as in OLM v0. The
/// group's spec is not kept: whoever may write the group writes it, and it is the status that says what the
/// controller made of it.
pub type Groups = BTreeMap<(String, String), Vec<String>>;

/// What an Install's status says it applied, as the Installed API keeps it: the Install's uid and the CSVs among
/// what it applied, as (namespace, name). Only the controller writes an Install's status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub uid: String,
    pub csvs: BTreeSet<(String, String)>,
}

impl Applied {
    pub fn of(install: &Install) -> Self {
        let csvs = install
            .status
            .iter()
            .flat_map(|status| &status.applied)
            .filter(|object| object.kind == "ClusterServiceVersion" && is_olm(&object.api_version))
            .filter_map(|object| Some((object.namespace.clone()?, object.name.clone())))
            .collect();
        Self { uid: install.metadata.uid.clone().unwrap_or_default(), csvs }
    }
}

/// The Installs as the Installed API keeps them, by name (Installs are cluster-scoped).
pub type Installs = BTreeMap<String, Applied>;

fn is_olm(api_version: &str) -> bool {
    api_version.split_once('/').is_some_and(|(group, _)| group == "operators.coreos.com")
}

/// The targets the status of `group` names (none while the controller has not written them).
pub fn group_targets(group: &OperatorGroup) -> Vec<String> {
    group.status.as_ref().map(|status| status.namespaces.clone()).unwrap_or_default()
}

/// What, beside its CSV, says where an operator is listed: only objects and fields the controller writes.
#[derive(Clone, Copy, Debug)]
pub struct Reach<'a> {
    pub groups: &'a Groups,
    pub installs: &'a Installs,
}

/// Which namespaces an operator watches, as its CSV's namespace decides and never as the CSV says: the
/// `status.namespaces` of the OperatorGroup of its namespace when there is exactly one (none yet: its own); with
/// none, or several (which OLM v0 fails as `TooManyOperatorGroups`), its own namespace, except for an Install's
/// record, which watches what the Install decides without one group (`install::content::target_namespaces`: all
/// namespaces when the CSV supports `AllNamespaces`). A CSV's `olm.targetNamespaces` and `olm.operatorGroup` are
/// never read: whoever may write a CSV writes them.
pub fn watches(csv: &ClusterServiceVersion, reach: Reach<'_>) -> Watches {
    let namespace = csv.namespace().unwrap_or_default();
    let mut groups = reach
        .groups
        .range((namespace.clone(), String::new())..)
        .take_while(|((group_namespace, _), _)| *group_namespace == namespace);
    if let (Some((_, targets)), None) = (groups.next(), groups.next()) {
        return if targets.is_empty() { Watches::Namespaces(BTreeSet::from([namespace])) } else { of_targets(targets) };
    }
    if applied_by_install(csv, reach.installs) {
        return of_targets(&csv.spec.targets_without_group(&namespace));
    }
    Watches::Namespaces(BTreeSet::from([namespace]))
}

/// Targets as OperatorGroups and Installs write them: `""` among them means all namespaces.
fn of_targets(targets: &[String]) -> Watches {
    if targets.iter().any(String::is_empty) {
        Watches::All
    } else {
        Watches::Namespaces(targets.iter().cloned().collect())
    }
}

/// Whether `csv` is a record an Install applied: it names an Install as its owner, and that Install (the same
/// uid) lists it, in its status, among what it applied. The record annotation and owner references are the CSV's,
/// which whoever may write CSVs in the namespace writes; the Install's status is the controller's, and there is one
/// CSV of a name in a namespace: the one the Install applied (kept so by its drift checks).
fn applied_by_install(csv: &ClusterServiceVersion, installs: &Installs) -> bool {
    let key = (csv.namespace().unwrap_or_default(), csv.name_any());
    csv.owner_references().iter().filter(|owner| owner.kind == "Install" && is_olm(&owner.api_version)).any(|owner| {
        installs.get(&owner.name).is_some_and(|applied| applied.uid == owner.uid && applied.csvs.contains(&key))
    })
}

/// Every installed operator: the original CSVs, each with the Subscription of its namespace installing it and the
/// namespaces it watches.
pub fn tracked<'a>(
    csvs: &'a [ClusterServiceVersion],
    subscriptions: &'a [Subscription],
    reach: Reach<'_>,
) -> Vec<Tracked<'a>> {
    let mut tracked: Vec<Tracked<'a>> = csvs
        .iter()
        .filter(|csv| !is_copied(csv))
        .map(|csv| Tracked {
            csv,
            subscription: subscriptions.iter().find(|subscription| {
                subscription.namespace() == csv.namespace()
                    && subscription.status.as_ref().and_then(|s| s.installed_csv.as_deref())
                        == Some(csv.name_any().as_str())
            }),
            watches: watches(csv, reach),
        })
        .collect();
    tracked.sort_by_key(|t| (t.csv.name_any(), t.csv.namespace()));
    tracked
}

/// The CSV as an Installed object shows it: without the annotations only the operator's namespace may read, its
/// managed fields and resourceVersion (those of the Installed object are its own).
pub fn sanitized(csv: &ClusterServiceVersion) -> Value {
    shown(csv, "ClusterServiceVersion")
}

/// An OLM object (`operators.coreos.com/v1alpha1` `kind`) as an Installed object shows it: without its managed
/// fields and the annotations only its namespace may read.
fn shown(object: &impl serde::Serialize, kind: &str) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or_else(|_| json!({}));
    value["apiVersion"] = json!("operators.coreos.com/v1alpha1");
    value["kind"] = json!(kind);
    if let Some(metadata) = value["metadata"].as_object_mut() {
        metadata.remove("managedFields");
        if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.retain(|key, _| !SANITIZED_ANNOTATIONS.contains(&key.as_str()));
        }
    }
    value
}

/// The Installed object of `tracked` in `namespace`.
pub fn installed(tracked: &Tracked<'_>, namespace: &str) -> Value {
    let name = tracked.csv.name_any();
    let mut labels = json!({CSV_LABEL: name});
    let mut status = json!({"clusterServiceVersion": sanitized(tracked.csv)});
    if let Some(subscription) = tracked.subscription {
        labels[SUBSCRIPTION_LABEL] = json!(subscription.name_any());
        status["subscription"] = shown(subscription, "Subscription");
    }
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "creationTimestamp": tracked.csv.metadata.creation_timestamp},
        "status": status,
    })
}

/// The Installed objects of `namespace`, in name order.
pub fn installed_in(tracked: &[Tracked<'_>], namespace: &str) -> Vec<Value> {
    tracked.iter().filter(|t| t.watches.includes(namespace)).map(|t| installed(t, namespace)).collect()
}

/// The columns `kubectl get installed` prints (seed 002): NAME, INSTALLATION_NAMESPACE, CHANNEL, CURRENT_VERSION,
/// TARGET_VERSION, PHASE.
pub const COLUMNS: [&str; 6] =
    ["NAME", "INSTALLATION_NAMESPACE", "CHANNEL", "CURRENT_VERSION", "TARGET_VERSION", "PHASE"];

/// The row of `tracked`: the CSV's name, namespace and version, the Subscription's channel, the version of the CSV
/// the Subscription moves to (`currentCSV`, when it is among `csvs`; the installed version otherwise) and the
/// CSV's phase.
pub fn row(tracked: &Tracked<'_>, csvs: &[ClusterServiceVersion]) -> [String; 6] {
    let csv = tracked.csv;
    let version = csv.spec.version.clone().unwrap_or_default();
    let subscription = tracked.subscription;
    let channel = subscription.and_then(|s| s.spec.channel.clone()).unwrap_or_default();
    let target = subscription
        .and_then(|s| s.status.as_ref()?.current_csv.as_deref())
        .and_then(|current| {
            csvs.iter()
                .find(|other| other.name_any() == current && other.namespace() == csv.namespace() && !is_copied(other))
        })
        .and_then(|target| target.spec.version.clone())
        .unwrap_or_else(|| version.clone());
    let phase = csv
        .status
        .as_ref()
        .and_then(|status| serde_json::to_value(status.phase).ok())
        .and_then(|phase| phase.as_str().map(str::to_owned))
        .unwrap_or_default();
    [csv.name_any(), csv.namespace().unwrap_or_default(), channel, version, target, phase]
}

#[cfg(test)]
#[path = "synthesize_tests.rs"]
mod tests;
