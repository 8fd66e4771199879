//! `olmv2 approve INSTALL`: shows the permissions an Install waits for as a table, with whom the content's bindings
//! bind to which roles and which of its ClusterRoles gather or extend other roles' rules, asks for confirmation, and
//! approves with the user's own credentials (KUBECONFIG), so the webhook judges the person, not the tool. The approval
//! carries the resourceVersion of what was shown: if the pending set changed meanwhile, nothing is approved.
//! Installed as `kubectl-olmv2` on the PATH, it runs as `kubectl olmv2 approve INSTALL`.

use std::fmt::Write as _;
use std::io::BufRead;

use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::api::v2alpha1::{
    AggregationType, Approval, BindingRule, Install, PendingAggregation, PendingBinding, PendingPermission,
    PendingReason, PermissionScope, CONTENT_CHANGED_BY_ANNOTATION,
};
use crate::error::Error;
use crate::output::table;

/// Options of `approve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApproveOptions {
    /// The Install to approve.
    pub install: String,
    /// Approve without asking.
    #[arg(long, short)]
    pub yes: bool,
}

fn cell(items: &[String]) -> String {
    if items.is_empty() {
        "*".into()
    } else {
        items.iter().map(|i| if i.is_empty() { "\"\"".to_owned() } else { i.clone() }).collect::<Vec<_>>().join(",")
    }
}

/// The pending permissions as aligned columns.
pub fn pending_table(permissions: &[PendingPermission]) -> String {
    let rows: Vec<Vec<String>> = permissions
        .iter()
        .map(|p| {
            let (scope, namespaces) = match p.scope {
                PermissionScope::Cluster => ("Cluster", "*".to_owned()),
                PermissionScope::Namespaced => ("Namespaced", p.namespaces.join(",")),
            };
            let what = if p.non_resource_urls.is_empty() { cell(&p.resources) } else { cell(&p.non_resource_urls) };
            let groups = if p.non_resource_urls.is_empty() { cell(&p.api_groups) } else { "-".into() };
            let names = if p.resource_names.is_empty() { "-".into() } else { cell(&p.resource_names) };
            vec![scope.to_owned(), namespaces, groups, what, names, p.verbs.join(",")]
        })
        .collect();
    table(&["SCOPE", "NAMESPACES", "API GROUPS", "RESOURCES/URLS", "NAMES", "VERBS"], &rows)
}

/// The content's bindings as aligned columns: whom each binds to which role, and how many rules that role grants
/// (the rules themselves are in `status.pending.bindings`).
pub fn bindings_table(bindings: &[PendingBinding]) -> String {
    let rows: Vec<Vec<String>> = bindings
        .iter()
        .map(|b| {
            let subjects: Vec<String> = b
                .subjects
                .iter()
                .map(|s| match &s.namespace {
                    Some(namespace) => format!("{}/{namespace}/{}", s.kind, s.name),
                    None => format!("{}/{}", s.kind, s.name),
                })
                .collect();
            // A role that does not exist grants whatever someone later gives it: never "0 rules".
            let rules = if !b.role_found {
                "role not found".to_owned()
            } else if b.rules.iter().any(grants_everything) {
                format!("{} (every verb on every resource)", b.rules.len())
            } else {
                b.rules.len().to_string()
            };
            vec![
                b.kind.clone(),
                b.namespace.clone().unwrap_or_else(|| "*".to_owned()),
                b.name.clone(),
                format!("{}/{}", b.role_ref.kind, b.role_ref.name),
                if subjects.is_empty() { "-".to_owned() } else { subjects.join(",") },
                rules,
            ]
        })
        .collect();
    table(&["KIND", "NAMESPACE", "NAME", "ROLE", "SUBJECTS", "RULES"], &rows)
}

