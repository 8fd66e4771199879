//! A CSV's owned APIServices as OLM v0 installs and checks them (`install/apiservice.go`, `olm/apiservices.go`):
//! `<version>.<group>` pointing at `<deployment>-service` with the install's CA, `groupPriorityMinimum` 2000 and
//! `versionPriority` 15, labelled with its owner; an existing one taken over only when OLM's adoption rule allows;
//! available when its `Available` condition is True and discovery serves its kind.

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use serde_json::{json, Value};

use super::certs::{owner_labels, service_name};
use crate::api::v1alpha1::{ApiServiceDescription, ClusterServiceVersion, CsvPhase};
use crate::legacy::roles::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

/// The name of an owned APIService.
pub fn name(api: &ApiServiceDescription) -> String {
    format!("{}.{}", api.version, api.group)
}

/// The owned APIService `api`, its `caBundle` the CA PEM.
pub fn api_service(csv: &ClusterServiceVersion, api: &ApiServiceDescription, ca_pem: &str) -> Value {
    let port = api.container_port.filter(|port| *port > 0).unwrap_or(443);
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name(api), "labels": owner_labels(csv)},
        "spec": {"group": api.group, "version": api.version, "groupPriorityMinimum": 2000, "versionPriority": 15,
            "service": {"namespace": csv.metadata.namespace.clone().unwrap_or_default(),
                "name": service_name(api.deployment_name.as_deref().unwrap_or_default()), "port": port},
            "caBundle": crate::tls::ca_bundle(ca_pem)}})
}

/// OLM's `IsAPIServiceAdoptable`: the existing APIService's owner labels name this CSV, the CSV of this namespace
/// it replaces while that exists (`replaced_exists`), or a CSV of any namespace that is Replacing or Deleting.
/// `owner_phase` is the phase of the CSV its owner labels name, when that exists.
pub fn adoptable(
    csv: &ClusterServiceVersion,
    existing: &APIService,
    owner_phase: Option<CsvPhase>,
    replaced_exists: bool,
) -> bool {
    let labels = existing.metadata.labels.clone().unwrap_or_default();
    let label = |key: &str| labels.get(key).map(String::as_str).unwrap_or_default();
    let (kind, owner, namespace) = (label(OWNER_KIND_LABEL), label(OWNER_LABEL), label(OWNER_NAMESPACE_LABEL));
    if kind.is_empty() || owner.is_empty() || namespace.is_empty() || kind != "ClusterServiceVersion" {
        return false;
    }
    let here = Some(namespace) == csv.metadata.namespace.as_deref();
    here && Some(owner) == csv.metadata.name.as_deref()
        || here && replaced_exists && Some(owner) == csv.spec.replaces.as_deref()
        || matches!(owner_phase, Some(CsvPhase::Replacing | CsvPhase::Deleting))
}

/// The owner a pre-existing APIService names (`olm.owner`), to read its phase for [`adoptable`].
pub fn owner_of(existing: &APIService) -> Option<(String, String)> {
    let labels = existing.metadata.labels.as_ref()?;
    Some((labels.get(OWNER_NAMESPACE_LABEL)?.clone(), labels.get(OWNER_LABEL)?.clone()))
}

/// OLM's `areAPIServicesAvailable` for one APIService: it exists, its `Available` condition is True, and
/// discovery serves its kind (`served`).
pub fn available(found: Option<&APIService>, served: bool) -> bool {
    let Some(found) = found else { return false };
    let conditions = found.status.as_ref().and_then(|status| status.conditions.as_ref());
    let up = conditions.into_iter().flatten().any(|c| c.type_ == "Available" && c.status == "True");
    up && served
}

#[cfg(test)]
#[path = "apiservices_tests.rs"]
mod tests;
