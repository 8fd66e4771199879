//! Attacks through role aggregation: content whose aggregated ClusterRoles select each other, so that what a binding
//! grants depends on following selectors round a cycle.

use super::*;
use k8s_openapi::api::rbac::v1::ClusterRole;

/// Rings of content: each of two aggregated ClusterRoles selects the other, one also a plain role reading a Secret,
/// and a ClusterRoleBinding gives the first to `ring-reader`. The aggregation controller fills both with the
/// Secret's rule, so the binding grants it. Several rings, since a resolution that lost a cycle's rules lost them
/// or not depending on which role of the ring it met first (hash order): eight rings make missing one near certain.
const RINGS: usize = 8;

fn ring(i: usize) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ring-{i}-a
  labels: {{example.com/ring-{i}: a}}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {{example.com/ring-{i}: b}}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ring-{i}-b
  labels: {{example.com/ring-{i}: b}}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {{example.com/ring-{i}: a}}
  - matchLabels: {{example.com/ring-{i}-secret: \"true\"}}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: ring-{i}-secret
  labels: {{example.com/ring-{i}-secret: \"true\"}}
rules:
- apiGroups: [\"\"]
  resources: [secrets]
  resourceNames: [ring-{i}]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ring-{i}-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: ring-{i}-a
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: ring-reader
"
    )
}

fn can_i(harness: &Harness, secret: &str) -> String {
    let secret = format!("secrets/{secret}");
    let answer = harness.admin_kubectl(&["auth", "can-i", "get", &secret, "--as", "ring-reader"], None);
    String::from_utf8_lossy(&answer.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_approver_sees_every_rule_a_binding_gets_through_an_aggregation_cycle() {
    let harness = start("attack-ring").await;
    let content: Vec<String> = (0..RINGS).map(ring).collect();
    apply(&harness, &harness.plane.kubeconfig(), &raw_install("rings", &content.join("---\n"), "operators"));
    let waiting = wait_state(&harness, "rings", InstallState::PendingApproval).await;
    let pending = waiting.status.unwrap().pending.unwrap();

    // Each binding is shown granting the Secret's rule, which reaches its role only round the cycle.
    for i in 0..RINGS {
        let name = format!("ring-{i}-reader");
        let binding = pending.bindings.iter().find(|b| b.name == name).unwrap_or_else(|| panic!("{name} shown"));
        assert!(binding.role_found, "{binding:?}");
        assert!(
            binding.rules.iter().any(|rule| rule.resources == ["secrets"]
                && rule.resource_names == [format!("ring-{i}")]
                && rule.verbs == ["get"]),
            "{name} is shown granting what ring-{i}-a will hold: {:?}",
            binding.rules
        );
    }
    for i in 0..RINGS {
        never_written(&harness, "clusterrolebindings", &format!("ring-{i}-reader"));
    }

    // Approved, it grants exactly what was shown: the aggregation controller fills the ring, no more.
    let approved =
        harness.admin_kubectl(&["patch", "install", "rings", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(&harness, "rings", InstallState::Installed).await;
    let roles = Api::<ClusterRole>::all(harness.admin.clone());
    for i in 0..RINGS {
        harness
            .wait_for(&roles, &format!("ring-{i}-a"), "filled round the ring", |role| {
                role.rules.as_ref().is_some_and(|rules| !rules.is_empty())
            })
            .await;
        // The authorizer reads roles as an informer would: it may answer from a moment before.
        let secret = format!("ring-{i}");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while can_i(&harness, &secret) != "yes" {
            assert!(std::time::Instant::now() < deadline, "ring-reader never got {secret}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert_eq!(can_i(&harness, "elsewhere"), "no");
    controller_healthy(&harness, "after-rings").await;
}
