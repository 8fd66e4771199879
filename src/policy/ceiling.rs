//! A policy's permission ceiling: the rules of the ClusterRoles it names (aggregation resolved, as the cluster's
//! roles are), cluster-wide and per namespace, and which of the rules an Install's content needs are outside it.
//! Coverage is `rbac`'s, the API server's own semantics.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::ClusterRole;

use crate::api::v2alpha1::INSTALL_ANNOTATION;
use crate::api::v2alpha1::{Ceiling, PendingPermission, PermissionScope};
use crate::rbac::held::HeldRules;
use crate::rbac::missing::{rule_of, to_pending};
use crate::rbac::{breakdown, KindIndex, RbacObjects, Roles, Rule, Scope};

/// The rules a ceiling allows, indexed.
#[derive(Clone, Debug, Default)]
pub struct CeilingRules {
    cluster: HeldRules,
    namespaces: BTreeMap<String, HeldRules>,
    /// The ClusterRoles named that do not exist: they hold nothing.
    pub missing_roles: Vec<String>,
}

impl CeilingRules {
    /// The ceiling `ceiling` states with `roles`, the cluster's ClusterRoles (never those an Install applied: content
    /// must not widen the ceiling it is measured against), and `own`: the rules on the APIs the content defines
    /// itself, inside every ceiling.
    pub fn new(ceiling: &Ceiling, roles: &Roles, own: &[Rule]) -> Self {
        let mut missing_roles = Vec::new();
        let mut rules_of = |names: &[String]| {
            let mut rules: Vec<Rule> = own.to_vec();
            for name in names {
                match roles.cluster_role_rules(name) {
                    Some(found) => rules.extend(found.iter().cloned()),
                    None => missing_roles.push(name.clone()),
                }
            }
            HeldRules::new(rules)
        };
        let cluster = rules_of(&ceiling.cluster_roles);
        let namespaces =
            ceiling.namespaces.iter().map(|entry| (entry.name.clone(), rules_of(&entry.cluster_roles))).collect();
        missing_roles.sort();
        missing_roles.dedup();
        Self { cluster, namespaces, missing_roles }
    }

    /// The rules of `needed` (in the places each applies) that the ceiling does not cover, compacted. A cluster-wide
    /// rule on a namespaced resource (or one not known to be cluster-scoped) applies in every namespace, so it must
    /// fit each namespace's own ceiling too.
    pub fn over(&self, needed: &[PendingPermission], kinds: &KindIndex) -> Vec<PendingPermission> {
        let mut uncovered: BTreeMap<Scope, Vec<Rule>> = BTreeMap::new();
        for permission in needed {
            for atom in breakdown(&rule_of(permission)) {
                match permission.scope {
                    PermissionScope::Cluster => {
                        let reaches_namespaces = !atom.is_non_resource() && !cluster_scoped(&atom, kinds);
                        let fits = self.cluster.covers_atom(&atom)
                            && (!reaches_namespaces || self.namespaces.values().all(|held| held.covers_atom(&atom)));
                        if !fits {
                            uncovered.entry(Scope::Cluster).or_default().push(atom.clone());
                        }
                    }
                    PermissionScope::Namespaced => {
                        for namespace in &permission.namespaces {
                            let held = self.namespaces.get(namespace).unwrap_or(&self.cluster);
                            if !held.covers_atom(&atom) {
                                uncovered.entry(Scope::Namespace(namespace.clone())).or_default().push(atom.clone());
                            }
                        }
                    }
                }
            }
        }
        to_pending(uncovered)
    }
}

/// The ClusterRoles ceilings are read from: the cluster's, but those an Install applied or granted (they carry its
/// annotation, or an owner reference to an Install). A ClusterRole in some content, labelled to aggregate into a
/// ceiling role, must not widen the ceiling that content (or any other) is measured against; and since Kubernetes'
/// aggregation controller has already copied such a role's rules into the aggregating role it matches (whenever
/// that content was approved, by whom, and before or after the policy), an aggregating role's own stored rules are
/// never read: its rules are gathered anew from the roles it selects that remain.
pub fn ceiling_roles(rbac: &RbacObjects) -> Roles {
    let by_install = |role: &ClusterRole| {
        role.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|owner| owner.kind == "Install" && owner.api_version.starts_with("operators.coreos.com/"))
    };
    let theirs: Vec<Arc<ClusterRole>> = rbac
        .without_annotated(INSTALL_ANNOTATION)
        .cluster_roles
        .into_iter()
        .filter(|role| !by_install(role))
        .map(|role| match role.aggregation_rule {
            Some(_) => Arc::new(ClusterRole { rules: None, ..role.as_ref().clone() }),
            None => role,
        })
        .collect();
    Roles::shared::<k8s_openapi::api::rbac::v1::Role>(&[], theirs)
}

