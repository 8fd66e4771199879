//! `olmv2 approve INSTALL`: shows the permissions an Install waits for as a table, asks for confirmation, and
//! approves with the user's own credentials (KUBECONFIG), so the webhook judges the person, not the tool. The approval
//! carries the resourceVersion of what was shown: if the pending set changed meanwhile, nothing is approved.
//! Installed as `kubectl-olmv2` on the PATH, it runs as `kubectl olmv2 approve INSTALL`.

use std::fmt::Write as _;
use std::io::BufRead;

use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;

use crate::api::v2alpha1::{Approval, Install, PendingPermission, PermissionScope};
use crate::bundle_command::table;
use crate::error::Error;

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

/// What an Install waits for, for a person to read before approving.
pub fn describe_pending(install: &Install) -> String {
    let status = install.status.clone().unwrap_or_default();
    let permissions = status.pending.map(|p| p.permissions).unwrap_or_default();
    let account = status
        .service_account_ref
        .map_or_else(|| "(not assigned yet)".to_owned(), |a| format!("{}/{}", a.namespace, a.name));
    let mut out = String::new();
    let _ = writeln!(out, "Install {} runs as ServiceAccount {account}.", install.name_any());
    let _ =
        writeln!(out, "Approving grants it these {} permissions, which you must hold yourself:\n", permissions.len());
    out.push_str(&pending_table(&permissions));
    out
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
    let body = json!({"metadata": {"resourceVersion": install.resource_version()}, "spec": {"approval": "Approved"}});
    match api.patch(&options.install, &PatchParams::default(), &Patch::Merge(&body)).await {
        Ok(_) => crate::output::write(&format!("Install {} approved.\n", options.install)),
        Err(kube::Error::Api(status)) if status.code == 409 => Err(Error::InstallChanged { name: options.install }),
        Err(kube::Error::Api(status)) if status.code == 403 => {
            Err(Error::ApprovalRefused { name: options.install, message: status.message })
        }
        Err(source) => Err(Error::ApproveInstall { name: options.install, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