/// Whether a rule is cluster-admin's: every verb on every resource of every group, which a count of rules hides.
fn grants_everything(rule: &BindingRule) -> bool {
    let all = |items: &[String]| items.iter().any(|item| item == "*");
    all(&rule.verbs) && all(&rule.api_groups) && all(&rule.resources)
}

/// A label selector as `kubectl` writes one (`key=value,key in (a,b),!key`); the empty selector selects everything.
fn selector_text(selector: &LabelSelector) -> String {
    let mut parts: Vec<String> =
        selector.match_labels.iter().flatten().map(|(key, value)| format!("{key}={value}")).collect();
    for requirement in selector.match_expressions.iter().flatten() {
        let key = &requirement.key;
        let values = requirement.values.as_deref().unwrap_or_default().join(",");
        parts.push(match requirement.operator.as_str() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({values})"),
        });
    }
    if parts.is_empty() {
        "(every ClusterRole)".to_owned()
    } else {
        parts.join(",")
    }
}

/// The ClusterRoles that gather or extend other roles' rules, as aligned columns.
pub fn aggregations_table(aggregations: &[PendingAggregation]) -> String {
    let names = |roles: &[String]| if roles.is_empty() { "(none yet)".to_owned() } else { roles.join(",") };
    let rows: Vec<Vec<String>> = aggregations
        .iter()
        .map(|a| {
            let (kind, roles, matching) = match a.aggregation_type {
                AggregationType::Gathers => {
                    let selectors: Vec<String> = a.selectors.iter().map(selector_text).collect();
                    let selectors = if selectors.is_empty() { "(none)".to_owned() } else { selectors.join(" or ") };
                    ("Gathers", names(&a.aggregated_roles), selectors)
                }
                AggregationType::Extends => {
                    let labels: Vec<String> = a.labels.iter().map(|(key, value)| format!("{key}={value}")).collect();
                    ("Extends", names(&a.aggregates_into), labels.join(","))
                }
            };
            vec![a.cluster_role.clone(), kind.to_owned(), roles, matching]
        })
        .collect();
    table(&["CLUSTERROLE", "TYPE", "ROLES", "SELECTORS/LABELS"], &rows)
}

/// What an Install waits for, for a person to read before approving.
pub fn describe_pending(install: &Install) -> String {
    let status = install.status.clone().unwrap_or_default();
    let pending = status.pending.unwrap_or_default();
    let permissions = pending.permissions;
    let account = status
        .service_account_ref
        .map_or_else(|| "(not assigned yet)".to_owned(), |a| format!("{}/{}", a.namespace, a.name));
    let mut out = String::new();
    let _ = writeln!(out, "Install {} runs as ServiceAccount {account}.", install.name_any());
    // The approval binds to this content: what is applied is what is shown here.
    for content in &status.resolved {
        match (&content.manifest_image, &content.config_digest) {
            (Some(image), Some(config)) => {
                writeln!(out, "Content: bundle image {image}, with the deployment configuration {config}")
            }
            (Some(image), None) => writeln!(out, "Content: bundle image {image}"),
            (None, _) => writeln!(out, "Content: raw manifests {}", content.digest),
        }
        .unwrap_or_default();
    }
    let changed_by = install.annotations().get(CONTENT_CHANGED_BY_ANNOTATION);
    let why = match (pending.reason, changed_by) {
        (Some(PendingReason::ContentChanged), Some(user)) => Some(format!(
            "{user} changed the content without holding what the ServiceAccount was granted: these are all the rules the new content uses."
        )),
        (Some(PendingReason::ManualApproval), _) => {
            Some("Updates are approved by hand: these are all the rules this content uses.".to_owned())
        }
        _ => None,
    };
    if let Some(why) = why {
        let _ = writeln!(out, "{why}");
    }
    let _ =
        writeln!(out, "Approving grants it these {} permissions, which you must hold yourself:\n", permissions.len());
    out.push_str(&pending_table(&permissions));
    if !pending.bindings.is_empty() {
        let _ = writeln!(
            out,
            "\nApproving lets the content bind these subjects to these roles (a RoleBinding's rules hold in its \
             namespace only; each role's rules are under status.pending.bindings):\n"
        );
        out.push_str(&bindings_table(&pending.bindings));
    }
    if !pending.aggregations.is_empty() {
        let _ = writeln!(
            out,
            "\nThese ClusterRoles gather or extend other roles' rules: one that Gathers holds the rules of every \
             ClusterRole its selectors match, now and later; one that Extends adds its rules to the ROLES, and so to \
             everyone bound to them:\n"
        );
        out.push_str(&aggregations_table(&pending.aggregations));
    }
    out
}

