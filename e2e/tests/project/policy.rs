//! Cluster-admin policy end to end (docs/policy.md), with the real kubectl: a ceiling and a forbidden binding make
//! an Install unapprovable even by cluster-admin (the column, the refusal, `olmv2 approve`, the audit log); a user
//! allowed only one registry path cannot install anything else, by Install or Operator; an Operator's update over a
//! tightened ceiling waits while the old version runs, and goes through once the policy is relaxed; a malformed
//! policy is refused at `kubectl apply`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use olmv2::api::v2alpha1::{Approval, Install, InstallState, OperatorState};

use crate::attacks::{config_map, escalation, may, never_written, raw_install};
use crate::operator::{
    has_condition, push_catalog, serve_alpha, serve_patch_release, state, wait_operator, OPERATOR_YAML,
};
use crate::operator_upgrades::wait_version;
use crate::support::emulator::kubectl::text;
use crate::support::harness::Harness;

async fn start(name: &str) -> Harness {
    Harness::start("policy", name, &["operators", "catalogs"], Duration::from_secs(1)).await
}

fn installs(harness: &Harness) -> Api<Install> {
    Api::all(harness.admin.clone())
}

async fn wait_install(harness: &Harness, name: &str, what: &str, done: impl Fn(&Install) -> bool) -> Install {
    harness.wait_for(&installs(harness), name, what, done).await
}

fn install_state(install: &Install) -> Option<InstallState> {
    install.status.as_ref()?.state
}

fn condition_reason(install: &Install, type_: &str) -> Option<String> {
    let status = install.status.as_ref()?;
    status.conditions.iter().find(|c| c.type_ == type_).map(|c| format!("{}/{}", c.status, c.reason))
}

fn admin_apply(harness: &Harness, manifest: &str) {
    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(manifest));
    assert!(applied.status.success(), "{}", text(&applied));
}

