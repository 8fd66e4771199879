//! A CSV's replacement chain among the CSVs of its namespace (OLM v0's `isReplacing`, `isBeingReplaced`,
//! `getReplacementChain`, `crdOwnerConflicts`): what it replaces, what replaces it, the newest of the chain, and
//! whether a CSV outside its chain owns one of its CRDs.

use std::collections::BTreeSet;

use super::phase::Chain;
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::legacy::membership::is_copied;

fn name(csv: &ClusterServiceVersion) -> &str {
    csv.metadata.name.as_deref().unwrap_or_default()
}

fn phase_of(csv: &ClusterServiceVersion) -> crate::api::v1alpha1::CsvPhase {
    csv.status.as_ref().map(|status| status.phase).unwrap_or_default()
}

fn owned_crds(csv: &ClusterServiceVersion) -> BTreeSet<&str> {
    csv.spec.custom_resource_definitions.iter().flat_map(|crds| &crds.owned).map(|crd| crd.name.as_str()).collect()
}

/// The chain of `csv` among `neighbours` (the CSVs of its namespace; copies and itself are skipped).
pub fn chain_of(
    csv: &ClusterServiceVersion,
    neighbours: &[impl std::borrow::Borrow<ClusterServiceVersion>],
    fail_forward: bool,
) -> Chain {
    let own = name(csv);
    let others: Vec<&ClusterServiceVersion> = neighbours
        .iter()
        .map(std::borrow::Borrow::borrow)
        .filter(|other| name(other) != own && !is_copied(other))
        .collect();
    let find = |wanted: &str| others.iter().copied().find(|other| name(other) == wanted);
    let successor = |of: &str| {
        let mut candidates: Vec<&ClusterServiceVersion> =
            others.iter().copied().filter(|other| other.spec.replaces.as_deref() == Some(of)).collect();
        candidates.sort_by(|a, b| name(a).cmp(name(b)));
        candidates.into_iter().next()
    };
    let replaces = csv.spec.replaces.as_deref().filter(|replaced| *replaced != own).and_then(find);
    let replaced_by = successor(own);
    let mut members: BTreeSet<&str> = [own].into();
    let mut newest = None;
    let mut current = own.to_owned();
    while let Some(next) = successor(&current) {
        if !members.insert(name(next)) {
            break;
        }
        newest = Some(next);
        current = name(next).to_owned();
    }
    let mut previous = replaces;
    while let Some(before) = previous {
        if !members.insert(name(before)) {
            break;
        }
        previous = before.spec.replaces.as_deref().and_then(find);
    }
    let mine = owned_crds(csv);
    let crd_owner_conflict = others
        .iter()
        .filter(|other| !members.contains(name(other)))
        .any(|other| owned_crds(other).intersection(&mine).next().is_some());
    let entry = |csv: &ClusterServiceVersion| (name(csv).to_owned(), phase_of(csv));
    Chain {
        replaces: replaces.map(entry),
        replaced_by: replaced_by.map(entry),
        newest: newest.map(entry),
        fail_forward,
        crd_owner_conflict,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::v1alpha1::CsvPhase;

    fn csv(name: &str, replaces: Option<&str>, crd: &str, phase: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "ops"},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}, "replaces": replaces,
                     "customresourcedefinitions": {"owned": [{"name": crd, "version": "v1", "kind": "K"}]}},
            "status": {"phase": phase}}))
        .expect("csv")
    }

    #[test]
    fn the_chain_runs_both_ways_and_shares_its_crds() {
        let a = csv("a", None, "k.example.com", "Replacing");
        let b = csv("b", Some("a"), "k.example.com", "Replacing");
        let c = csv("c", Some("b"), "k.example.com", "Pending");
        let all = [a.clone(), b.clone(), c.clone()];
        let of_b = chain_of(&b, &all, false);
        assert_eq!(of_b.replaces, Some(("a".into(), CsvPhase::Replacing)));
        assert_eq!(of_b.replaced_by, Some(("c".into(), CsvPhase::Pending)));
        assert!(!of_b.crd_owner_conflict, "the chain shares its CRDs");
        assert_eq!(chain_of(&a, &all, true).newest, Some(("c".into(), CsvPhase::Pending)));
        assert_eq!(chain_of(&c, &all, false).replaced_by, None);
    }

    #[test]
    fn a_stranger_owning_the_same_crd_is_a_conflict() {
        let mine = csv("mine", None, "k.example.com", "Pending");
        let stranger = csv("stranger", None, "k.example.com", "Succeeded");
        assert!(chain_of(&mine, &[mine.clone(), stranger], false).crd_owner_conflict);
        let other = csv("other", None, "other.example.com", "Succeeded");
        assert!(!chain_of(&mine, &[mine.clone(), other], false).crd_owner_conflict);
    }

    #[test]
    fn replacing_itself_or_a_missing_csv_is_no_chain() {
        let selfish = csv("a", Some("a"), "k.example.com", "Pending");
        assert_eq!(chain_of(&selfish, std::slice::from_ref(&selfish), false).replaces, None);
        let orphan = csv("b", Some("gone"), "k.example.com", "Pending");
        assert_eq!(chain_of(&orphan, std::slice::from_ref(&orphan), false).replaces, None);
    }
}
