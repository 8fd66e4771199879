//! What the copier does for one original (pure): given the copies the watch shows (namespace → resourceVersion),
//! the namespaces they must be in and whether the ledger says a copy holds its prototype, which copies to create,
//! which to read (and put back where they drifted) and which to delete.

use std::collections::{BTreeMap, BTreeSet};

/// The copier's work for one original, by namespace.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Work {
    pub create: Vec<String>,
    pub read: Vec<String>,
    pub delete: Vec<String>,
}

/// Copies missing from a wanted namespace are created, copies in a namespace no longer wanted deleted, and the rest
/// read unless `holds(namespace, resourceVersion)` (the ledger) says they hold what they should.
pub fn plan(
    present: &BTreeMap<String, Option<String>>,
    wanted: &BTreeSet<String>,
    holds: impl Fn(&str, Option<&str>) -> bool,
) -> Work {
    let mut work = Work::default();
    for at in wanted {
        match present.get(at) {
            None => work.create.push(at.clone()),
            Some(version) if !holds(at, version.as_deref()) => work.read.push(at.clone()),
            Some(_) => {}
        }
    }
    work.delete = present.keys().filter(|at| !wanted.contains(*at)).cloned().collect();
    work
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn missing_copies_are_created_unwanted_ones_deleted_and_unknown_ones_read() {
        let present: BTreeMap<String, Option<String>> = [
            ("held".to_owned(), Some("10".to_owned())),
            ("changed".to_owned(), Some("12".to_owned())),
            ("unwanted".to_owned(), Some("3".to_owned())),
        ]
        .into();
        let wanted: BTreeSet<String> = ["held", "changed", "new"].map(str::to_owned).into();
        let work = plan(&present, &wanted, |at, version| at == "held" && version == Some("10"));
        assert_eq!(work, Work { create: names(&["new"]), read: names(&["changed"]), delete: names(&["unwanted"]) });
    }

    #[test]
    fn copies_that_hold_their_prototype_cost_nothing() {
        let present: BTreeMap<String, Option<String>> =
            (0..100).map(|index| (format!("ns-{index}"), Some("1".to_owned()))).collect();
        let wanted: BTreeSet<String> = present.keys().cloned().collect();
        assert_eq!(plan(&present, &wanted, |_, _| true), Work::default());
        assert_eq!(plan(&present, &wanted, |_, _| false).read.len(), 100, "a new process knows none of them");
        assert_eq!(plan(&present, &BTreeSet::new(), |_, _| true).delete.len(), 100, "copies off");
    }
}
