//! The rules a subject holds, indexed by API group and resource so that checking thousands of required rules
//! against thousands of held ones stays fast. Answers are exactly those of [`rule_covers`] over every held rule.

use std::collections::HashMap;

use super::rule::{rule_covers, Rule, ALL};

/// Held rules, indexed for coverage checks of broken-down rules.
#[derive(Clone, Debug, Default)]
pub struct HeldRules {
    rules: Vec<Rule>,
    by_group_and_resource: HashMap<(String, String), Vec<usize>>,
    non_resource: Vec<usize>,
}

impl HeldRules {
    pub fn new(rules: Vec<Rule>) -> Self {
        let mut index = Self { rules, ..Self::default() };
        for (position, rule) in index.rules.iter().enumerate() {
            if rule.is_non_resource() {
                index.non_resource.push(position);
            }
            for group in &rule.api_groups {
                for resource in &rule.resources {
                    let slot = index.by_group_and_resource.entry((group.clone(), resource.clone())).or_default();
                    if slot.last() != Some(&position) {
                        slot.push(position);
                    }
                }
            }
        }
        index
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether a held rule covers `atom`, one element of a breakdown.
    pub fn covers_atom(&self, atom: &Rule) -> bool {
        if atom.is_non_resource() {
            return self.non_resource.iter().any(|&position| rule_covers(&self.rules[position], atom));
        }
        let (Some(group), Some(resource)) = (atom.api_groups.first(), atom.resources.first()) else {
            return true;
        };
        let wildcard_subresource = resource.split_once('/').map(|(_, sub)| format!("*/{sub}"));
        let groups = [group.as_str(), ALL];
        let mut resources = vec![resource.as_str(), ALL];
        if let Some(sub) = wildcard_subresource.as_deref() {
            resources.push(sub);
        }
        groups.iter().any(|group| {
            resources.iter().any(|resource| {
                self.by_group_and_resource
                    .get(&((*group).to_owned(), (*resource).to_owned()))
                    .is_some_and(|positions| positions.iter().any(|&p| rule_covers(&self.rules[p], atom)))
            })
        })
    }
}
