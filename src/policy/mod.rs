//! Cluster-admin policy (docs/policy.md): the `InstallPolicy` objects' ceilings on what any Install may be granted
//! or apply (`ceiling`), the objects they forbid outright (`forbid`), and who may install from where (`sources`).
//! Pure decisions: the Install controller measures content with [`evaluate`] before every grant and apply, and the
//! webhook refuses approvals of content over a policy and sources a requester may not use.

pub mod ceiling;
pub mod forbid;
pub mod sources;

use kube::ResourceExt;
use serde_json::Value;

use crate::api::v2alpha1::{
    AppliedObject, InstallPolicy, PendingPermission, PolicyState, PolicyStatus, PolicyViolation, ResolvedContent,
};
use crate::rbac::missing::describe_permission;
use crate::rbac::{KindIndex, Roles, Rule};
use ceiling::CeilingRules;

/// How many violations a condition message lists before it counts the rest.
const SHOWN: usize = 10;

/// How content measures against `policies`: `None` when there is none. `objects` are the content as it would be
/// applied (namespaces mapped); `needed`, every rule it needs with nothing counted as held (what applying it takes
/// and what its Roles and bindings grant); `roles`, the cluster's ClusterRoles the ceilings name; `own`, the rules on
/// the APIs the content defines itself (`ceiling::own_api_rules`), inside every ceiling.
pub fn evaluate(
    policies: &[InstallPolicy],
    roles: &Roles,
    kinds: &KindIndex,
    objects: &[Value],
    needed: &[PendingPermission],
    own: &[Rule],
) -> Option<PolicyStatus> {
    if policies.is_empty() {
        return None;
    }
    let mut violations = Vec::new();
    for policy in policies {
        let name = policy.name_any();
        let mut violation = |message: String| violations.push(PolicyViolation { policy: name.clone(), message });
        if let Some(ceiling) = &policy.spec.ceiling {
            let rules = CeilingRules::new(ceiling, roles, own);
            let over = rules.over(needed, kinds);
            if !over.is_empty() {
                for role in &rules.missing_roles {
                    violation(format!("ceiling ClusterRole {role} does not exist: it allows nothing"));
                }
            }
            for permission in over {
                violation(format!("{} is over the ceiling", describe_permission(&permission)));
            }
        }
        for object in objects {
            let matched: Vec<String> = policy
                .spec
                .forbid
                .iter()
                .enumerate()
                .filter(|(_, rule)| forbid::forbids(rule, object))
                .map(|(index, _)| format!("forbid[{index}]"))
                .collect();
            if !matched.is_empty() {
                violation(format!("{} is forbidden ({})", forbid::describe(object), matched.join(", ")));
            }
        }
    }
    let state = if violations.is_empty() { PolicyState::Within } else { PolicyState::Exceeds };
    Some(PolicyStatus { state: Some(state), violations })
}

/// Whether content over a policy may keep running as it was: the pass would re-apply content let through before
/// (`approved`), at the same place (each object it applies, `placed`, was applied before), granting nothing. Anything
/// else (other content, a move to other namespaces, a rule to grant) waits until it fits.
pub fn runs_on(
    grant: &[PendingPermission],
    resolved: &[ResolvedContent],
    approved: &[ResolvedContent],
    placed: &[AppliedObject],
    applied: &[AppliedObject],
) -> bool {
    grant.is_empty()
        && !approved.is_empty()
        && resolved == approved
        && !applied.is_empty()
        && placed.iter().all(|object| applied.contains(object))
}

/// The violations as one line: at most ten, each with its policy, then how many more.
pub fn summary(violations: &[PolicyViolation]) -> String {
    let mut items: Vec<String> =
        violations.iter().take(SHOWN).map(|v| format!("InstallPolicy {}: {}", v.policy, v.message)).collect();
    if violations.len() > SHOWN {
        items.push(format!("and {} more", violations.len() - SHOWN));
    }
    items.join("; ")
}