/// Every verb on the resources of the content's own CustomResourceDefinitions (and the subresources a CRD can
/// serve): an operator's own API. A CRD is the content's own when it is named `<plural>.<group>` (as the API server
/// requires) and `own` names it: the caller reads each CRD and names those that do not exist yet or that the Install
/// made (or takes over). A CRD naming a built-in resource or another operator's API widens nothing: the rules are
/// counted before anything is granted, so the apply's own refusal to take over a CRD comes too late to rely on.
pub fn own_api_rules(objects: &[serde_json::Value], own: &BTreeSet<String>) -> Vec<Rule> {
    objects
        .iter()
        .filter(|object| object["kind"] == "CustomResourceDefinition")
        .filter_map(|crd| {
            let group = crd["spec"]["group"].as_str()?;
            let plural = crd["spec"]["names"]["plural"].as_str()?;
            let name = crd["metadata"]["name"].as_str()?;
            if name != format!("{plural}.{group}") {
                return None;
            }
            if !own.contains(name) {
                return None;
            }
            let resources: Vec<String> =
                ["", "/status", "/scale", "/finalizers"].iter().map(|sub| format!("{plural}{sub}")).collect();
            let resources: Vec<&str> = resources.iter().map(String::as_str).collect();
            Some(Rule::resource(&["*"], &[group], &resources))
        })
        .collect()
}