/// What an Install over an InstallPolicy needs that the policies do not allow, one line each with its policy;
/// `None` when it fits them.
pub fn describe_policy(install: &Install) -> Option<String> {
    let policy = install.status.as_ref()?.policy.as_ref().filter(|p| crate::policy::exceeds(Some(p)))?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Install {} exceeds an InstallPolicy: no approval can let it through, whoever gives it. A cluster admin may \
         change the policy, or the content must change:\n",
        install.name_any()
    );
    let rows: Vec<Vec<String>> = policy.violations.iter().map(|v| vec![v.policy.clone(), v.message.clone()]).collect();
    out.push_str(&table(&["POLICY", "OVER THE POLICY"], &rows));
    Some(out)
}

/// Runs `approve` against the cluster in KUBECONFIG.
pub async fn run(options: ApproveOptions) -> Result<(), Error> {
    let config = kube::Config::infer().await.map_err(Error::LoadClusterConfig)?;
    let client = kube::Client::try_from(config).map_err(Error::BuildClient)?;
    let api = Api::<Install>::all(client);
    let install = api
        .get(&options.install)
        .await
        .map_err(|source| Error::ReadInstall { name: options.install.clone(), source })?;
    if let Some(text) = describe_policy(&install) {
        crate::output::write(&text)?;
        let message = "its content exceeds an InstallPolicy; no approval can let it through".to_owned();
        return Err(Error::ApprovalRefused { name: options.install.clone(), message });
    }
    let pending = install.status.as_ref().and_then(|s| s.pending.as_ref()).map_or(0, |p| p.permissions.len());
    if pending == 0 {
        let state = install.status.as_ref().and_then(|s| s.state).map_or("unknown".to_owned(), |s| format!("{s:?}"));
        crate::output::write(&format!(
            "Install {} has no pending permissions (state {state}); there is nothing to approve.\n",
            options.install
        ))?;
        return Ok(());
    }
    if install.spec.approval == Approval::Approved {
        crate::output::write(&format!("Install {} is already approved.\n", options.install))?;
        return Ok(());
    }
    crate::output::write(&describe_pending(&install))?;
    if !options.yes {
        crate::output::write(&format!("\nApprove these {pending} permissions? [y/N] "))?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer).map_err(Error::ReadInput)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            crate::output::write("Not approved.\n")?;
            return Ok(());
        }
    }
    approve_as_shown(&api, &install).await
}

