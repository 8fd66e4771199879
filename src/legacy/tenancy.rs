//! RBAC for an operator's targets, as OLM v0 extends it from what its InstallPlan made in the operator's namespace
//! (`ensureTenantRBAC`, `ensureSingletonRBAC`): for a group with target namespaces, the CSV's own Roles and
//! RoleBindings are copied into each target where its account lacks its permissions, owned by the CSV's copy there;
//! for a group targeting every namespace, they are lifted to ClusterRoles (plus reading namespaces) and
//! ClusterRoleBindings. Only Roles labelled and owned as the CSV's are used. These functions decide what to write;
//! `csv/tenants.rs` reads, asks the author and writes.
//!
//! Guards OLM lacks, because labels and owner references are written by whoever may write Roles in the operator's
//! namespace, not only by the InstallPlan: a binding is copied or lifted only when it refers to one of those Roles
//! (OLM lifts a RoleBinding to `cluster-admin` into a ClusterRoleBinding to `cluster-admin`), only for its subjects
//! that are the CSV's own accounts (those of `spec.install.spec.permissions`, in the CSV's namespace), and only when
//! the rules the CSV declares for them cover the Role's: what is copied or lifted never grants more, nor to anyone
//! else, than the CSV itself asks. A Role is never bound in place of an object of the same name that is not the
//! CSV's (OLM binds to whatever ClusterRole has the name).

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use super::csv::requirements::HeldRules;
use super::membership::COPIED_FROM_LABEL;
use super::roles::{MANAGED_LABEL, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::v1alpha1::StrategyDetailsDeployment;
use crate::rbac::{covers, Rule};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// OLM's `CSVOwnerSelector`: objects labelled as owned by CSV `name` of `namespace`.
pub fn owner_selector(name: &str, namespace: &str) -> String {
    format!("{OWNER_LABEL}={name},{OWNER_NAMESPACE_LABEL}={namespace},{OWNER_KIND_LABEL}=ClusterServiceVersion")
}

/// Whether every account of `strategy` holds its rules (OLM's `permissionStatus`): `held(account)` gives the rules
/// it holds in the namespace looked at (cluster-wide ones included) and cluster-wide. With `lifted`, the namespaced
/// permissions count as cluster permissions, as OLM checks them for a group targeting every namespace.
pub fn permissions_met(strategy: &StrategyDetailsDeployment, lifted: bool, held: HeldRules<'_>) -> bool {
    let namespaced = strategy.permissions.iter().map(|permission| (permission, lifted));
    let cluster = strategy.cluster_permissions.iter().map(|permission| (permission, true));
    namespaced.chain(cluster).all(|(permission, cluster_wide)| {
        let account = match permission.service_account_name.as_str() {
            "" => "default",
            name => name,
        };
        let (in_namespace, everywhere) = held(account);
        let rules: Vec<Rule> = permission.rules.iter().map(Rule::from).collect();
        covers(if cluster_wide { &everywhere } else { &in_namespace }, &rules)
    })
}

/// Whether `owners` include the object of `uid`.
fn owned_by(owners: Option<&Vec<OwnerReference>>, uid: &str) -> bool {
    owners.into_iter().flatten().any(|owner| owner.uid == uid)
}

/// The labels marking an object as the CSV's in `namespace`.
fn owner_labels(csv: &str, namespace: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (OWNER_LABEL.to_owned(), csv.to_owned()),
        (OWNER_NAMESPACE_LABEL.to_owned(), namespace.to_owned()),
        (OWNER_KIND_LABEL.to_owned(), "ClusterServiceVersion".to_owned()),
    ])
}

/// Whether an object's labels mark it as CSV `csv`'s in `namespace`.
pub fn labelled_as(labels: &BTreeMap<String, String>, csv: &str, namespace: &str) -> bool {
    owner_labels(csv, namespace).iter().all(|(key, value)| labels.get(key) == Some(value))
}

