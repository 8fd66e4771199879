//! The gate again (the second round of attacks): an OperatorGroup account named by someone who could not run as it,
//! a CRD of content named after a built-in resource to pass a policy's ceiling, and a ceiling widened by a
//! ClusterRole an Install applied.

use super::*;
use k8s_openapi::api::rbac::v1::ClusterRole;
use olmv2::api::v1::ACCOUNT_NAMED_BY_ANNOTATION;

/// A Role in `namespace` with `rules`, bound to `user`.
async fn role_for(harness: &Harness, user: &str, namespace: &str, rules: Value) {
    for object in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": format!("{user}-role"), "namespace": namespace}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("{user}-role"), "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{user}-role")},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}]}),
    ] {
        harness.create(&object).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_groups_account_lends_nothing_when_whoever_named_it_could_not_run_as_it() {
    let harness = start("attack-og-named").await;
    // An admin's account, made for something else, bound to cluster-admin.
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "backup", "namespace": "lab"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "backup-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "backup", "namespace": "lab"}]}),
    ] {
        harness.create(&object).await;
    }
    // Mallory may write OperatorGroups and create Subscriptions in `lab` (OLM v0's proxy for using its group's
    // account) and create Installs; not create pods, not impersonate.
    let mallory = install_author(&harness, "mallory").await;
    role_for(
        &harness,
        "mallory",
        "lab",
        json!([{"apiGroups": ["operators.coreos.com"], "resources": ["operatorgroups", "subscriptions"],
                "verbs": ["create", "get", "list", "update", "patch"]}]),
    )
    .await;
    // The group she writes names the admin's account, and claims the admin named it.
    let claimed = json!({"username": "admin", "groups": ["system:masters"]}).to_string();
    let group = format!(
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata:\n  name: lab\n  namespace: lab\n  annotations:\n    {ACCOUNT_NAMED_BY_ANNOTATION}: '{claimed}'\nspec:\n  serviceAccountName: backup\n  targetNamespaces: [lab]\n"
    );
    apply(&harness, &mallory, &group);
    let written = harness.admin_kubectl(&["get", "operatorgroup", "lab", "-n", "lab", "-o", "json"], None);
    let written: Value = serde_json::from_str(&text(&written)).expect("json");
    let namer = written["metadata"]["annotations"][ACCOUNT_NAMED_BY_ANNOTATION].as_str().unwrap_or_default();
    assert!(namer.contains("\"username\":\"mallory\""), "the webhook records who named it: {namer}");

    apply(&harness, &mallory, &raw_install("grab", &escalation("mallory"), "lab"));
    let pending = wait_state(&harness, "grab", InstallState::PendingApproval).await;
    let status = pending.status.unwrap();
    let account = status.service_account_ref.unwrap();
    assert_eq!((account.namespace.as_str(), account.name.as_str()), ("lab", "backup"));
    assert!(status.pending.unwrap().count > 0, "backup's cluster-admin is not lent for mallory's naming it");
    // A later write keeping the account keeps the record, whatever it claims.
    let relabel = json!({"metadata": {"annotations": {ACCOUNT_NAMED_BY_ANNOTATION: claimed}, "labels": {"x": "y"}}});
    let patched = harness.kubectl(
        &mallory,
        &["patch", "operatorgroup", "lab", "-n", "lab", "--type", "merge", "-p", &relabel.to_string()],
        None,
    );
    assert!(patched.status.success(), "{}", text(&patched));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let still = installs(&harness).get("grab").await.unwrap();
    assert_eq!(still.status.and_then(|s| s.state), Some(InstallState::PendingApproval));
    never_written(&harness, "clusterrolebindings", "mallory-is-admin");
    not_bound(&harness, "mallory").await;
    installs(&harness).delete("grab", &DeleteParams::default()).await.unwrap();

    // Named by someone who may run as the account (the admin), it lends its rights as before: an Install of a
    // subscriber of `lab` applies with nothing pending.
    let deleted = harness.admin_kubectl(&["delete", "operatorgroup", "lab", "-n", "lab"], None);
    assert!(deleted.status.success(), "{}", text(&deleted));
    harness.admin_kubectl(&["apply", "-f", "-"], Some(&group));
    apply(&harness, &mallory, &raw_install("settings", &config_map("settings", "1"), "lab"));
    let installed = wait_state(&harness, "settings", InstallState::Installed).await;
    assert_eq!(installed.status.unwrap().pending.map(|p| p.count), Some(0));
    controller_healthy(&harness, "after-og-named").await;
}

