//! Attacks through role aggregation: aggregated ClusterRoles that select each other, so that what a binding grants
//! depends on following selectors round a cycle, and on rules a cycle keeps after their source is gone.

use super::*;
use k8s_openapi::api::rbac::v1::ClusterRole;

/// Rings of content: each of two aggregated ClusterRoles selects the other, one also a plain role reading a Secret,
/// and a ClusterRoleBinding gives the first to `ring-reader`. The aggregation controller fills both with the
/// Secret's rule, so the binding grants it. Several rings, since a resolution that lost a cycle's rules lost them
/// or not depending on which role of the ring it met first (hash order): eight rings make missing one near certain.
const RINGS: usize = 8;

fn ring(i: usize) -> String {
    format!("{}---\n{}", ring_roles(i), ring_binding(i))
}

/// Ring `i`'s two aggregated ClusterRoles and the plain one reading Secret `ring-i`.
fn ring_roles(i: usize) -> String {
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
"
    )
}

/// A ClusterRoleBinding giving ring `i`'s first role to `ring-reader`.
fn ring_binding(i: usize) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1
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

/// Waits until `ring-reader` may get Secret `secret`: the authorizer reads roles as an informer would, and may answer
/// from a moment before.
async fn gets(harness: &Harness, secret: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while can_i(harness, secret) != "yes" {
        assert!(std::time::Instant::now() < deadline, "ring-reader never got {secret}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
        gets(&harness, &format!("ring-{i}")).await;
    }
    assert_eq!(can_i(&harness, "elsewhere"), "no");
    controller_healthy(&harness, "after-rings").await;
}

/// The admin's rings, and content bringing only the bindings: a binding is made by whoever holds the rules of its
/// role, so the Install's account must be given every rule the role will grant, and a person must approve them. In
/// half of the rings the admin then deletes the plain Secret-reading role: the cycle keeps its rule for good, each
/// role copying it back from the other, so the binding grants a rule no plain role holds any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_binding_to_a_cycle_of_the_cluster_requires_every_rule_the_cycle_holds() {
    let harness = start("attack-ring-bound").await;
    let roles: Vec<String> = (0..RINGS).map(ring_roles).collect();
    let created = harness.admin_kubectl(&["apply", "-f", "-"], Some(&roles.join("---\n")));
    assert!(created.status.success(), "{}", text(&created));
    let cluster_roles = Api::<ClusterRole>::all(harness.admin.clone());
    let holds_secret = |role: &ClusterRole, i: usize| {
        role.rules.iter().flatten().any(|rule| rule.resource_names.as_deref() == Some(&[format!("ring-{i}")][..]))
    };
    for i in 0..RINGS {
        harness
            .wait_for(&cluster_roles, &format!("ring-{i}-a"), "filled round the ring", |role| holds_secret(role, i))
            .await;
    }
    let stale = RINGS / 2..RINGS;
    for i in stale.clone() {
        cluster_roles.delete(&format!("ring-{i}-secret"), &DeleteParams::default()).await.unwrap();
    }
    for i in stale {
        // The aggregation controller runs on the deletion, and each role of the ring keeps the rule.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(holds_secret(&cluster_roles.get(&format!("ring-{i}-a")).await.unwrap(), i), "ring {i} kept its rule");
    }

    let bindings: Vec<String> = (0..RINGS).map(ring_binding).collect();
    apply(&harness, &harness.plane.kubeconfig(), &raw_install("ring-bindings", &bindings.join("---\n"), "operators"));
    let waiting = wait_state(&harness, "ring-bindings", InstallState::PendingApproval).await;
    let pending = waiting.status.unwrap().pending.unwrap();
    for i in 0..RINGS {
        assert!(
            pending.permissions.iter().any(|permission| permission.resources == ["secrets"]
                && permission.resource_names.contains(&format!("ring-{i}"))
                && permission.verbs.contains(&"get".to_owned())),
            "binding ring-{i}-a requires get secrets/ring-{i}: {:?}",
            pending.permissions
        );
        never_written(&harness, "clusterrolebindings", &format!("ring-{i}-reader"));
    }

    let approved =
        harness.admin_kubectl(&["patch", "install", "ring-bindings", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(&harness, "ring-bindings", InstallState::Installed).await;
    for i in 0..RINGS {
        gets(&harness, &format!("ring-{i}")).await;
    }
    assert_eq!(can_i(&harness, "elsewhere"), "no");
    controller_healthy(&harness, "after-ring-bindings").await;
}
