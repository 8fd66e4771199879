//! The requirements a CSV places on the cluster itself, as OLM v0 checks them: `spec.minKubeVersion` against the
//! server's version, required APIServices (served and Available), owned APIServices (their Deployment named in the
//! strategy), and `spec.nativeAPIs` (served), with OLM's entries and messages.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

use crate::api::v1alpha1::{ClusterServiceVersion, RequirementStatus};

/// What the checks read of the cluster.
#[derive(Clone, Copy)]
pub struct Platform<'a> {
    /// The server's git version (`v1.33.0`); None when discovery failed.
    pub server_version: Option<&'a str>,
    /// The (group, version, kind) the server serves, for the group-versions the CSV names.
    pub served: &'a BTreeSet<(String, String, String)>,
    /// The APIServices the CSV requires, by name (`<version>.<group>`).
    pub api_services: &'a BTreeMap<String, APIService>,
}

fn entry(group: &str, version: &str, kind: &str, name: &str, status: &str, message: String) -> RequirementStatus {
    RequirementStatus {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        name: name.into(),
        status: status.into(),
        message,
        ..RequirementStatus::default()
    }
}

/// A version read as OLM's semver library reads it: a leading `v` and missing minor or patch tolerated.
fn tolerant(text: &str) -> Option<semver::Version> {
    let text = text.trim_start_matches('v');
    let (core, rest) = match text.find(['-', '+']) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let mut parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    while parts.len() < 3 {
        parts.push("0");
    }
    semver::Version::parse(&format!("{}{rest}", parts.join("."))).ok()
}

/// `spec.minKubeVersion` against the server (none when the CSV sets none).
pub fn min_kube_version(csv: &ClusterServiceVersion, platform: &Platform<'_>) -> Option<RequirementStatus> {
    let minimum = csv.spec.min_kube_version.as_deref().filter(|minimum| !minimum.is_empty())?;
    let name = csv.metadata.name.clone().unwrap_or_default();
    let not = |message: String| {
        Some(entry("operators.coreos.com", "v1alpha1", "ClusterServiceVersion", &name, "PresentNotSatisfied", message))
    };
    let Some(server_text) = platform.server_version else { return not("Server version discovery error".into()) };
    let server_core = server_text.trim_start_matches('v').split('-').next().unwrap_or_default();
    let Some(server) = tolerant(server_core) else { return not("Server version parsing error".into()) };
    let Some(wanted) = tolerant(minimum) else { return not("CSV version parsing error".into()) };
    if wanted > server {
        return not(format!("CSV version requirement not met: minKubeVersion ({minimum}) > server version ({server})"));
    }
    Some(entry(
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        &name,
        "Present",
        format!("CSV minKubeVersion ({minimum}) less than server version ({server_text})"),
    ))
}

/// Required APIServices (not also owned), owned APIServices, then native APIs, in OLM's order.
pub fn platform_requirements(csv: &ClusterServiceVersion, platform: &Platform<'_>) -> Vec<RequirementStatus> {
    let mut statuses = Vec::new();
    let definitions = csv.spec.api_service_definitions.clone().unwrap_or_default();
    let owned_names: BTreeSet<String> =
        definitions.owned.iter().map(|api| format!("{}.{}", api.version, api.group)).collect();
    let served =
        |group: &str, version: &str, kind: &str| platform.served.contains(&(group.into(), version.into(), kind.into()));
    let mut required = definitions.required.clone();
    required.sort_by(|a, b| a.name.cmp(&b.name));
    for api in required.iter().filter(|api| !owned_names.contains(&format!("{}.{}", api.version, api.group))) {
        let name = format!("{}.{}", api.version, api.group);
        let found = platform.api_services.get(&name).filter(|_| served(&api.group, &api.version, &api.kind));
        let available = found.is_some_and(|service| {
            service
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .any(|c| c.type_ == "Available" && c.status == "True")
        });
        let mut status = entry(
            "apiregistration.k8s.io",
            "v1",
            "APIService",
            &name,
            if available { "Present" } else { "NotPresent" },
            String::new(),
        );
        if available {
            status.uuid = found.and_then(|service| service.metadata.uid.clone());
        }
        statuses.push(status);
    }
    let mut owned = definitions.owned.clone();
    owned.sort_by(|a, b| a.name.cmp(&b.name));
    for api in &owned {
        let name = format!("{}.{}", api.version, api.group);
        let deployment = api.deployment_name.as_deref().unwrap_or_default();
        let found = csv.spec.install.spec.deployments.iter().any(|spec| spec.name == deployment);
        statuses.push(entry(
            "apiregistration.k8s.io",
            "v1",
            "APIService",
            &name,
            if found { "DeploymentFound" } else { "DeploymentNotFound" },
            String::new(),
        ));
    }
    for api in &csv.spec.native_apis {
        let name = format!("{}.{}", api.version, api.group);
        let (status, message) = if served(&api.group, &api.version, &api.kind) {
            ("Present", "Native API exists")
        } else {
            ("NotPresent", "Native API does not exist")
        };
        statuses.push(entry(&api.group, &api.version, &api.kind, &name, status, message.into()));
    }
    statuses
}

