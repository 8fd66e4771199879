//! One namespace's resolution, as OLM v0's `syncResolvingNamespace` runs it: every Subscription of the namespace
//! together, against the catalogs of the namespace and of the global catalog namespace and the CSVs installed there,
//! with exactly one OperatorGroup. The answer is each Subscription's bundle (`currentCSV`) and the bundles some
//! chosen bundle requires that no Subscription asks for (OLM generates Subscriptions for them), or OLM's reason and
//! message for why there is none.

use std::collections::BTreeMap;

use kube::ResourceExt;
use serde_json::Value;

use super::candidates::{subscription_want, Current, NoCandidates};
use crate::api::v1alpha1::{ClusterServiceVersion, Subscription};
use crate::catalog::dependencies::{resolve_dependencies, Origin, Problem, Source};
use crate::catalog::fbc::CatalogBundle;
use crate::catalog::properties::{self, Dependency, Gvk, Read};

/// OLM's reasons of `ResolutionFailed`.
pub const CONSTRAINTS_NOT_SATISFIABLE: &str = "ConstraintsNotSatisfiable";
pub const ERROR_PREVENTED_RESOLUTION: &str = "ErrorPreventedResolution";

pub use crate::api::v1alpha1::PROPERTIES_ANNOTATION;

/// What one namespace's resolution reads.
pub struct Inputs<'a> {
    pub subscriptions: &'a [Subscription],
    /// The namespace's CSVs, copies left out.
    pub csvs: &'a [ClusterServiceVersion],
    /// The catalogs that take part: the namespace's and the global catalog namespace's.
    pub sources: Vec<Source<'a>>,
    /// How many OperatorGroups the namespace holds.
    pub operator_groups: usize,
}

/// A bundle chosen for a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The CSV name.
    pub bundle: String,
    pub package: String,
    /// The catalog it comes from (index into the sources), or none when it is installed already.
    pub source: Option<usize>,
}

/// The answer for a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Each Subscription's bundle by Subscription name, and the bundles chosen for what those require.
    Resolved { subscriptions: BTreeMap<String, Resolved>, dependencies: Vec<Resolved> },
    /// OLM's reason (`ConstraintsNotSatisfiable`, `ErrorPreventedResolution`) and message.
    Failed { reason: &'static str, message: String },
}

/// The package of an installed CSV: its `olm.package` property, else the Subscription whose `installedCSV` it is.
fn package_of(csv: &ClusterServiceVersion, annotated: &[(String, Value)], subscriptions: &[Subscription]) -> String {
    let from_properties = annotated
        .iter()
        .find(|(kind, _)| kind == "olm.package")
        .and_then(|(_, value)| value.get("packageName").and_then(Value::as_str).map(str::to_owned));
    from_properties.unwrap_or_else(|| {
        let name = csv.name_any();
        let following: Vec<&Subscription> = subscriptions
            .iter()
            .filter(|s| s.status.as_ref().and_then(|s| s.installed_csv.as_deref()) == Some(name.as_str()))
            .collect();
        match following.as_slice() {
            [only] => only.spec.name.clone(),
            // OLM infers a package only from exactly one Subscription; otherwise the CSV is its own.
            _ => format!("csv/{name}"),
        }
    })
}

/// The properties a CSV's annotation lists, if it lists them.
fn annotated_properties(csv: &ClusterServiceVersion) -> Option<Vec<(String, Value)>> {
    let text = csv.annotations().get(PROPERTIES_ANNOTATION)?;
    let parsed: Value = serde_json::from_str(text).ok()?;
    let list = parsed.get("properties")?.as_array()?;
    Some(
        list.iter()
            .filter_map(|p| Some((p.get("type")?.as_str()?.to_owned(), p.get("value").cloned().unwrap_or_default())))
            .collect(),
    )
}