/// A CRD named after the built-in ClusterRole API, and a ClusterRole granting `escalate` and `bind` on it.
const BUILTIN_CRD_AND_ESCALATE: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterroles.rbac.authorization.k8s.io
  annotations:
    api-approved.kubernetes.io: unapproved, an attack
spec:
  group: rbac.authorization.k8s.io
  scope: Cluster
  names: {kind: ClusterRole, plural: clusterroles, singular: clusterrole, listKind: ClusterRoleList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: role-escalator
rules:
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  verbs: [escalate, bind, create, update]
";

/// A ceiling for operators that bring ConfigMaps, CRDs and ClusterRoles, but never `escalate` or `bind`.
const CONFIG_MAP_CEILING: &str = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: narrow-ceiling
rules:
- apiGroups: [\"\"]
  resources: [configmaps]
  verbs: [\"*\"]
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [\"*\"]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [clusterroles]
  verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: operators.coreos.com/v2alpha1
kind: InstallPolicy
metadata:
  name: narrow
spec:
  ceiling:
    clusterRoles: [narrow-ceiling]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crd_named_after_a_built_in_resource_is_refused_and_never_widens_a_ceiling() {
    let harness = start("attack-builtin-crd").await;
    apply(&harness, &harness.plane.kubeconfig(), CONFIG_MAP_CEILING);
    let mallory = install_author(&harness, "mallory").await;
    apply(&harness, &mallory, &raw_install("escalator", BUILTIN_CRD_AND_ESCALATE, "operators"));
    let refused = wait(&harness, "escalator", "refused as naming a served API", |install| {
        install.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.reason == "CrdNamesServedApi"))
    })
    .await;
    let status = refused.status.unwrap();
    let message = status.conditions.iter().find(|c| c.reason == "CrdNamesServedApi").unwrap().message.clone();
    assert!(message.contains("clusterroles.rbac.authorization.k8s.io"), "{message}");
    assert!(status.granted.is_empty(), "nothing granted: {:?}", status.granted);
    // Even approved by someone holding everything, nothing is granted or applied.
    let approved =
        harness.admin_kubectl(&["patch", "install", "escalator", "--type", "merge", "-p", approve_patch()], None);
    let _ = approved;
    tokio::time::sleep(Duration::from_secs(3)).await;
    never_written(&harness, "customresourcedefinitions", "clusterroles.rbac.authorization.k8s.io");
    never_written(&harness, "clusterroles", "role-escalator");
    // Created by hand, such a CRD does not replace the built-in API: ClusterRoles are still served as before.
    let first_crd = BUILTIN_CRD_AND_ESCALATE.split("---").next().unwrap();
    apply(&harness, &harness.plane.kubeconfig(), first_crd);
    let roles = Api::<ClusterRole>::all(harness.admin.clone()).get("cluster-admin").await.unwrap();
    assert!(roles.rules.unwrap_or_default().iter().any(|r| r.verbs.contains(&"*".to_owned())));
    let listed = harness.admin_kubectl(&["get", "clusterrole", "cluster-admin", "-o", "name"], None);
    assert!(listed.status.success(), "{}", text(&listed));
    controller_healthy(&harness, "after-builtin-crd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_clusterrole_an_install_applied_never_widens_an_aggregated_ceiling() {
    let harness = start("attack-widen").await;
    // Approved before any policy existed: content bringing a ClusterRole labelled as the ceiling will select.
    let widening = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: reads-secrets\n  labels:\n    ceiling.example.com/operators: \"true\"\nrules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get, list, watch]\n";
    apply(&harness, &harness.plane.kubeconfig(), &raw_install("widen", widening, "operators"));
    wait_state(&harness, "widen", InstallState::PendingApproval).await;
    let approved =
        harness.admin_kubectl(&["patch", "install", "widen", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(&harness, "widen", InstallState::Installed).await;
    // The admin's ceiling: an aggregated role gathering what admins label, and ConfigMaps.
    let ceiling = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: aggregated-ceiling\naggregationRule:\n  clusterRoleSelectors:\n  - matchLabels:\n      ceiling.example.com/operators: \"true\"\nrules: []\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: config-maps\n  labels:\n    ceiling.example.com/operators: \"true\"\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [\"*\"]\n- apiGroups: [rbac.authorization.k8s.io]\n  resources: [roles]\n  verbs: [\"*\"]\n---\napiVersion: operators.coreos.com/v2alpha1\nkind: InstallPolicy\nmetadata:\n  name: aggregated\nspec:\n  ceiling:\n    clusterRoles: [aggregated-ceiling]\n";
    apply(&harness, &harness.plane.kubeconfig(), ceiling);
    // Kubernetes' aggregation controller has copied the Install's role's rules into the ceiling role.
    harness
        .wait_for(&Api::<ClusterRole>::all(harness.admin.clone()), "aggregated-ceiling", "aggregated", |role| {
            role.rules.iter().flatten().any(|rule| rule.resources.iter().flatten().any(|r| r == "secrets"))
        })
        .await;
    // Content reading Secrets is over the ceiling: the Install's role does not count in it.
    let reader = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: secret-reader\nrules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]\n";
    apply(&harness, &harness.plane.kubeconfig(), &raw_install("reader", reader, "operators"));
    let exceeds = wait_state(&harness, "reader", InstallState::ExceedsPolicy).await;
    let violations = serde_json::to_string(&exceeds.status.unwrap().policy).unwrap();
    assert!(violations.contains("secrets"), "{violations}");
    assert!(!violations.contains("\"roles\""), "applying the Role fits the admin's part: {violations}");
    never_written(&harness, "roles", "secret-reader");
    // Content within the admin's own part of the ceiling still passes it.
    apply(&harness, &harness.plane.kubeconfig(), &raw_install("fits", &config_map("fits", "1"), "operators"));
    wait_state(&harness, "fits", InstallState::PendingApproval).await;
    controller_healthy(&harness, "after-widen").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_install_that_cannot_succeed_is_tried_ever_less_often_and_says_why_in_an_event() {
    let harness = start("attack-hopeless").await;
    // Ten thousand entries: created, but too large for the webhook to review once it has a status beside it (an
    // update's review carries the object twice), so that every status write of the controller fails.
    let content: Vec<Value> =
        (0..10_000).map(|n| json!({"type": "Raw", "raw": config_map(&format!("setting-{n}"), "x")})).collect();
    let install: Install = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "hopeless"},
        "spec": {"namespaces": [{"from": "default", "to": "operators"}], "content": content},
    }))
    .unwrap();
    installs(&harness).create(&Default::default(), &install).await.expect("created");
    let failed_writes = || {
        harness
            .audit_records()
            .into_iter()
            .filter(|r| r.resource == "installs" && r.name == "hopeless" && r.subresource == "status")
            .filter(|r| r.user == CONTROLLER_USER && r.code >= 400)
            .count()
    };
    let first = tokio::time::Instant::now();
    while failed_writes() == 0 {
        assert!(first.elapsed() < Duration::from_secs(120), "the controller never tried to write the status");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(40)).await;
    // Retried every 2 s, that would be about twenty tries; backing off from 2 s (2, 4, 8, 16, 32): at most six.
    let tries = failed_writes();
    assert!((2..=6).contains(&tries), "{tries} failed status writes in 40 s");
    // Why it fails is an event on the Install, since its status cannot say it.
    let events = harness.admin_kubectl(
        &["get", "events", "-n", "default", "--field-selector", "involvedObject.name=hopeless", "-o", "json"],
        None,
    );
    let events: Value = serde_json::from_str(&text(&events)).expect("events");
    let warnings: Vec<&Value> = events["items"].as_array().unwrap().iter().filter(|e| e["type"] == "Warning").collect();
    assert!(
        warnings.iter().any(
            |e| e["reason"] == "StatusWriteFailed" && e["message"].as_str().is_some_and(|m| m.contains("hopeless"))
        ),
        "{warnings:#?}"
    );
    installs(&harness).delete("hopeless", &DeleteParams::default()).await.unwrap();
    controller_healthy(&harness, "after-hopeless").await;
}
