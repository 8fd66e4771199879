//! Printers of the API machinery kinds: RoleBinding and ClusterRoleBinding (role reference, wide subjects by kind),
//! the webhook configurations (how many webhooks), Lease (holder) and APIService (kube-aggregator's service and
//! availability columns). Role, ClusterRole and CustomResourceDefinition have no printer: kube-apiserver gives them
//! the default columns.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::rbac::v1 as rbac;
use serde_json::{json, Value};

use super::duration::age;
use super::format::{count, items, name, text};
use super::{age_column, column, doc, name_column, string, Printer};

pub(super) fn printer(group: &str, kind: &str) -> Option<Printer> {
    let (columns, cells): (fn() -> Vec<Value>, super::Cells) = match (group, kind) {
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            (|| binding_columns(doc::<rbac::RoleBinding>("roleRef")), binding)
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            (|| binding_columns(doc::<rbac::ClusterRoleBinding>("roleRef")), binding)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => (
            || vec![name_column(), column("Webhooks", "integer", 0, String::new()), age_column()],
            |o, now| vec![name(o), json!(count(&o["webhooks"])), json!(age(&o["metadata"]["creationTimestamp"], now))],
        ),
        ("coordination.k8s.io", "Lease") => (
            || vec![name_column(), string("Holder", 0, doc::<coordination::LeaseSpec>("holderIdentity")), age_column()],
            |o, now| {
                let holder = text(&o["spec"]["holderIdentity"]);
                vec![name(o), json!(holder), json!(age(&o["metadata"]["creationTimestamp"], now))]
            },
        ),
        ("apiregistration.k8s.io", "APIService") => (
            || {
                let blank = String::new;
                vec![name_column(), string("Service", 0, blank()), string("Available", 0, blank()), age_column()]
            },
            api_service,
        ),
        _ => return None,
    };
    Some(Printer { columns, cells })
}

fn binding_columns(role_ref: String) -> Vec<Value> {
    vec![
        name_column(),
        string("Role", 0, role_ref),
        age_column(),
        string("Users", 1, String::new()),
        string("Groups", 1, String::new()),
        string("ServiceAccounts", 1, String::new()),
    ]
}

/// The role as `Kind/name`; users, groups and service accounts (`namespace/name`, the namespace as written) each
/// joined with `, `.
fn binding(o: &Value, now: Timestamp) -> Vec<Value> {
    let role = &o["roleRef"];
    let subjects = items(&o["subjects"]);
    let of_kind = |kind: &str| -> String {
        let names = subjects.iter().filter(|s| text(&s["kind"]) == kind).map(|s| match kind {
            "ServiceAccount" => format!("{}/{}", text(&s["namespace"]), text(&s["name"])),
            _ => text(&s["name"]).to_owned(),
        });
        names.collect::<Vec<_>>().join(", ")
    };
    vec![
        name(o),
        json!(format!("{}/{}", text(&role["kind"]), text(&role["name"]))),
        json!(age(&o["metadata"]["creationTimestamp"], now)),
        json!(of_kind("User")),
        json!(of_kind("Group")),
        json!(of_kind("ServiceAccount")),
    ]
}

/// The service as `namespace/name` (`Local` without one); availability as the Available condition says, with its
/// reason when not true (`False (MissingEndpoints)`), `Unknown` without the condition.
fn api_service(o: &Value, now: Timestamp) -> Vec<Value> {
    let service = match &o["spec"]["service"] {
        Value::Object(_) => {
            format!("{}/{}", text(&o["spec"]["service"]["namespace"]), text(&o["spec"]["service"]["name"]))
        }
        _ => "Local".to_owned(),
    };
    let available = items(&o["status"]["conditions"]).iter().find(|c| text(&c["type"]) == "Available");
    let available = match available.map(|c| (text(&c["status"]), text(&c["reason"]))) {
        None => "Unknown".to_owned(),
        Some((status @ "True", _) | (status, "")) => status.to_owned(),
        Some((status, reason)) => format!("{status} ({reason})"),
    };
    vec![name(o), json!(service), json!(available), json!(age(&o["metadata"]["creationTimestamp"], now))]
}

#[cfg(test)]
mod tests {
    use super::super::printed;
    use serde_json::{json, Value};

    const NOW: &str = "2026-03-01T12:00:00Z";
    const RBAC: &str = "rbac.authorization.k8s.io";