/// Whether a platform entry is met.
pub fn platform_met(status: &RequirementStatus) -> bool {
    matches!(status.status.as_str(), "Present" | "DeploymentFound")
}

/// The group-versions whose served kinds the checks need: those of required APIServices and native APIs.
pub fn group_versions(csv: &ClusterServiceVersion) -> BTreeSet<(String, String)> {
    let definitions = csv.spec.api_service_definitions.clone().unwrap_or_default();
    let apis = definitions.required.iter().map(|api| (api.group.clone(), api.version.clone()));
    apis.chain(csv.spec.native_apis.iter().map(|api| (api.group.clone(), api.version.clone()))).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn csv(min: Option<&str>) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": [{"name": "server", "spec": {"selector": {}, "template": {}}}]}},
                     "minKubeVersion": min,
                     "nativeAPIs": [{"group": "apps", "version": "v1", "kind": "Deployment"}, {"group": "x.io", "version": "v1", "kind": "Gone"}],
                     "apiservicedefinitions": {
                        "owned": [{"name": "metrics", "group": "m.io", "version": "v1", "kind": "Metric", "deploymentName": "server"},
                                  {"name": "other", "group": "o.io", "version": "v1", "kind": "Other", "deploymentName": "missing"}],
                        "required": [{"name": "widgets", "group": "w.io", "version": "v1", "kind": "Widget"}]}}}))
        .expect("csv")
    }

    fn served() -> BTreeSet<(String, String, String)> {
        [("apps", "v1", "Deployment"), ("w.io", "v1", "Widget")]
            .iter()
            .map(|(g, v, k)| ((*g).into(), (*v).into(), (*k).into()))
            .collect()
    }

    #[test]
    fn the_kube_version_is_compared_as_olm_does() {
        let served = served();
        let services = BTreeMap::new();
        let platform = |version| Platform { server_version: version, served: &served, api_services: &services };
        let message = |min, version| min_kube_version(&csv(min), &platform(version)).map(|s| (s.status, s.message));
        assert_eq!(message(None, Some("v1.33.0")), None);
        assert_eq!(
            message(Some("1.20"), Some("v1.33.0-emulated")),
            Some(("Present".into(), "CSV minKubeVersion (1.20) less than server version (v1.33.0-emulated)".into()))
        );
        assert_eq!(
            message(Some("v1.40.0"), Some("v1.33.0")),
            Some((
                "PresentNotSatisfied".into(),
                "CSV version requirement not met: minKubeVersion (v1.40.0) > server version (1.33.0)".into()
            ))
        );
        assert_eq!(message(Some("one"), Some("v1.33.0")).map(|m| m.1), Some("CSV version parsing error".into()));
        assert_eq!(message(Some("1.2"), None).map(|m| m.1), Some("Server version discovery error".into()));
    }

    #[test]
    fn apiservices_and_native_apis_are_checked_in_olms_order() {
        let served = served();
        let available: APIService = serde_json::from_value(json!({"metadata": {"name": "v1.w.io", "uid": "w"},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}}))
        .expect("apiservice");
        let services: BTreeMap<String, APIService> = [("v1.w.io".to_owned(), available)].into();
        let platform = Platform { server_version: Some("v1.33.0"), served: &served, api_services: &services };
        let statuses = platform_requirements(&csv(None), &platform);
        let summary: Vec<(&str, &str, &str)> =
            statuses.iter().map(|s| (s.name.as_str(), s.status.as_str(), s.message.as_str())).collect();
        assert_eq!(
            summary,
            [
                ("v1.w.io", "Present", ""),
                ("v1.m.io", "DeploymentFound", ""),
                ("v1.o.io", "DeploymentNotFound", ""),
                ("v1.apps", "Present", "Native API exists"),
                ("v1.x.io", "NotPresent", "Native API does not exist"),
            ]
        );
        assert_eq!(statuses.iter().filter(|s| platform_met(s)).count(), 3);
        let none = BTreeMap::new();
        let missing = Platform { api_services: &none, ..platform };
        assert_eq!(platform_requirements(&csv(None), &missing)[0].status, "NotPresent");
    }
}
