//! The labels OLM v0 marks objects with (copies of CSVs, what a CSV owns through labels), shared by the loops that
//! write them and the code that reads them (the Installed API, Installs taking a CSV over), and OLM's test of
//! whether a CSV is a copy.

use super::ClusterServiceVersion;
use crate::api::v1::OPERATOR_NAMESPACE_ANNOTATION;

/// The label OLM v0 puts on a copied CSV: the namespace of its original.
pub const COPIED_FROM_LABEL: &str = "olm.copiedFrom";
/// The reason of a copied CSV's status.
pub const COPIED_REASON: &str = "Copied";

/// Labels OLM v0 puts on what it owns through labels rather than owner references.
pub const OWNER_LABEL: &str = "olm.owner";
pub const OWNER_NAMESPACE_LABEL: &str = "olm.owner.namespace";
pub const OWNER_KIND_LABEL: &str = "olm.owner.kind";
pub const MANAGED_LABEL: &str = "olm.managed";

/// OLM v0's annotation holding the catalog properties of an installed CSV's bundle (its package, the APIs it provides
/// and requires); the resolver reads them instead of computing them from the CSV.
pub const PROPERTIES_ANNOTATION: &str = "operatorframework.io/properties";

/// Whether `csv` is a copy, as OLM's `IsCopied` judges: reason `Copied`, an `olm.operatorNamespace` other than its
/// own namespace, or the `olm.copiedFrom` label.
pub fn is_copied(csv: &ClusterServiceVersion) -> bool {
    let reason_copied =
        csv.status.as_ref().and_then(|status| status.reason.as_deref()).is_some_and(|reason| reason == COPIED_REASON);
    let elsewhere = csv
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(OPERATOR_NAMESPACE_ANNOTATION))
        .is_some_and(|namespace| Some(namespace) != csv.metadata.namespace.as_ref());
    let labelled = csv.metadata.labels.as_ref().is_some_and(|labels| labels.contains_key(COPIED_FROM_LABEL));
    reason_copied || elsewhere || labelled
}