    fn metadata() -> Value {
        json!({"name": "x", "creationTimestamp": "2026-02-28T12:00:00Z"})
    }

    #[test]
    fn bindings_show_the_role_and_wide_subjects() {
        let binding = json!({"metadata": metadata(), "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "team"},
                         {"kind": "ServiceAccount", "name": "ci", "namespace": "build"}, {"kind": "User", "name": "bob"},
                         {"kind": "ServiceAccount", "name": "bot"}]});
        let (columns, cells) = printed(RBAC, "RoleBinding", &binding, NOW);
        let columns: Vec<(&str, u64)> = columns.iter().map(|(n, _, p)| (n.as_str(), *p)).collect();
        assert_eq!(
            columns,
            [("Name", 0), ("Role", 0), ("Age", 0), ("Users", 1), ("Groups", 1), ("ServiceAccounts", 1)]
        );
        assert_eq!(
            cells,
            [
                json!("x"),
                json!("ClusterRole/view"),
                json!("24h"),
                json!("alice, bob"),
                json!("team"),
                json!("build/ci, /bot")
            ]
        );
        let role = json!({"metadata": metadata(), "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "reader"}});
        assert_eq!(
            printed(RBAC, "RoleBinding", &role, NOW).1[1..],
            [json!("Role/reader"), json!("24h"), json!(""), json!(""), json!("")]
        );
        let cluster = json!({"metadata": metadata(), "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "Group", "name": "system:masters"}]});
        let (columns, cells) = printed(RBAC, "ClusterRoleBinding", &cluster, NOW);
        assert_eq!(columns.len(), 6);
        assert_eq!(
            cells[1..],
            [json!("ClusterRole/cluster-admin"), json!("24h"), json!(""), json!("system:masters"), json!("")]
        );
    }

    #[test]
    fn roles_and_definitions_get_the_default_columns() {
        for (group, kind) in
            [(RBAC, "Role"), (RBAC, "ClusterRole"), ("apiextensions.k8s.io", "CustomResourceDefinition")]
        {
            let (columns, cells) = printed(group, kind, &json!({"metadata": metadata()}), NOW);
            assert_eq!(columns[1], ("Created At".to_owned(), "date".to_owned(), 0), "{kind}");
            assert_eq!(cells, [json!("x"), json!("2026-02-28T12:00:00Z")], "{kind}");
        }
    }

    #[test]
    fn webhooks_leases_and_api_services() {
        let webhooks =
            json!({"metadata": metadata(), "webhooks": [{"name": "a.example.com"}, {"name": "b.example.com"}]});
        for kind in ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"] {
            let (columns, cells) = printed("admissionregistration.k8s.io", kind, &webhooks, NOW);
            assert_eq!(columns[1], ("Webhooks".to_owned(), "integer".to_owned(), 0));
            assert_eq!(cells, [json!("x"), json!(2), json!("24h")]);
        }
        let lease = json!({"metadata": metadata(), "spec": {"holderIdentity": "controller-1_3f2a", "leaseDurationSeconds": 15}});
        assert_eq!(
            printed("coordination.k8s.io", "Lease", &lease, NOW).1,
            [json!("x"), json!("controller-1_3f2a"), json!("24h")]
        );
        assert_eq!(printed("coordination.k8s.io", "Lease", &json!({"metadata": metadata()}), NOW).1[1], json!(""));

        let service = |status: Value| {
            let object = json!({"metadata": metadata(), "spec": {"service": {"namespace": "metrics", "name": "api"}}, "status": status});
            printed("apiregistration.k8s.io", "APIService", &object, NOW).1
        };
        assert_eq!(service(json!({})), [json!("x"), json!("metrics/api"), json!("Unknown"), json!("24h")]);
        let condition = |status: &str, reason: &str| json!({"conditions": [{"type": "Available", "status": status, "reason": reason}]});
        assert_eq!(service(condition("True", "Passed"))[2], json!("True"));
        assert_eq!(service(condition("False", "MissingEndpoints"))[2], json!("False (MissingEndpoints)"));
        assert_eq!(service(condition("False", ""))[2], json!("False"));
        let local = json!({"metadata": metadata(), "spec": {"group": "apps", "version": "v1"},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(
            printed("apiregistration.k8s.io", "APIService", &local, NOW).1[1..3],
            [json!("Local"), json!("True")]
        );
    }
}
