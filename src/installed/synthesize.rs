//! What the Installed API holds (seed 002, 'The `Installed` Resource'), decided from the cluster's CSVs and
//! Subscriptions: each operator installed (an original CSV: an Install's record, or a CSV OLM v0 or a person
//! installed; never a copy) is listed in every namespace it watches (its `olm.targetNamespaces`, all namespaces when
//! empty; its own namespace when it names none), named after its CSV, with the Subscription that installed it (the
//! one of its namespace whose `installedCSV` it is) and the CSV sanitized (no `olm.targetNamespaces`, no client or
//! author records) in its status, and the labels `operators.coreos.com/csv` and `operators.coreos.com/sub`. What a
//! request builds is all there is: nothing is stored per namespace. Pure functions.

use std::collections::BTreeSet;

use kube::ResourceExt;
use serde_json::{json, Value};

use crate::api::v1::TARGET_NAMESPACES_ANNOTATION;
use crate::api::v1alpha1::{ClusterServiceVersion, Subscription};
use crate::api::v2alpha1::CREATOR_ANNOTATION;
use crate::legacy::membership::is_copied;

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

/// The namespaces a CSV watches, from its `olm.targetNamespaces` (comma-separated; empty means all namespaces); a CSV
/// without the annotation (no group placed it) watches its own namespace.
pub fn watches(csv: &ClusterServiceVersion) -> Watches {
    match csv.annotations().get(TARGET_NAMESPACES_ANNOTATION) {
        Some(targets) if targets.split(',').all(str::is_empty) => Watches::All,
        Some(targets) => Watches::Namespaces(targets.split(',').filter(|t| !t.is_empty()).map(str::to_owned).collect()),
        None => Watches::Namespaces(csv.namespace().into_iter().collect()),
    }
}

/// Every installed operator: the original CSVs, each with the Subscription of its namespace installing it.
pub fn tracked<'a>(csvs: &'a [ClusterServiceVersion], subscriptions: &'a [Subscription]) -> Vec<Tracked<'a>> {
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
            watches: watches(csv),
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
