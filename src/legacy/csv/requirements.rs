//! A CSV's requirements as OLM v0's `requirementAndPermissionStatus` checks them, with its statuses and messages
//! (`kubectl get csv -o yaml` shows them, and users read "Policy rule not satisfied for service account" there):
//! the server's version and APIs (`platform`), owned and required CRDs (present, the version served, Established
//! and NamesAccepted), the ServiceAccounts of its permissions (present, not another CSV's), and each of their rules as
//! a `PolicyRule` dependent, checked with RBAC semantics against what the account holds.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::platform::{min_kube_version, platform_met, platform_requirements, Platform};
use crate::api::v1alpha1::{ClusterServiceVersion, DependentStatus, RequirementStatus};
use crate::bundle::gohash::policy_rule;
use crate::rbac::{covers, Rule};

/// The rules an account (by name) holds: in the CSV's namespace (cluster-wide ones included), and cluster-wide.
pub type HeldRules<'a> = &'a dyn Fn(&str) -> (Vec<Rule>, Vec<Rule>);

/// What the checks read.
pub struct Cluster<'a> {
    /// The CRDs the CSV names, by name (absent: not found).
    pub crds: &'a BTreeMap<String, CustomResourceDefinition>,
    /// The ServiceAccounts of the CSV's namespace, by name.
    pub accounts: &'a BTreeMap<String, ServiceAccount>,
    /// The rules each account holds: in the CSV's namespace (namespaced) and cluster-wide.
    pub held: HeldRules<'a>,
    /// The server's version, served kinds and required APIServices.
    pub platform: Platform<'a>,
}

/// Whether every requirement is met, and the status of each.
pub fn requirements(csv: &ClusterServiceVersion, cluster: &Cluster<'_>) -> (bool, Vec<RequirementStatus>) {
    let mut met = true;
    let mut statuses = Vec::new();
    if let Some(status) = min_kube_version(csv, &cluster.platform) {
        met &= status.status == "Present";
        statuses.push(status);
    }
    // CRDs by name, owned and required merged (owned first, as OLM's map keeps it).
    let crds = csv.spec.custom_resource_definitions.as_ref();
    let mut descriptions: BTreeMap<&str, &str> = BTreeMap::new();
    for description in crds.iter().flat_map(|crds| crds.owned.iter().chain(&crds.required)) {
        descriptions.entry(description.name.as_str()).or_insert(description.version.as_str());
    }
    for (name, version) in descriptions {
        let status = crd_status(name, version, cluster);
        met &= status.status == "Present";
        statuses.push(status);
    }
    for status in platform_requirements(csv, &cluster.platform) {
        met &= platform_met(&status);
        statuses.push(status);
    }
    let strategy = &csv.spec.install.spec;
    let mut accounts: BTreeMap<String, RequirementStatus> = BTreeMap::new();
    for (permissions, cluster_wide) in [(&strategy.permissions, false), (&strategy.cluster_permissions, true)] {
        for permission in permissions {
            let name = &permission.service_account_name;
            let status = accounts.entry(name.clone()).or_insert_with(|| RequirementStatus {
                group: String::new(),
                version: "v1".into(),
                kind: "ServiceAccount".into(),
                name: name.clone(),
                status: "Present".into(),
                ..RequirementStatus::default()
            });
            let Some(account) = cluster.accounts.get(name) else {
                met = false;
                status.status = "NotPresent".into();
                status.message = "Service account does not exist".into();
                continue;
            };
            if owned_by_other_csv(account, csv) {
                met = false;
                status.status = "PresentNotSatisfied".into();
                status.message = "Service account is owned by another ClusterServiceVersion".into();
                continue;
            }
            // OLM v0 records no uid for a ServiceAccount (only for CRDs and APIServices), as the oracle shows.
            let (namespaced, cluster_rules) = (cluster.held)(name);
            let held = if cluster_wide { &cluster_rules } else { &namespaced };
            for rule in &permission.rules {
                let satisfied = covers(held, &[Rule::from(rule)]);
                if !satisfied {
                    met = false;
                    status.status = "PresentNotSatisfied".into();
                    status.message = "Policy rule not satisfied for service account".into();
                }
                status.dependents.push(DependentStatus {
                    group: "rbac.authorization.k8s.io".into(),
                    version: "v1".into(),
                    kind: "PolicyRule".into(),
                    status: if satisfied { "Satisfied" } else { "NotSatisfied" }.into(),
                    uuid: None,
                    message: Some(format!(
                        "{} rule:{}",
                        if cluster_wide { "cluster" } else { "namespaced" },
                        policy_rule(rule)
                    )),
                });
            }
        }
    }
    statuses.extend(accounts.into_values());
    (met, statuses)
}

/// A CRD's status. OLM also reports `PresentNotSatisfied` "CRD installed alongside other CSV(s)" when an owned CRD
/// was last applied by a predecessor (an annotation its InstallPlans write); this loop applies no CRD, so that case
/// does not arise here, and a stranger owning the CRD is `OwnerConflict` (`chain.rs`).
fn crd_status(name: &str, version: &str, cluster: &Cluster<'_>) -> RequirementStatus {
    let status = |status: &str, message: String, uuid: Option<String>| RequirementStatus {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        kind: "CustomResourceDefinition".into(),
        name: name.to_owned(),
        status: status.into(),
        message,
        uuid,
        dependents: Vec::new(),
    };
    let Some(crd) = cluster.crds.get(name) else {
        return status("NotPresent", "CRD is not present".into(), None);
    };
    let served = crd.spec.versions.iter().find(|candidate| candidate.name == version).is_some_and(|v| v.served);
    if !served {
        return status("NotPresent", "CRD version not served".into(), None);
    }
    let condition = |type_: &str| {
        crd.status.iter().flat_map(|s| s.conditions.iter().flatten()).any(|c| c.type_ == type_ && c.status == "True")
    };
    if condition("Established") && condition("NamesAccepted") {
        status("Present", "CRD is present and Established condition is true".into(), crd.metadata.uid.clone())
    } else {
        status(
            "PresentNotAvailable",
            "CRD is present but the Established condition is False (not available)".into(),
            None,
        )
    }
}

/// Whether `account` is owned by a CSV other than `csv` (OLM: owned by the kind and not by this one).
fn owned_by_other_csv(account: &ServiceAccount, csv: &ClusterServiceVersion) -> bool {
    let owners = account.metadata.owner_references.iter().flatten();
    let mut by_csvs = owners.filter(|owner| owner.kind == "ClusterServiceVersion").peekable();
    by_csvs.peek().is_some() && !by_csvs.any(|owner| Some(&owner.uid) == csv.metadata.uid.as_ref())
}