/// The CSV whose RBAC is extended: its name, namespace, uid and declared namespaced permissions.
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub uid: &'a str,
    pub declared: &'a Declared,
}

/// The CSV's declared namespaced permissions (`spec.install.spec.permissions`): each of its accounts (of the CSV's
/// namespace; `""` is `default`) and the rules it is to hold. What is copied or lifted stays within them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Declared {
    accounts: BTreeMap<String, Vec<Rule>>,
}

impl Declared {
    pub fn of(strategy: &StrategyDetailsDeployment) -> Self {
        let mut accounts: BTreeMap<String, Vec<Rule>> = BTreeMap::new();
        for permission in &strategy.permissions {
            let account = match permission.service_account_name.as_str() {
                "" => "default",
                name => name,
            };
            accounts.entry(account.to_owned()).or_default().extend(permission.rules.iter().map(Rule::from));
        }
        Self { accounts }
    }

    /// Every rule declared, for any account.
    fn all(&self) -> Vec<Rule> {
        self.accounts.values().flatten().cloned().collect()
    }

    /// The subjects among `subjects` that are declared accounts of `namespace` (a ServiceAccount subject without a
    /// namespace is of `namespace`, as in a RoleBinding there), each with its namespace written out, and the rules
    /// declared for them.
    fn bound(&self, subjects: Option<&Vec<Subject>>, namespace: &str) -> (Vec<Subject>, Vec<Rule>) {
        let mut kept = Vec::new();
        let mut rules = Vec::new();
        for subject in subjects.into_iter().flatten() {
            let in_namespace = subject.namespace.as_deref().unwrap_or_default();
            let in_namespace = if in_namespace.is_empty() { namespace } else { in_namespace };
            let account = subject.kind == "ServiceAccount"
                && subject.api_group.as_deref().unwrap_or_default().is_empty()
                && in_namespace == namespace;
            let Some(declared) = self.accounts.get(&subject.name).filter(|_| account) else { continue };
            kept.push(Subject { namespace: Some(namespace.to_owned()), ..subject.clone() });
            rules.extend(declared.iter().cloned());
        }
        (kept, rules)
    }
}

/// A binding of the CSV's to copy or lift: the Role it refers to, with the subjects it may keep and whether the
/// rules `rules` of that Role are within what the CSV declares for them.
fn bindable(csv: Owner<'_>, binding: &RoleBinding, rules: &[PolicyRule]) -> Option<Vec<Subject>> {
    let (subjects, declared) = csv.declared.bound(binding.subjects.as_ref(), csv.namespace);
    let rules: Vec<Rule> = rules.iter().map(Rule::from).collect();
    (!subjects.is_empty() && covers(&declared, &rules)).then_some(subjects)
}

/// What to write in one target namespace, and every rule it grants there (for the author check).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TenantPlan {
    pub create_roles: Vec<Role>,
    pub update_roles: Vec<Role>,
    pub create_bindings: Vec<RoleBinding>,
    pub grants: Vec<Rule>,
}

impl TenantPlan {
    pub fn is_empty(&self) -> bool {
        self.create_roles.is_empty() && self.update_roles.is_empty() && self.create_bindings.is_empty()
    }
}