/// Whether a status says its content exceeds a policy.
pub fn exceeds(status: Option<&PolicyStatus>) -> bool {
    status.is_some_and(|status| status.state == Some(PolicyState::Exceeds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v2alpha1::{Ceiling, ForbidRule, InstallPolicySpec, PermissionScope};
    use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
    use kube::api::ObjectMeta;
    use serde_json::json;

    fn policy(name: &str, spec: InstallPolicySpec) -> InstallPolicy {
        InstallPolicy::new(name, spec)
    }

    fn ceiling(role: &str) -> InstallPolicySpec {
        InstallPolicySpec {
            ceiling: Some(Ceiling { cluster_roles: vec![role.into()], namespaces: vec![] }),
            ..InstallPolicySpec::default()
        }
    }

    fn deployments_role() -> ClusterRole {
        ClusterRole {
            metadata: ObjectMeta { name: Some("deployments".into()), ..ObjectMeta::default() },
            rules: Some(vec![PolicyRule {
                verbs: vec!["*".into()],
                api_groups: Some(vec!["apps".into()]),
                resources: Some(vec!["deployments".into()]),
                ..PolicyRule::default()
            }]),
            ..ClusterRole::default()
        }
    }

    fn full_authority() -> PendingPermission {
        PendingPermission {
            scope: PermissionScope::Cluster,
            namespaces: vec![],
            verbs: vec!["*".into()],
            api_groups: vec!["*".into()],
            resources: vec!["*".into()],
            resource_names: vec![],
            non_resource_urls: vec![],
        }
    }

    fn binding_to_cluster_admin() -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "grab"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "operators"}]})
    }

    #[test]
    fn no_policy_no_verdict() {
        let roles = Roles::new(&[], &[]);
        assert_eq!(evaluate(&[], &roles, &KindIndex::kubernetes(), &[], &[full_authority()], &[]), None);
    }

    #[test]
    fn content_binding_cluster_admin_exceeds_a_ceiling_and_a_forbid_rule_each_named() {
        let roles = Roles::new(&[], &[deployments_role()]);
        let forbid = InstallPolicySpec {
            forbid: vec![ForbidRule { role_refs: vec!["cluster-admin".into()], ..ForbidRule::default() }],
            ..InstallPolicySpec::default()
        };
        let policies = [policy("ceiling", ceiling("deployments")), policy("no-admin", forbid)];
        let status = evaluate(
            &policies,
            &roles,
            &KindIndex::kubernetes(),
            &[binding_to_cluster_admin()],
            &[full_authority()],
            &[],
        )
        .expect("evaluated");
        assert_eq!(status.state, Some(PolicyState::Exceeds));
        assert_eq!(
            status.violations,
            vec![
                PolicyViolation {
                    policy: "ceiling".into(),
                    message: "* * (*) cluster-wide is over the ceiling".into()
                },
                PolicyViolation {
                    policy: "no-admin".into(),
                    message: "ClusterRoleBinding grab (binds ClusterRole cluster-admin) is forbidden (forbid[0])"
                        .into()
                },
            ]
        );
    }

    #[test]
    fn content_inside_every_policy_is_within() {
        let roles = Roles::new(&[], &[deployments_role()]);
        let create = PendingPermission {
            scope: PermissionScope::Namespaced,
            namespaces: vec!["operators".into()],
            verbs: vec!["create".into()],
            api_groups: vec!["apps".into()],
            resources: vec!["deployments".into()],
            ..full_authority()
        };
        let status = evaluate(
            &[policy("ceiling", ceiling("deployments"))],
            &roles,
            &KindIndex::kubernetes(),
            &[],
            &[create],
            &[],
        );
        assert_eq!(status, Some(PolicyStatus { state: Some(PolicyState::Within), violations: vec![] }));
    }

    #[test]
    fn a_missing_ceiling_role_is_named_when_content_exceeds_it() {
        let roles = Roles::new(&[], &[]);
        let status = evaluate(
            &[policy("ceiling", ceiling("gone"))],
            &roles,
            &KindIndex::kubernetes(),
            &[],
            &[full_authority()],
            &[],
        )
        .expect("evaluated");
        assert!(status.violations[0].message.contains("ClusterRole gone does not exist"), "{status:?}");
    }

    #[test]
    fn the_summary_lists_ten_and_counts_the_rest() {
        let violations: Vec<PolicyViolation> =
            (0..12).map(|i| PolicyViolation { policy: "p".into(), message: format!("v{i}") }).collect();
        let text = summary(&violations);
        assert!(text.starts_with("InstallPolicy p: v0; InstallPolicy p: v1"), "{text}");
        assert!(text.ends_with("InstallPolicy p: v9; and 2 more"), "{text}");
    }

    #[test]
    fn content_runs_on_only_as_it_was_let_through_and_where_it_was() {
        let digest = |d: &str| {
            vec![ResolvedContent {
                content_type: crate::api::v2alpha1::ContentType::Raw,
                manifest_image: None,
                digest: d.into(),
                config_digest: None,
            }]
        };
        let config_map = |namespace: &str| AppliedObject {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(namespace.into()),
            name: "settings".into(),
        };
        let applied = [config_map("operators")];
        let (d1, d2) = (digest("sha256:1"), digest("sha256:2"));
        assert!(runs_on(&[], &d1, &d1, &applied, &applied), "the same content, where it was");
        assert!(!runs_on(&[], &d2, &d1, &applied, &applied), "other content waits");
        assert!(!runs_on(&[], &d1, &d1, &[config_map("kube-system")], &applied), "moved elsewhere: waits");
        assert!(!runs_on(&[full_authority()], &d1, &d1, &applied, &applied), "something to grant: waits");
        assert!(!runs_on(&[], &d1, &d1, &applied, &[]), "never applied: nothing runs");
        assert!(!runs_on(&[], &d1, &[], &applied, &applied), "never let through");
    }
}