/// An installed CSV as a bundle of the resolution: what it provides and requires (its owned and required CRDs and
/// APIServices, or the properties of its `operatorframework.io/properties` annotation, which replace them, as in
/// OLM).
pub fn installed_bundle(csv: &ClusterServiceVersion, subscriptions: &[Subscription]) -> CatalogBundle {
    let annotated = annotated_properties(csv);
    let package = package_of(csv, annotated.as_deref().unwrap_or_default(), subscriptions);
    let version = csv.spec.version.as_deref().and_then(|v| semver::Version::parse(v).ok());
    let mut bundle = CatalogBundle {
        name: csv.name_any(),
        package,
        image: String::new(),
        version: version.unwrap_or_else(|| semver::Version::new(0, 0, 0)),
        provides: Vec::new(),
        requires: Vec::new(),
        unreadable: None,
        labels: Vec::new(),
        deprecated: false,
    };
    match annotated {
        Some(list) => {
            for (kind, value) in list {
                match properties::read(&kind, &value) {
                    Ok(Read::Provides(gvk)) => bundle.provides.push(gvk),
                    Ok(Read::Requires(dependency)) => bundle.requires.push(dependency),
                    Ok(Read::Label(label)) => bundle.labels.push(label),
                    Ok(Read::Deprecated | Read::Other) => {}
                    Err(error) => bundle.unreadable = bundle.unreadable.or(Some(error.to_string())),
                }
            }
        }
        None => {
            let crds = csv.spec.custom_resource_definitions.clone().unwrap_or_default();
            let crd_gvk = |name: &str, version: &str, kind: &str| Gvk {
                group: name.split_once('.').map(|(_, group)| group.to_owned()).unwrap_or_default(),
                version: version.to_owned(),
                kind: kind.to_owned(),
            };
            bundle.provides.extend(crds.owned.iter().map(|d| crd_gvk(&d.name, &d.version, &d.kind)));
            bundle
                .requires
                .extend(crds.required.iter().map(|d| Dependency::Api(crd_gvk(&d.name, &d.version, &d.kind))));
            let services = csv.spec.api_service_definitions.clone().unwrap_or_default();
            let service_gvk = |d: &crate::api::v1alpha1::ApiServiceDescription| Gvk {
                group: d.group.clone(),
                version: d.version.clone(),
                kind: d.kind.clone(),
            };
            bundle.provides.extend(services.owned.iter().map(service_gvk));
            bundle.requires.extend(services.required.iter().map(|d| Dependency::Api(service_gvk(d))));
        }
    }
    bundle
}

/// Resolves a namespace.
pub fn resolve_namespace(inputs: &Inputs<'_>) -> Outcome {
    if inputs.operator_groups != 1 {
        return Outcome::Failed {
            reason: ERROR_PREVENTED_RESOLUTION,
            message: format!("expected 1 OperatorGroup in the namespace, found {}", inputs.operator_groups),
        };
    }
    let installed: Vec<CatalogBundle> =
        inputs.csvs.iter().map(|csv| installed_bundle(csv, inputs.subscriptions)).collect();
    let mut wants = Vec::new();
    let mut invalid = Vec::new();
    let mut by_want: BTreeMap<String, String> = BTreeMap::new();
    for subscription in inputs.subscriptions {
        let name = subscription.name_any();
        let installed_name = subscription.status.as_ref().and_then(|s| s.installed_csv.clone());
        let current = installed_name
            .and_then(|name| installed.iter().find(|bundle| bundle.name == name))
            .map(|bundle| Current { name: bundle.name.clone(), version: Some(bundle.version.clone()) });
        match subscription_want(subscription, &inputs.sources, current.as_ref()) {
            Ok(want) => {
                by_want.insert(want.by.clone(), name);
                wants.push(want);
            }
            Err(NoCandidates::Channel(message)) => {
                return Outcome::Failed { reason: ERROR_PREVENTED_RESOLUTION, message };
            }
            Err(NoCandidates::Invalid(message)) => {
                invalid.push(message);
                invalid.push(format!("subscription {name} exists"));
            }
        }
    }
    if !invalid.is_empty() {
        invalid.sort();
        return Outcome::Failed {
            reason: CONSTRAINTS_NOT_SATISFIABLE,
            message: format!("constraints not satisfiable: {}", invalid.join(", ")),
        };
    }
    let problem = Problem { sources: inputs.sources.clone(), installed, wants, preferred: Vec::new() };
    let chosen = match resolve_dependencies(&problem) {
        Ok(chosen) => chosen,
        Err(error) => return Outcome::Failed { reason: error.reason(), message: error.to_string() },
    };
    let mut subscriptions = BTreeMap::new();
    let mut dependencies = Vec::new();
    for chosen in chosen {
        let source = match chosen.origin {
            Origin::Installed => None,
            Origin::Source(index) => Some(index),
        };
        let resolved = Resolved { bundle: chosen.bundle.name.clone(), package: chosen.bundle.package.clone(), source };
        match chosen.wanted_by.as_ref().and_then(|by| by_want.get(by)) {
            Some(subscription) => {
                subscriptions.insert(subscription.clone(), resolved);
            }
            None if source.is_some() => dependencies.push(resolved),
            None => {}
        }
    }
    Outcome::Resolved { subscriptions, dependencies }
}

#[cfg(test)]
#[path = "resolution_tests.rs"]
mod tests;