/// The CSV's Roles and RoleBindings in its namespace (`owned_*`: those carrying its owner labels) copied into
/// `target`, owned by the CSV's copy there (`copy`, its uid): missing Roles created, Roles of the CSV there whose
/// rules differ updated, missing bindings to those Roles created (a binding there is never changed, as in OLM).
/// `existing_*` are the Roles and RoleBindings of `target`.
pub fn tenant_plan(
    csv: Owner<'_>,
    copy_uid: &str,
    target: &str,
    owned_roles: &[Role],
    owned_bindings: &[RoleBinding],
    existing_roles: &[Role],
    existing_bindings: &[RoleBinding],
) -> TenantPlan {
    let mut plan = TenantPlan::default();
    if target == csv.namespace {
        return plan;
    }
    let existing: BTreeMap<String, &Role> = existing_roles.iter().map(|role| (role.name_any(), role)).collect();
    let declared = csv.declared.all();
    let mut ours = BTreeMap::new();
    for role in owned_roles.iter().filter(|role| owned_by(role.metadata.owner_references.as_ref(), csv.uid)) {
        let name = role.name_any();
        let rules = role.rules.clone().unwrap_or_default();
        if !covers(&declared, &rules.iter().map(Rule::from).collect::<Vec<_>>()) {
            continue;
        }
        match existing.get(&name) {
            Some(there)
                if !labelled_as(there.labels(), csv.name, target)
                    || !owned_by(there.metadata.owner_references.as_ref(), copy_uid) =>
            {
                continue
            }
            Some(there) => {
                if there.rules.clone().unwrap_or_default() != rules {
                    let mut updated = (*there).clone();
                    updated.rules = Some(rules.clone());
                    plan.update_roles.push(updated);
                }
            }
            None => plan.create_roles.push(Role {
                metadata: tenant_metadata(&role.metadata, csv, copy_uid, target),
                rules: Some(rules.clone()),
            }),
        }
        ours.insert(name, rules);
    }
    let bound: BTreeMap<String, &RoleBinding> =
        existing_bindings.iter().map(|binding| (binding.name_any(), binding)).collect();
    for binding in owned_bindings.iter().filter(|binding| owned_by(binding.metadata.owner_references.as_ref(), csv.uid))
    {
        let Some(rules) = refers_to_role(&binding.role_ref).and_then(|role| ours.get(role)) else { continue };
        let Some(subjects) = bindable(csv, binding, rules) else { continue };
        if bound.contains_key(&binding.name_any()) {
            continue;
        }
        plan.create_bindings.push(RoleBinding {
            metadata: tenant_metadata(&binding.metadata, csv, copy_uid, target),
            role_ref: binding.role_ref.clone(),
            subjects: Some(subjects),
        });
        plan.grants.extend(rules.iter().map(Rule::from));
    }
    for role in plan.create_roles.iter().chain(&plan.update_roles) {
        plan.grants.extend(role.rules.iter().flatten().map(Rule::from));
    }
    plan.grants.sort();
    plan.grants.dedup();
    plan
}

/// The name of the Role a binding refers to, when it refers to a Role (not a ClusterRole).
fn refers_to_role(role_ref: &RoleRef) -> Option<&str> {
    (role_ref.kind == "Role" && role_ref.api_group == RBAC_GROUP).then_some(role_ref.name.as_str())
}

/// A copied object's metadata (OLM's): the original's name, labels and annotations, the owner labels of the CSV in
/// `target`, `olm.copiedFrom` and `olm.managed`, owned by the CSV's copy without blocking its deletion.
fn tenant_metadata(original: &ObjectMeta, csv: Owner<'_>, copy_uid: &str, target: &str) -> ObjectMeta {
    let mut labels = original.labels.clone().unwrap_or_default();
    labels.extend(owner_labels(csv.name, target));
    labels.insert(COPIED_FROM_LABEL.into(), csv.namespace.into());
    labels.insert(MANAGED_LABEL.into(), "true".into());
    ObjectMeta {
        name: original.name.clone(),
        namespace: Some(target.to_owned()),
        labels: Some(labels),
        annotations: original.annotations.clone(),
        owner_references: Some(vec![OwnerReference {
            api_version: "operators.coreos.com/v1alpha1".into(),
            kind: "ClusterServiceVersion".into(),
            name: csv.name.into(),
            uid: copy_uid.into(),
            block_owner_deletion: Some(false),
            controller: Some(false),
        }]),
        ..ObjectMeta::default()
    }
}