/// A ceiling for operators that manage ConfigMaps and may create bindings (whose roles must fit it too), and a
/// forbid rule for any binding to cluster-admin.
const NO_CLUSTER_ADMIN: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: operator-ceiling
rules:
- apiGroups: [\"\"]
  resources: [\"configmaps\"]
  verbs: [\"*\"]
- apiGroups: [\"rbac.authorization.k8s.io\"]
  resources: [\"clusterrolebindings\", \"rolebindings\"]
  verbs: [\"get\", \"create\", \"update\", \"patch\", \"delete\"]
---
apiVersion: operators.coreos.com/v2alpha1
kind: InstallPolicy
metadata:
  name: no-cluster-admin
spec:
  ceiling:
    clusterRoles: [operator-ceiling]
  forbid:
  - kinds: [ClusterRoleBinding, RoleBinding]
    roleRefs: [cluster-admin]
  - namespaces: [kube-system]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ceiling_forbidding_bindings_to_cluster_admin_makes_an_install_unapprovable_even_by_cluster_admin() {
    let harness = start("ceiling").await;
    admin_apply(&harness, NO_CLUSTER_ADMIN);
    admin_apply(&harness, &raw_install("grab", &escalation("mallory"), "operators"));
    let over =
        wait_install(&harness, "grab", "over the policy", |i| install_state(i) == Some(InstallState::ExceedsPolicy))
            .await;
    assert_eq!(condition_reason(&over, "ExceedsPolicy").as_deref(), Some("True/ContentExceedsPolicy"));
    let violations: Vec<String> =
        over.status.as_ref().unwrap().policy.as_ref().unwrap().violations.iter().map(|v| v.message.clone()).collect();
    assert!(violations.iter().any(|v| v.ends_with("cluster-wide is over the ceiling")), "{violations:?}");
    assert!(
        violations.contains(
            &"ClusterRoleBinding mallory-is-admin (binds ClusterRole cluster-admin) is forbidden (forbid[0])"
                .to_owned()
        ),
        "{violations:?}"
    );

    // `kubectl get installs` tells the story; cluster-admin's approval is refused, and says why.
    let listed = harness.wait_kubectl(&["get", "installs"], "ExceedsPolicy").await;
    let header = listed.lines().next().unwrap();
    assert!(header.contains("POLICY"), "{listed}");
    let row = listed.lines().find(|line| line.starts_with("grab ")).unwrap();
    assert!(row.contains("ExceedsPolicy") && row.contains("Exceeds "), "{listed}");
    let approve = ["patch", "install", "grab", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#];
    let refused = harness.admin_kubectl(&approve, None);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("Install grab exceeds an InstallPolicy and no approval can let it through, whoever gives it: InstallPolicy no-cluster-admin:"),
        "{}",
        text(&refused)
    );
    let shown = crate::migration::olmv2(&harness, &["approve", "grab", "--yes"]);
    assert!(!shown.status.success(), "{}", crate::migration::text(&shown));
    let shown = crate::migration::text(&shown);
    assert!(
        shown.contains("POLICY") && shown.contains("no-cluster-admin  ClusterRoleBinding mallory-is-admin"),
        "{shown}"
    );
    assert!(shown.contains("no approval can let it through"), "{shown}");

    // Content mapped into kube-system is refused the same way.
    admin_apply(&harness, &raw_install("settings", &config_map("settings", "x"), "kube-system"));
    let mapped = wait_install(&harness, "settings", "over the policy", |i| {
        install_state(i) == Some(InstallState::ExceedsPolicy)
    })
    .await;
    let messages: Vec<String> =
        mapped.status.unwrap().policy.unwrap().violations.into_iter().map(|v| v.message).collect();
    assert!(messages.contains(&"ConfigMap kube-system/settings is forbidden (forbid[1])".to_owned()), "{messages:?}");

    // Without the policy, the ordinary gate decides again: pending, for a person holding the rules.
    assert!(harness.admin_kubectl(&["delete", "installpolicy", "no-cluster-admin"], None).status.success());
    let pending =
        wait_install(&harness, "grab", "pending again", |i| install_state(i) == Some(InstallState::PendingApproval))
            .await;
    assert_eq!(condition_reason(&pending, "ExceedsPolicy").as_deref(), Some("False/NoPolicy"));
    assert!(pending.status.unwrap().pending.unwrap().count > 0);

    // A policy written while an approval comes in: the webhook refuses it if the status says so already; if not, the
    // approval is admitted and the gate, measuring before it grants, voids it. Either way nothing is written.
    admin_apply(&harness, NO_CLUSTER_ADMIN);
    let raced = harness.admin_kubectl(&approve, None);
    assert!(
        raced.status.success() || text(&raced).contains("exceeds an InstallPolicy and no approval can let it through"),
        "{}",
        text(&raced)
    );
    let voided = wait_install(&harness, "grab", "over the policy, approval void", |i| {
        install_state(i) == Some(InstallState::ExceedsPolicy) && i.spec.approval == Approval::Unapproved
    })
    .await;
    assert!(olmv2::policy::exceeds(voided.status.unwrap().policy.as_ref()));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    never_written(&harness, "clusterrolebindings", "mallory-is-admin");
    never_written(&harness, "configmaps", "settings");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_user_allowed_only_approved_paths_cannot_install_another_image() {
    let harness = start("sources").await;
    let approved = harness.push_bundle("plumbus/2.0.0-alpha", "approved/plumbus-bundle", "v2.0.0-alpha").await;
    let other = harness.push_bundle("plumbus/2.0.0-alpha", "other/plumbus-bundle", "v2.0.0-alpha").await;
    let (_, digest) = harness.images().resolve(&approved).await.unwrap();
    let pinned = format!("{}/approved/plumbus-bundle@{digest}", harness.registry.host);
    let (_, other_digest) = harness.images().resolve(&other).await.unwrap();
    let other_pinned = format!("{}/other/plumbus-bundle@{other_digest}", harness.registry.host);
    let host = &harness.registry.host;
    admin_apply(
        &harness,
        &format!(
            "apiVersion: operators.coreos.com/v2alpha1
kind: InstallPolicy
metadata:
  name: team-a-sources
spec:
  sources:
  - subjects: [{{kind: Group, name: team-a}}]
    images: [{{repository: \"{host}/approved/*\", digests: Required}}]
    packages: [plumbus]
    catalogs: [{{name: community, namespace: catalogs}}]
"
        ),
    );
    may(&harness, "eve", "installs", &["create", "get", "list", "watch", "update", "patch"]).await;
    may(&harness, "eve", "operators", &["create", "get", "list", "watch", "update", "patch"]).await;
    let eve = harness.plane.user_kubeconfig("eve", &["team-a"]);
    let install = |name: &str, image: &str| {
        format!(
            "apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata:\n  name: {name}\nspec:\n  namespaces:\n  - from: default\n    to: operators\n  content:\n  - type: ManifestImage\n    manifestImage: {image}\n"
        )
    };
    let allowed_text =
        format!("InstallPolicy team-a-sources allows them only images {host}/approved/* pinned by digest");

    // Another repository, a tag where digests are required, Raw manifests: refused, each saying what is allowed.
    for (name, manifest, what) in [
        ("other", install("other", &other_pinned), format!("image {other_pinned}")),
        ("tagged", install("tagged", &approved), format!("image {approved}")),
        ("raw", raw_install("raw", &config_map("settings", "x"), "operators"), "Raw manifests".to_owned()),
    ] {
        let refused = harness.kubectl(&eve, &["apply", "-f", "-"], Some(&manifest));
        assert!(!refused.status.success(), "{name} was created");
        let message = text(&refused);
        assert!(message.contains(&format!("user \"eve\" may not install {what}: {allowed_text}")), "{message}");
        assert!(installs(&harness).get_opt(name).await.unwrap().is_none());
    }
    // What the policy allows goes on to the approval gate as ever.
    let created = harness.kubectl(&eve, &["apply", "-f", "-"], Some(&install("plumbus", &pinned)));
    assert!(created.status.success(), "{}", text(&created));
    wait_install(&harness, "plumbus", "pending approval", |i| install_state(i) == Some(InstallState::PendingApproval))
        .await;
    // Moving it elsewhere later is refused too.
    let moved = serde_json::json!({"spec": {"content": [{"type": "ManifestImage", "manifestImage": other_pinned}]}});
    let patched =
        harness.kubectl(&eve, &["patch", "install", "plumbus", "--type=merge", "-p", &moved.to_string()], None);
    assert!(!patched.status.success() && text(&patched).contains("may not install image"), "{}", text(&patched));
    // A user no source rule names is not limited by it.
    let bob = may(&harness, "bob", "installs", &["create", "get", "list"]).await;
    let created = harness.kubectl(&bob, &["apply", "-f", "-"], Some(&install("bobs", &other_pinned)));
    assert!(created.status.success(), "{}", text(&created));

    // Operators: an image elsewhere, a package not listed.
    let image_operator = format!(
        "apiVersion: operators.coreos.com/v2alpha1\nkind: Operator\nmetadata:\n  name: elsewhere\nspec:\n  updates:\n    type: ManifestImage\n    manifestImage: {other_pinned}\n"
    );
    let refused = harness.kubectl(&eve, &["apply", "-f", "-"], Some(&image_operator));
    assert!(text(&refused).contains(&format!("may not install image {other_pinned}")), "{}", text(&refused));
    // One she may create, then point elsewhere: refused on update too.
    let allowed_operator = image_operator.replace(&other_pinned, &pinned);
    let created = harness.kubectl(&eve, &["apply", "-f", "-"], Some(&allowed_operator));
    assert!(created.status.success(), "{}", text(&created));
    let repointed = serde_json::json!({"spec": {"updates": {"type": "ManifestImage", "manifestImage": other_pinned}}});
    let patched =
        harness.kubectl(&eve, &["patch", "operator", "elsewhere", "--type=merge", "-p", &repointed.to_string()], None);
    assert!(
        !patched.status.success() && text(&patched).contains(&format!("may not install image {other_pinned}")),
        "{}",
        text(&patched)
    );
    let grumbo = OPERATOR_YAML.replace("package: plumbus", "package: grumbo").replace("name: plumbus", "name: grumbo");
    let refused = harness.kubectl(&eve, &["apply", "-f", "-"], Some(&grumbo));
    assert!(
        text(&refused).contains(
            "user \"eve\" may not install package grumbo from CatalogSource catalogs/community: InstallPolicy \
             team-a-sources allows them only images"
        ),
        "{}",
        text(&refused)
    );
    // plumbus is allowed by the policy; the CatalogSource's `install` verb is still asked for (eve lacks it).
    let refused = harness.kubectl(&eve, &["apply", "-f", "-"], Some(OPERATOR_YAML));
    assert!(!refused.status.success());
    assert!(!text(&refused).contains("InstallPolicy"), "{}", text(&refused));
    assert!(text(&refused).contains("CatalogSource"), "{}", text(&refused));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_update_over_a_tightened_ceiling_waits_and_relaxing_lets_it_through() {
    let harness = start("update").await;
    let alpha = serve_alpha(&harness).await;
    admin_apply(&harness, OPERATOR_YAML);
    wait_operator(&harness, "plumbus", "pending approval", |o| state(o) == Some(OperatorState::PendingApproval)).await;
    let approve = ["patch", "install", "plumbus", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#];
    assert!(harness.admin_kubectl(&approve, None).status.success());
    wait_version(&harness, "2.0.0-alpha").await;
    // The bundle was downloaded once, then found unpacked by digest on the next passes (olmv2_bundle_pulls_total).
    let metrics = harness.metrics().expect("controllers run");
    let pulls = |result| metrics.bundle_pulls.get_or_create(&olmv2::metrics::PullLabels { result }).get();
    assert!(pulls("pulled") >= 1);
    for _ in 0..100 {
        if pulls("cached") >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(pulls("cached") >= 1, "a later pass found the bundle in the cache");
    let deployment = Api::<Deployment>::namespaced(harness.admin.clone(), "operators");
    let running = deployment.get("plumbus-operator").await.unwrap().metadata.uid;

    // The admin tightens: a ceiling that allows reading ConfigMaps only. What runs keeps running, reported.
    admin_apply(
        &harness,
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: read-configmaps
rules:
- apiGroups: [\"\"]
  resources: [\"configmaps\"]
  verbs: [\"get\"]
---
apiVersion: operators.coreos.com/v2alpha1
kind: InstallPolicy
metadata:
  name: tight
spec:
  ceiling:
    clusterRoles: [read-configmaps]
",
    );
    let reported = wait_install(&harness, "plumbus", "reported over the policy", |i| {
        condition_reason(i, "ExceedsPolicy").as_deref() == Some("True/InstalledContentExceedsPolicy")
    })
    .await;
    assert_eq!(install_state(&reported), Some(InstallState::Installed));
    harness.wait_kubectl(&["get", "installs", "plumbus"], "Exceeds").await;

    // The next version waits, with the condition on the Install and the Operator; the old one runs on.
    serve_patch_release(&harness, &alpha).await;
    let waiting = wait_install(&harness, "plumbus", "the update over the policy", |i| {
        install_state(i) == Some(InstallState::ExceedsPolicy)
    })
    .await;
    assert_eq!(condition_reason(&waiting, "Installed").as_deref(), Some("False/ExceedsPolicy"));
    let operator = wait_operator(&harness, "plumbus", "over the policy", |o| {
        state(o) == Some(OperatorState::ExceedsPolicy)
            && has_condition(o, "InstallExceedsPolicy", "True", "ContentExceedsPolicy")
    })
    .await;
    let message = &crate::operator::condition(&operator, "InstallExceedsPolicy").unwrap().message;
    assert!(message.starts_with("Install plumbus: the content exceeds a policy"), "{message}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    never_written(&harness, "clusterserviceversions", "plumbus.v2.0.1");
    assert_eq!(deployment.get("plumbus-operator").await.unwrap().metadata.uid, running, "still running");

    // Relaxed: the update goes through (its per-object verbs follow from the create approved before).
    let relax = r#"{"spec":{"ceiling":{"clusterRoles":["cluster-admin"]}}}"#;
    assert!(harness
        .admin_kubectl(&["patch", "installpolicy", "tight", "--type=merge", "-p", relax], None)
        .status
        .success());
    wait_version(&harness, "2.0.1").await;
    let done = installs(&harness).get("plumbus").await.unwrap();
    assert_eq!(condition_reason(&done, "ExceedsPolicy").as_deref(), Some("False/WithinPolicy"));
}

/// Plumbus 2.0.0-alpha copied as `version` (replacing `replaces`), its Service swapped for a ConfigMap when
/// `config_map`; answers the image.
async fn push_copy(harness: &Harness, version: &str, replaces: &str, config_map: bool) -> String {
    let text = |file: &str, text: &str| {
        if file.contains("clusterserviceversion") {
            text.replace("name: plumbus.v2.0.0-alpha", &format!("name: plumbus.v{version}"))
                .replace("version: 2.0.0-alpha", &format!("version: {version}\n  replaces: plumbus.v{replaces}"))
        } else if file.contains("service") && config_map {
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plumbus-settings\ndata:\n  mode: fast\n".to_owned()
        } else {
            text.to_owned()
        }
    };
    let reference = format!("plumbus-bundle:{version}");
    harness.push_rewritten_bundle("plumbus/2.0.0-alpha", &reference, text, str::to_owned).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_moves_past_a_bundle_over_a_policy_to_a_newer_one_that_fits() {
    let harness = start("newer").await;
    let alpha = serve_alpha(&harness).await;
    admin_apply(
        &harness,
        "apiVersion: operators.coreos.com/v2alpha1\nkind: InstallPolicy\nmetadata:\n  name: no-config-maps\nspec:\n  forbid:\n  - kinds: [ConfigMap]\n",
    );
    admin_apply(&harness, OPERATOR_YAML);
    wait_operator(&harness, "plumbus", "pending approval", |o| state(o) == Some(OperatorState::PendingApproval)).await;
    let approve = ["patch", "install", "plumbus", "--type=merge", "-p", r#"{"spec":{"approval":"Approved"}}"#];
    assert!(harness.admin_kubectl(&approve, None).status.success());
    wait_version(&harness, "2.0.0-alpha").await;

    // 2.0.1 brings a ConfigMap, which the policy forbids: it waits, 2.0.0-alpha runs on.
    let forbidden = push_copy(&harness, "2.0.1", "2.0.0-alpha", true).await;
    let stable = |entries: serde_json::Value| [("stable", entries)];
    push_catalog(
        &harness,
        &stable(serde_json::json!([{"name": "plumbus.v2.0.0-alpha"},
            {"name": "plumbus.v2.0.1", "replaces": "plumbus.v2.0.0-alpha"}])),
        &[("plumbus.v2.0.0-alpha", "2.0.0-alpha", &alpha), ("plumbus.v2.0.1", "2.0.1", &forbidden)],
    )
    .await;
    let waiting = wait_install(&harness, "plumbus", "2.0.1 over the policy", |i| {
        install_state(i) == Some(InstallState::ExceedsPolicy)
    })
    .await;
    let violations = waiting.status.unwrap().policy.unwrap().violations;
    assert_eq!(violations[0].message, "ConfigMap operators/plumbus-settings is forbidden (forbid[0])");

    // 2.0.2, without it, replaces 2.0.1 in the channel: the Operator moves on to it rather than hold 2.0.1.
    let fits = push_copy(&harness, "2.0.2", "2.0.1", false).await;
    push_catalog(
        &harness,
        &stable(serde_json::json!([{"name": "plumbus.v2.0.0-alpha"},
            {"name": "plumbus.v2.0.1", "replaces": "plumbus.v2.0.0-alpha"},
            {"name": "plumbus.v2.0.2", "replaces": "plumbus.v2.0.1"}])),
        &[
            ("plumbus.v2.0.0-alpha", "2.0.0-alpha", &alpha),
            ("plumbus.v2.0.1", "2.0.1", &forbidden),
            ("plumbus.v2.0.2", "2.0.2", &fits),
        ],
    )
    .await;
    wait_version(&harness, "2.0.2").await;
    never_written(&harness, "configmaps", "plumbus-settings");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_malformed_policy_is_refused_at_kubectl_apply() {
    let harness = start("malformed").await;
    let policy = |spec: &str| {
        format!("apiVersion: operators.coreos.com/v2alpha1\nkind: InstallPolicy\nmetadata:\n  name: bad\nspec:\n{spec}")
    };
    for (spec, expected) in [
        (
            "  sources:\n  - subjects: [{kind: Group, name: team-a}]\n    images: [{repository: \"https://registry.example/approved/*\"}]\n",
            "spec.sources[0].images[0].repository: Invalid value: \"https://registry.example/approved/*\"",
        ),
        (
            "  sources:\n  - subjects: [{kind: Team, name: a}]\n",
            "spec.sources[0].subjects[0].kind: Unsupported value: \"Team\"",
        ),
        ("  forbid:\n  - {}\n", "spec.forbid[0]"),
        ("  ceiling:\n    clusterRoles: []\n", "spec.ceiling.clusterRoles"),
    ] {
        let refused = harness.admin_kubectl(&["apply", "-f", "-"], Some(&policy(spec)));
        assert!(!refused.status.success(), "accepted: {spec}");
        let message = text(&refused);
        assert!(message.contains("The InstallPolicy \"bad\" is invalid"), "{message}");
        assert!(message.contains(expected), "{spec}: {message}");
    }
    let none = harness.admin_kubectl(&["get", "installpolicies"], None);
    assert!(text(&none).contains("No resources found"), "{}", text(&none));
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/install-policy.yaml");
    let applied = harness.admin_kubectl(&["apply", "-f", example.to_str().unwrap()], None);
    assert!(applied.status.success(), "the shipped example applies: {}", text(&applied));
}
