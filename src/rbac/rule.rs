//! A policy rule, and whether some rules cover another, with exactly the semantics of Kubernetes' RBAC escalation
//! check (`Covers` and `BreakdownRule` in k8s.io/component-helpers auth/rbac/validation).

use k8s_openapi::api::rbac::v1::PolicyRule;

/// `*` in verbs, apiGroups, resources or nonResourceURLs.
pub const ALL: &str = "*";

/// A PolicyRule with plain lists (absent and empty are the same in RBAC).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

impl Rule {
    /// A resource rule.
    pub fn resource(verbs: &[&str], api_groups: &[&str], resources: &[&str]) -> Self {
        Self {
            verbs: strings(verbs),
            api_groups: strings(api_groups),
            resources: strings(resources),
            ..Self::default()
        }
    }

    /// A non-resource rule.
    pub fn non_resource(verbs: &[&str], urls: &[&str]) -> Self {
        Self { verbs: strings(verbs), non_resource_urls: strings(urls), ..Self::default() }
    }

    /// The same rule limited to the named objects.
    pub fn named(mut self, names: &[&str]) -> Self {
        self.resource_names = strings(names);
        self
    }

    /// Whether this is a non-resource (URL) rule.
    pub fn is_non_resource(&self) -> bool {
        !self.non_resource_urls.is_empty()
    }

    /// Cluster-admin's rules: everything on every resource and every URL.
    pub fn full_authority() -> Vec<Rule> {
        vec![Rule::resource(&[ALL], &[ALL], &[ALL]), Rule::non_resource(&[ALL], &[ALL])]
    }
}

impl From<&PolicyRule> for Rule {
    fn from(rule: &PolicyRule) -> Self {
        Self {
            verbs: rule.verbs.clone(),
            api_groups: rule.api_groups.clone().unwrap_or_default(),
            resources: rule.resources.clone().unwrap_or_default(),
            resource_names: rule.resource_names.clone().unwrap_or_default(),
            non_resource_urls: rule.non_resource_urls.clone().unwrap_or_default(),
        }
    }
}

impl From<&Rule> for PolicyRule {
    fn from(rule: &Rule) -> Self {
        let optional = |items: &Vec<String>| (!items.is_empty()).then(|| items.clone());
        Self {
            verbs: rule.verbs.clone(),
            api_groups: optional(&rule.api_groups),
            resources: optional(&rule.resources),
            resource_names: optional(&rule.resource_names),
            non_resource_urls: optional(&rule.non_resource_urls),
        }
    }
}

/// The rule as equivalent rules of one verb, one group, one resource and at most one name (or one verb and one
/// URL). A resource rule without groups, or a rule without verbs, breaks down to nothing: it grants nothing.
pub fn breakdown(rule: &Rule) -> Vec<Rule> {
    let mut atoms = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let atom = |names: Vec<String>| Rule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    resource_names: names,
                    non_resource_urls: Vec::new(),
                };
                if rule.resource_names.is_empty() {
                    atoms.push(atom(Vec::new()));
                } else {
                    atoms.extend(rule.resource_names.iter().map(|name| atom(vec![name.clone()])));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            atoms.push(Rule { verbs: vec![verb.clone()], non_resource_urls: vec![url.clone()], ..Rule::default() });
        }
    }
    atoms
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|candidate| candidate == item)
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|item| has(set, item))
}

fn resources_cover_all(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, ALL) || has_all(owner, wanted) {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path) || path.split_once('/').is_some_and(|(_, subresource)| has(owner, &format!("*/{subresource}")))
    })
}

/// Whether an owner's URL pattern covers a URL: equal, or the owner ends in `*` and the URL starts with the rest.
pub fn url_covers(owner: &str, url: &str) -> bool {
    owner == url || owner.strip_suffix('*').is_some_and(|_| url.starts_with(owner.trim_end_matches('*')))
}

fn urls_cover_all(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|url| owner.iter().any(|pattern| url_covers(pattern, url)))
}

/// Whether `owner` covers `atom`, an element of a [`breakdown`].
pub fn rule_covers(owner: &Rule, atom: &Rule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &atom.verbs);
    let groups = has(&owner.api_groups, ALL) || has_all(&owner.api_groups, &atom.api_groups);
    let resources = resources_cover_all(&owner.resources, &atom.resources);
    let urls = urls_cover_all(&owner.non_resource_urls, &atom.non_resource_urls);
    let names = owner.resource_names.is_empty()
        || (!atom.resource_names.is_empty() && has_all(&owner.resource_names, &atom.resource_names));
    verbs && groups && resources && names && urls
}

/// The atoms of `wanted` that no rule of `owners` covers; empty when the owners cover everything wanted.
pub fn uncovered(owners: &[Rule], wanted: &[Rule]) -> Vec<Rule> {
    wanted.iter().flat_map(breakdown).filter(|atom| !owners.iter().any(|owner| rule_covers(owner, atom))).collect()
}

/// Whether `owners` cover every rule of `wanted`.
pub fn covers(owners: &[Rule], wanted: &[Rule]) -> bool {
    uncovered(owners, wanted).is_empty()
}