/// Approves `install` as it was read (and shown): with its resourceVersion as precondition, so that a pending set
/// changed meanwhile is not approved. The user's own credentials: the webhook judges whether they hold it all.
pub async fn approve_as_shown(api: &Api<Install>, install: &Install) -> Result<(), Error> {
    let name = install.name_any();
    let body = json!({"metadata": {"resourceVersion": install.resource_version()}, "spec": {"approval": "Approved"}});
    match api.patch(&name, &PatchParams::default(), &Patch::Merge(&body)).await {
        Ok(_) => crate::output::write(&format!("Install {name} approved.\n")),
        Err(kube::Error::Api(status)) if status.code == 409 => Err(Error::InstallChanged { name }),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            Err(Error::ApprovalRefused { name, message: status.message })
        }
        Err(source) => Err(Error::ApproveInstall { name, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v2alpha1::{InstallSpec, InstallStatus, PendingPermissions};

    fn install_pending(pending: serde_json::Value) -> Install {
        let spec: InstallSpec =
            serde_json::from_value(json!({"content": [{"type": "Raw", "raw": "kind: Pod"}]})).expect("spec");
        let mut install = Install::new("plumbus", spec);
        let pending: PendingPermissions = serde_json::from_value(pending).expect("pending");
        install.status = Some(InstallStatus { pending: Some(pending), ..InstallStatus::default() });
        install
    }

    fn rbac_pending() -> Install {
        install_pending(json!({
            "count": 1,
            "permissions": [{"scope": "Cluster", "verbs": ["create"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"]}],
            "bindings": [
                {"kind": "ClusterRoleBinding", "name": "own-the-cluster", "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
                 "subjects": [{"kind": "Group", "name": "devs"}, {"kind": "User", "name": "mallory"}],
                 "roleFound": true, "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}]},
                {"kind": "RoleBinding", "namespace": "operators", "name": "later", "roleRef": {"kind": "Role", "name": "ghost"},
                 "subjects": [{"kind": "ServiceAccount", "namespace": "operators", "name": "plumbus"}], "roleFound": false},
            ],
            "aggregations": [
                {"type": "Gathers", "clusterRole": "gatherer", "aggregatedRoles": ["view", "system:aggregate-to-view"],
                 "selectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                               {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}]},
                {"type": "Extends", "clusterRole": "plumbus-admin", "aggregatesInto": ["admin"],
                 "labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
                {"type": "Extends", "clusterRole": "sleeper", "labels": {"example.com/aggregate-to-root": "true"}},
            ],
        }))
    }

    #[test]
    fn describe_pending_names_whom_the_bindings_bind_to_which_roles() {
        let text = describe_pending(&rbac_pending());
        let (_, bindings) =
            text.split_once("Approving lets the content bind these subjects to these roles").expect(&text);
        let lines: Vec<&str> = bindings.lines().filter(|line| line.starts_with("  ")).collect();
        assert!(lines[0].starts_with("  KIND") && lines[0].contains("SUBJECTS"), "{text}");
        assert!(
            lines[1].contains("ClusterRoleBinding")
                && lines[1].contains(" * ")
                && lines[1].contains("ClusterRole/cluster-admin")
                && lines[1].contains("Group/devs,User/mallory")
                && lines[1].ends_with("2 (every verb on every resource)"),
            "{text}"
        );
        assert!(
            lines[2].contains("operators")
                && lines[2].contains("Role/ghost")
                && lines[2].contains("ServiceAccount/operators/plumbus")
                && lines[2].ends_with("role not found"),
            "{text}"
        );
    }

    #[test]
    fn describe_pending_shows_what_aggregating_cluster_roles_reach() {
        let text = describe_pending(&rbac_pending());
        let (_, aggregations) = text.split_once("These ClusterRoles gather or extend other roles' rules").expect(&text);
        let lines: Vec<&str> = aggregations.lines().filter(|line| line.starts_with("  ")).collect();
        assert!(lines[0].starts_with("  CLUSTERROLE") && lines[0].contains("SELECTORS/LABELS"), "{text}");
        assert!(
            lines[1].contains("gatherer")
                && lines[1].contains("Gathers")
                && lines[1].contains("view,system:aggregate-to-view")
                && lines[1].ends_with("rbac.authorization.k8s.io/aggregate-to-view=true or team in (a,b)"),
            "{text}"
        );
        assert!(
            lines[2].contains("plumbus-admin")
                && lines[2].contains("Extends")
                && lines[2].contains(" admin ")
                && lines[2].ends_with("rbac.authorization.k8s.io/aggregate-to-admin=true"),
            "{text}"
        );
        assert!(lines[3].contains("sleeper") && lines[3].contains("(none yet)"), "{text}");
    }

    #[test]
    fn describe_pending_shows_the_content_and_who_changed_it() {
        let mut install = install_pending(json!({"count": 1, "reason": "ContentChanged",
            "permissions": [{"scope": "Cluster", "verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}]}));
        install.annotations_mut().insert(CONTENT_CHANGED_BY_ANNOTATION.into(), "bob".into());
        if let Some(status) = install.status.as_mut() {
            status.resolved = vec![crate::api::v2alpha1::ResolvedContent {
                content_type: crate::api::v2alpha1::ContentType::ManifestImage,
                manifest_image: Some("registry.example/plumbus@sha256:abc".into()),
                digest: "sha256:abc".into(),
                config_digest: Some("sha256:def".into()),
            }];
        }
        let text = describe_pending(&install);
        assert!(
            text.contains("Content: bundle image registry.example/plumbus@sha256:abc, with the deployment configuration sha256:def"),
            "{text}"
        );
        assert!(text.contains("bob changed the content"), "{text}");
    }

    #[test]
    fn describe_pending_without_rbac_content_shows_only_the_permissions() {
        let text = describe_pending(&install_pending(json!({
            "count": 1,
            "permissions": [{"scope": "Cluster", "verbs": ["get"], "nonResourceURLs": ["/metrics"]}],
        })));
        assert!(text.contains("/metrics"), "{text}");
        assert!(!text.contains("Approving lets the content bind"), "{text}");
        assert!(!text.contains("gather or extend"), "{text}");
    }

    #[test]
    fn an_install_over_a_policy_shows_each_violation_and_its_policy() {
        let mut install = rbac_pending();
        assert_eq!(describe_policy(&install), None);
        let status = install.status.as_mut().expect("status");
        status.policy = Some(serde_json::from_value(json!({"state": "Exceeds", "violations": [
            {"policy": "ceiling", "message": "* * (*) cluster-wide is over the ceiling"},
            {"policy": "no-admin", "message": "ClusterRoleBinding grab (binds ClusterRole cluster-admin) is forbidden (forbid[0])"}
        ]})).expect("policy"));
        let text = describe_policy(&install).expect("shown");
        assert!(text.contains("exceeds an InstallPolicy: no approval can let it through"), "{text}");
        assert!(text.contains("ceiling   * * (*) cluster-wide is over the ceiling"), "{text}");
        assert!(text.contains("no-admin  ClusterRoleBinding grab (binds ClusterRole cluster-admin)"), "{text}");
    }

    #[test]
    fn selectors_read_as_kubectl_writes_them() {
        let selector: LabelSelector = serde_json::from_value(json!({
            "matchLabels": {"a": "1"},
            "matchExpressions": [
                {"key": "b", "operator": "NotIn", "values": ["2"]},
                {"key": "c", "operator": "Exists"},
                {"key": "d", "operator": "DoesNotExist"},
            ],
        }))
        .expect("selector");
        assert_eq!(selector_text(&selector), "a=1,b notin (2),c,!d");
        assert_eq!(selector_text(&LabelSelector::default()), "(every ClusterRole)");
    }

    #[test]
    fn pending_permissions_read_as_a_table() {
        let permissions: Vec<PendingPermission> = serde_json::from_value(json!([
            {"scope": "Cluster", "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"scope": "Namespaced", "namespaces": ["operators"], "verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["token"]},
            {"scope": "Cluster", "verbs": ["get"], "nonResourceURLs": ["/metrics"]},
        ]))
        .expect("permissions");
        let text = pending_table(&permissions);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("  SCOPE"), "{text}");
        assert!(lines[1].contains("Cluster") && lines[1].ends_with('*'), "{text}");
        assert!(
            lines[2].contains("operators")
                && lines[2].contains("\"\"")
                && lines[2].contains("token")
                && lines[2].ends_with("get,list"),
            "{text}"
        );
        assert!(lines[3].contains("/metrics") && lines[3].contains(" - "), "{text}");
    }
}