/// Whether an atom's resource is known to be cluster-scoped (a subresource as its resource).
fn cluster_scoped(atom: &Rule, kinds: &KindIndex) -> bool {
    let (Some(group), Some(resource)) = (atom.api_groups.first(), atom.resources.first()) else { return false };
    let resource = resource.split_once('/').map_or(resource.as_str(), |(resource, _)| resource);
    kinds.namespaced_resource(group, resource) == Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v2alpha1::NamespaceCeiling;
    use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
    use kube::api::ObjectMeta;

    fn role(name: &str, rules: &[(&[&str], &[&str], &[&str])]) -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
            rules: Some(
                rules
                    .iter()
                    .map(|(verbs, groups, resources)| PolicyRule {
                        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                        api_groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
                        resources: Some(resources.iter().map(|r| (*r).to_owned()).collect()),
                        ..PolicyRule::default()
                    })
                    .collect(),
            ),
            ..ClusterRole::default()
        }
    }

    fn permission(
        scope: PermissionScope,
        namespaces: &[&str],
        verbs: &[&str],
        group: &str,
        resources: &[&str],
    ) -> PendingPermission {
        PendingPermission {
            scope,
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            api_groups: vec![group.to_owned()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            resource_names: vec![],
            non_resource_urls: vec![],
        }
    }

    fn ceiling(cluster: &[&str], namespaces: &[(&str, &[&str])]) -> Ceiling {
        Ceiling {
            cluster_roles: cluster.iter().map(|r| (*r).to_owned()).collect(),
            namespaces: namespaces
                .iter()
                .map(|(name, roles)| NamespaceCeiling {
                    name: (*name).to_owned(),
                    cluster_roles: roles.iter().map(|r| (*r).to_owned()).collect(),
                })
                .collect(),
        }
    }

    fn operator_role() -> ClusterRole {
        role(
            "operator-ceiling",
            &[
                (&["*"], &["apps"], &["deployments"]),
                (&["get", "list", "watch", "create", "update", "patch", "delete"], &[""], &["configmaps", "services"]),
                (&["create", "get"], &["apiextensions.k8s.io"], &["customresourcedefinitions"]),
            ],
        )
    }

    #[test]
    fn rules_inside_the_ceiling_pass_and_others_are_named() {
        let roles = Roles::new(&[], &[operator_role()]);
        let rules = CeilingRules::new(&ceiling(&["operator-ceiling"], &[]), &roles, &[]);
        let inside =
            permission(PermissionScope::Namespaced, &["operators"], &["create", "get"], "apps", &["deployments"]);
        let secrets =
            permission(PermissionScope::Namespaced, &["operators"], &["get", "list"], "", &["secrets", "configmaps"]);
        let over = rules.over(&[inside, secrets], &KindIndex::kubernetes());
        assert_eq!(
            over,
            vec![permission(PermissionScope::Namespaced, &["operators"], &["get", "list"], "", &["secrets"])]
        );
    }

    #[test]
    fn a_binding_to_cluster_admin_fits_no_ceiling_short_of_full_authority() {
        let full = role("everything", &[(&["*"], &["*"], &["*"])]);
        let roles = Roles::new(&[], &[operator_role(), full]);
        let cluster_admin = permission(PermissionScope::Cluster, &[], &["*"], "*", &["*"]);
        let narrow = CeilingRules::new(&ceiling(&["operator-ceiling"], &[]), &roles, &[]);
        assert!(!narrow.over(std::slice::from_ref(&cluster_admin), &KindIndex::kubernetes()).is_empty());
        let wide = CeilingRules::new(&ceiling(&["everything"], &[]), &roles, &[]);
        assert!(wide.over(&[cluster_admin], &KindIndex::kubernetes()).is_empty());
    }

    #[test]
    fn a_namespace_entry_replaces_the_cluster_ceiling_there() {
        let roles = Roles::new(&[], &[operator_role(), role("read-only", &[(&["get"], &["apps"], &["deployments"])])]);
        let rules = CeilingRules::new(&ceiling(&["operator-ceiling"], &[("kube-system", &["read-only"])]), &roles, &[]);
        let create = |ns: &str| permission(PermissionScope::Namespaced, &[ns], &["create"], "apps", &["deployments"]);
        assert!(rules.over(&[create("operators")], &KindIndex::kubernetes()).is_empty());
        assert_eq!(rules.over(&[create("kube-system")], &KindIndex::kubernetes()), vec![create("kube-system")]);
        let get = permission(PermissionScope::Namespaced, &["kube-system"], &["get"], "apps", &["deployments"]);
        assert!(rules.over(&[get], &KindIndex::kubernetes()).is_empty());
    }

    #[test]
    fn a_cluster_wide_rule_on_a_namespaced_resource_must_fit_every_namespace_entry() {
        let roles = Roles::new(&[], &[operator_role()]);
        let rules = CeilingRules::new(&ceiling(&["operator-ceiling"], &[("kube-system", &[])]), &roles, &[]);
        let everywhere = permission(PermissionScope::Cluster, &[], &["create"], "apps", &["deployments"]);
        assert_eq!(rules.over(std::slice::from_ref(&everywhere), &KindIndex::kubernetes()), vec![everywhere]);
        // A cluster-scoped resource is in no namespace: the namespace's entry says nothing about it.
        let crds = permission(
            PermissionScope::Cluster,
            &[],
            &["create"],
            "apiextensions.k8s.io",
            &["customresourcedefinitions"],
        );
        assert!(rules.over(&[crds], &KindIndex::kubernetes()).is_empty());
    }

    #[test]
    fn a_missing_ceiling_role_holds_nothing() {
        let roles = Roles::new(&[], &[]);
        let rules = CeilingRules::new(&ceiling(&["gone"], &[]), &roles, &[]);
        assert_eq!(rules.missing_roles, vec!["gone".to_owned()]);
        let get = permission(PermissionScope::Namespaced, &["operators"], &["get"], "", &["configmaps"]);
        assert_eq!(rules.over(std::slice::from_ref(&get), &KindIndex::kubernetes()), vec![get]);
    }

    #[test]
    fn aggregation_is_resolved_in_the_ceiling() {
        // Kubernetes' aggregation controller has copied the Install's role's rules into the ceiling role already.
        let mut aggregated = role("aggregated-ceiling", &[(&["*"], &["*"], &["*"])]);
        aggregated.aggregation_rule = Some(k8s_openapi::api::rbac::v1::AggregationRule {
            cluster_role_selectors: Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some([("ceiling".to_owned(), "true".to_owned())].into()),
                ..Default::default()
            }]),
        });
        let mut part = role("part", &[(&["get"], &[""], &["configmaps"])]);
        part.metadata.labels = Some([("ceiling".to_owned(), "true".to_owned())].into());
        let roles = Roles::new(&[], &[aggregated, part]);
        let rules = CeilingRules::new(&ceiling(&["aggregated-ceiling"], &[]), &roles, &[]);
        let get = permission(PermissionScope::Namespaced, &["operators"], &["get"], "", &["configmaps"]);
        assert!(rules.over(&[get], &KindIndex::kubernetes()).is_empty());
    }

    #[test]
    fn the_apis_the_content_defines_are_inside_every_ceiling() {
        let roles = Roles::new(&[], &[operator_role()]);
        let crd = serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "plumbuses.example.com"},
            "spec": {"group": "example.com", "names": {"plural": "plumbuses", "kind": "Plumbus"}}});
        let own = own_api_rules(std::slice::from_ref(&crd), &BTreeSet::from(["plumbuses.example.com".to_owned()]));
        let rules = CeilingRules::new(&ceiling(&["operator-ceiling"], &[("kube-system", &[])]), &roles, &own);
        let plumbuses =
            permission(PermissionScope::Cluster, &[], &["*"], "example.com", &["plumbuses", "plumbuses/status"]);
        assert!(rules.over(&[plumbuses], &KindIndex::kubernetes()).is_empty());
        let others = permission(PermissionScope::Cluster, &[], &["get"], "example.com", &["gazorpazorps"]);
        assert_eq!(rules.over(std::slice::from_ref(&others), &KindIndex::kubernetes()), vec![others]);
        let without = CeilingRules::new(&ceiling(&["operator-ceiling"], &[]), &roles, &[]);
        let plumbuses =
            permission(PermissionScope::Namespaced, &["operators"], &["get"], "example.com", &["plumbuses"]);
        assert!(!without.over(&[plumbuses], &KindIndex::kubernetes()).is_empty());
    }

    #[test]
    fn a_role_an_install_applied_never_widens_a_ceiling_by_aggregation() {
        // Kubernetes' aggregation controller has copied the Install's role's rules into the ceiling role already.
        let mut aggregated = role("aggregated-ceiling", &[(&["*"], &["*"], &["*"])]);
        aggregated.aggregation_rule = Some(k8s_openapi::api::rbac::v1::AggregationRule {
            cluster_role_selectors: Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some([("ceiling".to_owned(), "true".to_owned())].into()),
                ..Default::default()
            }]),
        });
        let mut widen = role("widen", &[(&["*"], &["*"], &["*"])]);
        widen.metadata.labels = Some([("ceiling".to_owned(), "true".to_owned())].into());
        widen.metadata.annotations = Some([(INSTALL_ANNOTATION.to_owned(), "grab".to_owned())].into());
        // Another role an Install applied, known by its owner reference alone (its annotation removed).
        let mut owned = role("owned", &[(&["*"], &["*"], &["*"])]);
        owned.metadata.labels = Some([("ceiling".to_owned(), "true".to_owned())].into());
        owned.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "operators.coreos.com/v2alpha1".into(),
            kind: "Install".into(),
            name: "grab".into(),
            uid: "u".into(),
            ..Default::default()
        }]);
        // An admin's plain role selected too: its rules stay in the ceiling.
        let mut admins = role("admins", &[(&["get"], &[""], &["configmaps"])]);
        admins.metadata.labels = Some([("ceiling".to_owned(), "true".to_owned())].into());
        let rbac = RbacObjects {
            cluster_roles: vec![Arc::new(aggregated), Arc::new(widen), Arc::new(owned), Arc::new(admins)],
            ..RbacObjects::default()
        };
        let rules = CeilingRules::new(&ceiling(&["aggregated-ceiling"], &[]), &ceiling_roles(&rbac), &[]);
        let everything = permission(PermissionScope::Cluster, &[], &["*"], "*", &["*"]);
        assert_eq!(rules.over(std::slice::from_ref(&everything), &KindIndex::kubernetes()), vec![everything.clone()]);
        let config_maps = permission(PermissionScope::Cluster, &[], &["get"], "", &["configmaps"]);
        assert!(rules.over(&[config_maps], &KindIndex::kubernetes()).is_empty(), "the admin's role still counts");
        // Read with every role, the aggregation would have let it through: the filter is what stops it.
        let all = Roles::shared::<k8s_openapi::api::rbac::v1::Role>(&[], rbac.cluster_roles.clone());
        let widened = CeilingRules::new(&ceiling(&["aggregated-ceiling"], &[]), &all, &[]);
        assert!(widened.over(&[everything], &KindIndex::kubernetes()).is_empty());
    }

    #[test]
    fn a_crd_is_the_contents_own_api_only_when_named_own_and_named_as_it_serves() {
        let crd = |name: &str, group: &str, plural: &str| {
            serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": name}, "spec": {"group": group, "names": {"plural": plural, "kind": "X"}}})
        };
        let own = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<BTreeSet<String>>();
        let plumbai = crd("plumbai.how.theydoit.com", "how.theydoit.com", "plumbai");
        assert_eq!(own_api_rules(std::slice::from_ref(&plumbai), &own(&["plumbai.how.theydoit.com"])).len(), 1);
        // Another operator's (it exists, made by no one of this Install): not named own, widens nothing.
        assert!(own_api_rules(std::slice::from_ref(&plumbai), &own(&[])).is_empty());
        // A CRD whose name and spec disagree never counts, whatever it is called.
        let misnamed = crd("plumbai.how.theydoit.com", "rbac.authorization.k8s.io", "clusterrolebindings");
        assert!(own_api_rules(&[misnamed], &own(&["plumbai.how.theydoit.com"])).is_empty());
    }
}