/// The rule OLM adds to each lifted ClusterRole: an operator watching every namespace lists them.
pub fn namespaces_rule() -> PolicyRule {
    PolicyRule {
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".into()]),
        ..PolicyRule::default()
    }
}

/// What to write cluster-wide for a CSV of a group targeting every namespace, and every rule it grants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SingletonPlan {
    pub cluster_roles: Vec<ClusterRole>,
    pub bindings: Vec<ClusterRoleBinding>,
    pub grants: Vec<Rule>,
}

impl SingletonPlan {
    pub fn is_empty(&self) -> bool {
        self.cluster_roles.is_empty() && self.bindings.is_empty()
    }
}

/// The CSV's Roles lifted to ClusterRoles of the same names, labels and rules plus [`namespaces_rule`], and its
/// RoleBindings to those Roles lifted to ClusterRoleBindings; what exists is left as it is (OLM never updates
/// them). A ClusterRole of the same name that is not the CSV's is not bound, nor one of the CSV's granting more
/// than it declares. `cluster_roles` and `bindings` are the cluster's, by name.
pub fn singleton_plan(
    csv: Owner<'_>,
    owned_roles: &[Role],
    owned_bindings: &[RoleBinding],
    cluster_roles: &BTreeMap<String, ClusterRole>,
    bindings: &BTreeMap<String, ClusterRoleBinding>,
) -> SingletonPlan {
    let mut plan = SingletonPlan::default();
    let declared = csv.declared.all();
    // The Roles' rules, for the bindings: a lifted role's own (its namespaces rule is granted to every lifted
    // binding), or those of the CSV's ClusterRole already there, less that rule.
    let mut ours: BTreeMap<String, Vec<PolicyRule>> = BTreeMap::new();
    for role in owned_roles.iter().filter(|role| owned_by(role.metadata.owner_references.as_ref(), csv.uid)) {
        let name = role.name_any();
        let rules = role.rules.clone().unwrap_or_default();
        if !covers(&declared, &rules.iter().map(Rule::from).collect::<Vec<_>>()) {
            continue;
        }
        match cluster_roles.get(&name) {
            Some(there) if labelled_as(there.labels(), csv.name, csv.namespace) => {
                let mut rules = there.rules.clone().unwrap_or_default();
                rules.retain(|rule| *rule != namespaces_rule());
                ours.insert(name, rules);
            }
            Some(_) => {}
            None => {
                ours.insert(name.clone(), rules.clone());
                let mut rules = rules;
                rules.push(namespaces_rule());
                plan.cluster_roles.push(ClusterRole {
                    metadata: ObjectMeta {
                        name: Some(name),
                        labels: role.metadata.labels.clone(),
                        ..ObjectMeta::default()
                    },
                    rules: Some(rules),
                    aggregation_rule: None,
                });
            }
        }
    }
    for binding in owned_bindings.iter().filter(|binding| owned_by(binding.metadata.owner_references.as_ref(), csv.uid))
    {
        let Some(rules) = refers_to_role(&binding.role_ref).and_then(|role| ours.get(role)) else { continue };
        let Some(subjects) = bindable(csv, binding, rules) else { continue };
        if bindings.contains_key(&binding.name_any()) {
            continue;
        }
        plan.bindings.push(ClusterRoleBinding {
            metadata: ObjectMeta {
                name: binding.metadata.name.clone(),
                labels: binding.metadata.labels.clone(),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: RBAC_GROUP.into(),
                kind: "ClusterRole".into(),
                name: binding.role_ref.name.clone(),
            },
            subjects: Some(subjects),
        });
        plan.grants.extend(rules.iter().map(Rule::from));
        plan.grants.push(Rule::from(&namespaces_rule()));
    }
    for role in &plan.cluster_roles {
        plan.grants.extend(role.rules.iter().flatten().map(Rule::from));
    }
    plan.grants.sort();
    plan.grants.dedup();
    plan
}

#[cfg(test)]
#[path = "tenancy_tests.rs"]
mod tests;
