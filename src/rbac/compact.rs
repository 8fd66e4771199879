//! Compaction of rules into fewer, readable rules that cover exactly the same requests, in a stable order: what a
//! person reads before approving.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::rule::{breakdown, rule_covers, Rule, ALL};

/// Rules covering exactly what `rules` cover, merged where they differ in one field, with `*` absorbing the other
/// values of its field, atoms covered by other atoms dropped, and everything sorted.
pub fn compact(rules: &[Rule]) -> Vec<Rule> {
    let atoms: BTreeSet<Rule> = rules.iter().flat_map(breakdown).collect();
    let atoms = drop_subsumed(atoms);
    let (urls, resources): (Vec<Rule>, Vec<Rule>) = atoms.into_iter().partition(Rule::is_non_resource);

    let mut compacted = merge_resource_atoms(resources);
    compacted.extend(merge_url_atoms(urls));
    compacted.sort();
    compacted
}

/// Removes every atom that another atom of the set covers and is not covered by in turn (two distinct atoms can
/// cover each other, as `/a*` and `/a**` do; both stay). Only an atom with a wildcard, or one without names, can
/// cover another, so those are the only candidates checked.
fn drop_subsumed(atoms: BTreeSet<Rule>) -> Vec<Rule> {
    let unnamed: HashSet<(&str, &str, &str)> = atoms
        .iter()
        .filter(|atom| !atom.is_non_resource() && atom.resource_names.is_empty())
        .map(|atom| (atom.verbs[0].as_str(), atom.api_groups[0].as_str(), atom.resources[0].as_str()))
        .collect();
    let wildcards: Vec<&Rule> = atoms.iter().filter(|atom| has_wildcard(atom)).collect();
    atoms
        .iter()
        .filter(|atom| {
            let named_but_unnamed_held = !atom.is_non_resource()
                && !atom.resource_names.is_empty()
                && unnamed.contains(&(atom.verbs[0].as_str(), atom.api_groups[0].as_str(), atom.resources[0].as_str()));
            let under_wildcard = wildcards
                .iter()
                .any(|wildcard| *wildcard != *atom && rule_covers(wildcard, atom) && !rule_covers(atom, wildcard));
            !named_but_unnamed_held && !under_wildcard
        })
        .cloned()
        .collect()
}

fn has_wildcard(atom: &Rule) -> bool {
    atom.verbs.iter().any(|verb| verb == ALL)
        || atom.api_groups.iter().any(|group| group == ALL)
        || atom.resources.iter().any(|resource| resource == ALL || resource.starts_with("*/"))
        || atom.non_resource_urls.iter().any(|url| url.ends_with('*'))
}

/// Merges resource atoms field by field: verbs, then names, then resources, then groups. Each step merges rules
/// that are equal in every other field, so the covered requests never change. Unnamed and named rules never merge
/// names, because an empty name list means every name.
fn merge_resource_atoms(atoms: Vec<Rule>) -> Vec<Rule> {
    let merged = merge_by(atoms, Field::Verbs);
    let (named, unnamed): (Vec<Rule>, Vec<Rule>) = merged.into_iter().partition(|rule| !rule.resource_names.is_empty());
    let mut merged = merge_by(named, Field::ResourceNames);
    merged.extend(unnamed);
    let merged = merge_by(merged, Field::Resources);
    merge_by(merged, Field::ApiGroups)
}

fn merge_url_atoms(atoms: Vec<Rule>) -> Vec<Rule> {
    merge_by(merge_by(atoms, Field::Verbs), Field::NonResourceUrls)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Verbs,
    ApiGroups,
    Resources,
    ResourceNames,
    NonResourceUrls,
}

impl Field {
    fn of(self, rule: &mut Rule) -> &mut Vec<String> {
        match self {
            Self::Verbs => &mut rule.verbs,
            Self::ApiGroups => &mut rule.api_groups,
            Self::Resources => &mut rule.resources,
            Self::ResourceNames => &mut rule.resource_names,
            Self::NonResourceUrls => &mut rule.non_resource_urls,
        }
    }

    /// `*` covers every other value of the field, except among resource names, where it is an ordinary name.
    fn wildcard_absorbs(self) -> bool {
        self != Self::ResourceNames
    }
}

/// Groups rules equal in every field but `field`, and unions that field.
fn merge_by(rules: Vec<Rule>, field: Field) -> Vec<Rule> {
    // With the field emptied, the rest of the rule is the grouping key.
    let mut groups: BTreeMap<Rule, BTreeSet<String>> = BTreeMap::new();
    for mut rule in rules {
        let values = std::mem::take(field.of(&mut rule));
        groups.entry(rule).or_default().extend(values);
    }
    groups
        .into_iter()
        .map(|(mut rule, values)| {
            *field.of(&mut rule) = if field.wildcard_absorbs() && values.contains(ALL) {
                vec![ALL.to_owned()]
            } else {
                values.into_iter().collect()
            };
            rule
        })
        .collect()
}
