//! Label projection (seed 004, "Generated Component Selection"): what OLM v0's loops generate from a labelled
//! component becomes a component too. Subscriptions project onto their InstallPlan and installed CSV, InstallPlans
//! onto the resources of their steps (CSVs, CRDs, RBAC, ...), CSVs onto their Deployments, owned CRDs and
//! APIServices. Only labels of existing Operators are projected: the reconcile of that Operator does it.

use serde_json::Value;

use super::kinds::{component_kind, ComponentKind};

/// An object that should carry the same component label.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProjectionTarget {
    pub kind: ComponentKind,
    pub namespace: Option<String>,
    pub name: String,
}

/// The kinds the controller labels, which `deploy/10-rbac.yaml` lets it patch. Others an InstallPlan may list
/// (ServiceAccounts, ConfigMaps, Secrets, Services, webhook configurations) are left alone: the controller's own
/// identity writes none of them (least privilege, `docs/security.md`).
const PROJECTABLE: &[&str] = &[
    "ClusterServiceVersion",
    "InstallPlan",
    "Deployment",
    "CustomResourceDefinition",
    "APIService",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
];

fn target(kind: &str, namespace: Option<&str>, name: &str) -> Option<ProjectionTarget> {
    let kind = component_kind(kind).filter(|kind| PROJECTABLE.contains(&kind.kind))?;
    if name.is_empty() {
        return None;
    }
    Some(ProjectionTarget {
        namespace: namespace.filter(|_| kind.namespaced).map(str::to_owned),
        kind,
        name: name.to_owned(),
    })
}

/// The objects a component of `kind` generated, read from its JSON form.
pub fn projection_targets(kind: &ComponentKind, object: &Value) -> Vec<ProjectionTarget> {
    let namespace = object["metadata"]["namespace"].as_str();
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let mut targets: Vec<ProjectionTarget> = match kind.kind {
        "Subscription" => {
            let plan = &object["status"]["installPlanRef"];
            let plan_namespace = plan["namespace"].as_str().or(namespace);
            [
                target("InstallPlan", plan_namespace, &text(&plan["name"])),
                target("ClusterServiceVersion", namespace, &text(&object["status"]["installedCSV"])),
            ]
            .into_iter()
            .flatten()
            .collect()
        }
        "InstallPlan" => {
            let steps = object["status"]["plan"].as_array().into_iter().flatten().filter_map(|step| {
                let resource = &step["resource"];
                target(resource["kind"].as_str().unwrap_or_default(), namespace, &text(&resource["name"]))
            });
            let csvs = object["spec"]["clusterServiceVersionNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|name| target("ClusterServiceVersion", namespace, name.as_str().unwrap_or_default()));
            steps.chain(csvs).collect()
        }
        "ClusterServiceVersion" => {
            let spec = &object["spec"];
            let deployments = spec["install"]["spec"]["deployments"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|deployment| target("Deployment", namespace, &text(&deployment["name"])));
            let crds = spec["customresourcedefinitions"]["owned"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|crd| target("CustomResourceDefinition", None, &text(&crd["name"])));
            let apiservices =
                spec["apiservicedefinitions"]["owned"].as_array().into_iter().flatten().filter_map(|api| {
                    let name = format!("{}.{}", text(&api["version"]), text(&api["group"]));
                    target("APIService", None, &name)
                });
            deployments.chain(crds).chain(apiservices).collect()
        }
        _ => Vec::new(),
    };
    targets.sort();
    targets.dedup();
    targets
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(name: &str) -> ComponentKind {
        component_kind(name).expect("known kind")
    }

    fn described(targets: &[ProjectionTarget]) -> Vec<String> {
        targets
            .iter()
            .map(|t| format!("{} {}/{}", t.kind.kind, t.namespace.as_deref().unwrap_or("-"), t.name))
            .collect()
    }

    #[test]
    fn a_subscription_projects_onto_its_install_plan_and_installed_csv() {
        let subscription = json!({
            "metadata": {"name": "plumbus", "namespace": "operators"},
            "status": {"installPlanRef": {"name": "install-abc", "namespace": "operators"}, "installedCSV": "plumbus.v2.0.0"}
        });
        assert_eq!(
            described(&projection_targets(&kind("Subscription"), &subscription)),
            vec!["ClusterServiceVersion operators/plumbus.v2.0.0", "InstallPlan operators/install-abc"]
        );
        let fresh = json!({"metadata": {"name": "plumbus", "namespace": "operators"}});
        assert!(projection_targets(&kind("Subscription"), &fresh).is_empty());
    }

    #[test]
    fn an_install_plan_projects_onto_the_resources_of_its_steps() {
        let plan = json!({
            "metadata": {"name": "install-abc", "namespace": "operators"},
            "spec": {"clusterServiceVersionNames": ["plumbus.v2.0.0"]},
            "status": {"plan": [
                {"resource": {"kind": "CustomResourceDefinition", "name": "plumbai.how.theydoit.com"}},
                {"resource": {"kind": "ClusterServiceVersion", "name": "plumbus.v2.0.0"}},
                {"resource": {"kind": "ClusterRole", "name": "plumbus-cr"}},
                {"resource": {"kind": "RoleBinding", "name": "plumbus-rb"}},
                {"resource": {"kind": "PrometheusRule", "name": "unknown-kinds-are-skipped"}},
                {"resource": {"kind": "Secret", "name": "the-controller-writes-no-secret"}},
                {"resource": {"kind": "ServiceAccount", "name": "nor-any-account-outside-its-namespace"}},
            ]}
        });
        assert_eq!(
            described(&projection_targets(&kind("InstallPlan"), &plan)),
            vec![
                "CustomResourceDefinition -/plumbai.how.theydoit.com",
                "ClusterServiceVersion operators/plumbus.v2.0.0",
                "ClusterRole -/plumbus-cr",
                "RoleBinding operators/plumbus-rb",
            ]
        );
    }

    #[test]
    fn a_csv_projects_onto_deployments_owned_crds_and_apiservices() {
        let csv = json!({
            "metadata": {"name": "plumbus.v2.0.0", "namespace": "operators"},
            "spec": {
                "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "plumbus-controller"}]}},
                "customresourcedefinitions": {"owned": [{"name": "plumbai.how.theydoit.com"}], "required": [{"name": "grumbos.x"}]},
                "apiservicedefinitions": {"owned": [{"group": "metrics.example", "version": "v1", "kind": "Usage"}]}
            }
        });
        assert_eq!(
            described(&projection_targets(&kind("ClusterServiceVersion"), &csv)),
            vec![
                "CustomResourceDefinition -/plumbai.how.theydoit.com",
                "APIService -/v1.metrics.example",
                "Deployment operators/plumbus-controller",
            ]
        );
    }

    #[test]
    fn other_kinds_project_nothing() {
        let deployment = json!({"metadata": {"name": "d", "namespace": "n"}, "spec": {"install": {}}});
        assert!(projection_targets(&kind("Deployment"), &deployment).is_empty());
    }
}
