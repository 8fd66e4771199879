//! The Install controller and the approval webhook end to end, on the test control plane, with a real registry and
//! the real kubectl, acting as seed 004's users: the controller runs as `deploy/`'s ServiceAccount with `deploy/`'s
//! RBAC; the audit log proves who created what.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::process::Command;
use std::time::Duration;

use crate::support;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use olmv2::api::v2alpha1::{Approval, Install, InstallState, PermissionScope};
use olmv2_e2e::project;
use serde_json::{json, Value};
use support::emulator::kubectl::{run, text};
use support::harness::CONTROLLER_USER;
use support::installs::{approve_patch, install_editor, install_yaml, installs, push, start, wait, wait_state};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_admin_approves_and_the_content_is_created_as_the_service_account() {
    let harness = start("approve").await;
    let image = push(&harness, "plumbus/2.0.0-alpha", "v2.0.0-alpha").await;
    let manifest = harness.dir.join("install.yaml");
    std::fs::write(&manifest, install_yaml("plumbus", &image)).unwrap();
    let applied = harness.admin_kubectl(&["apply", "-f", manifest.to_str().unwrap()], None);
    assert!(applied.status.success(), "{}", text(&applied));

    let pending = wait_state(&harness, "plumbus", InstallState::PendingApproval).await;
    let status = pending.status.clone().unwrap();
    assert_eq!(pending.spec.approval, Approval::Unapproved);
    let account = status.service_account_ref.clone().expect("assigned");
    let uid = pending.metadata.uid.clone().unwrap();
    let account_name = olmv2::install::account::eponymous_name("plumbus", &uid);
    assert_eq!((account.namespace.as_str(), account.name.as_str()), ("olmv2-system", account_name.as_str()));
    let permissions = status.pending.clone().unwrap().permissions;
    assert!(
        permissions.iter().any(|p| p.scope == PermissionScope::Namespaced
            && p.namespaces == ["operators"]
            && p.resources == ["deployments"]
            && p.verbs.contains(&"create".to_owned())),
        "{permissions:#?}"
    );
    assert!(status.resolved[0].manifest_image.as_deref().unwrap().contains("@sha256:"), "{:?}", status.resolved);
    assert!(Api::<Deployment>::namespaced(harness.admin.clone(), "operators")
        .get_opt("plumbus-operator")
        .await
        .unwrap()
        .is_none());
    let table = harness.admin_kubectl(&["get", "installs"], None);
    assert!(text(&table).contains("Unapproved") && text(&table).contains("PendingApproval"), "{}", text(&table));

    // Someone who may edit Installs but holds none of the pending permissions is refused, with the rules named.
    let bob = install_editor(&harness, "bob").await;
    let refused =
        harness.kubectl(&bob, &["patch", "install", "plumbus", "--type", "merge", "-p", approve_patch()], None);
    assert!(!refused.status.success());
    let message = text(&refused);
    assert!(
        message.contains("denied the request") && message.contains("\"bob\" may not approve Install plumbus"),
        "{message}"
    );
    assert!(message.contains("deployments (apps)"), "{message}");
    // Nor may anyone but the controller rewrite the pending set the approval is judged against.
    let forged = harness.kubectl(
        &harness.plane.user_kubeconfig("mallory", &["system:masters"]),
        &[
            "patch",
            "install",
            "plumbus",
            "--subresource",
            "status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"pending":{"count":0,"permissions":[]}}}"#,
        ],
        None,
    );
    assert!(!forged.status.success(), "{}", text(&forged));
    assert!(text(&forged).contains("only the controller"), "{}", text(&forged));

    let approved =
        harness.admin_kubectl(&["patch", "install", "plumbus", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(&harness, "plumbus", InstallState::Applying).await;
    harness.roll_out("operators").await;
    let installed = wait_state(&harness, "plumbus", InstallState::Installed).await;
    let status = installed.status.unwrap();
    assert_eq!(status.pending.map(|p| p.count), Some(0));
    let condition = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_).cloned().unwrap();
    assert_eq!(condition("Installed").status, "True");
    assert_eq!(condition("Installed").observed_generation, installed.metadata.generation);
    let csv = harness.admin_kubectl(
        &["get", "csv", "-n", "operators", "plumbus.v2.0.0-alpha", "-o", "jsonpath={.status.phase}"],
        None,
    );
    assert_eq!(text(&csv), "Succeeded");
    // Each transition was recorded, and `kubectl describe` tells the story.
    let described = text(&harness.admin_kubectl(&["describe", "install", "plumbus"], None));
    let events = described.split("Events:").nth(1).unwrap_or_default().to_owned();
    for reason in
        ["UnsatisfiedPermissions", "PermissionsSatisfied", "ContentApplied", "DeploymentsRollingOut", "Complete"]
    {
        assert!(events.contains(reason), "no {reason} event in:\n{described}");
    }
    assert!(events.contains("olmv2-install-controller"), "{described}");

    // The audit log: every write of the content came from the ServiceAccount; the controller's own identity created
    // only the grants, the account itself, events and its webhook configuration.
    let sa_user = format!("system:serviceaccount:olmv2-system:{account_name}");
    let records = harness.audit_records();
    let written = |resource: &str, name: &str| {
        records.iter().filter(|r| r.resource == resource && r.name == name && r.wrote()).collect::<Vec<_>>()
    };
    for (resource, name) in [
        ("deployments", "plumbus-operator"),
        ("customresourcedefinitions", "plumbai.how.theydoit.com"),
        ("clusterserviceversions", "plumbus.v2.0.0-alpha"),
        ("serviceaccounts", "plumbus-operator"),
        ("services", "plumbus-operator-metrics"),
    ] {
        let writes = written(resource, name);
        assert!(!writes.is_empty(), "{resource}/{name} was never written");
        for record in writes.iter().filter(|r| r.subresource.is_empty()) {
            assert_eq!(record.acting_user(), sa_user.as_str(), "{record:?}");
            assert_eq!(record.user, CONTROLLER_USER, "impersonated by the controller: {record:?}");
        }
    }
    let allowed = [
        "roles",
        "clusterroles",
        "rolebindings",
        "clusterrolebindings",
        "serviceaccounts",
        "events",
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
        "subjectaccessreviews",
        "selfsubjectreviews",
    ];
    for record in records.iter().filter(|r| r.acting_user() == CONTROLLER_USER && r.verb == "create" && r.wrote()) {
        // Its own namespace's Secrets: the serving certificates every replica shares (tls/shared.rs).
        let own_secret = record.resource == "secrets" && record.namespace == project::CONTROLLER_NAMESPACE;
        assert!(allowed.contains(&record.resource.as_str()) || own_secret, "the controller created {record:?}");
        if record.resource == "serviceaccounts" {
            assert_eq!(record.namespace, "olmv2-system", "{record:?}");
            assert_eq!(record.name, account_name, "{record:?}");
        }
        if record.resource.ends_with("roles") || record.resource.ends_with("bindings") {
            assert!(record.name.starts_with("olmv2-install-plumbus-"), "the controller created {record:?}");
        }
    }
    // The grants are owned by the Install, so they go with it.
    let grants = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(harness.admin.clone());
    let grant = grants
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|r| r.metadata.name.as_deref().is_some_and(|n| n.starts_with("olmv2-install-plumbus-")))
        .expect("grant");
    assert_eq!(grant.metadata.owner_references.unwrap()[0].uid, installed.metadata.uid.clone().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_asking_for_more_waits_for_approval_while_the_old_version_runs() {
    let harness = start("upgrade").await;
    let old = push(&harness, "plumbus/2.0.0-alpha", "v2.0.0-alpha").await;
    let new = push(&harness, "plumbus/2.1.0", "v2.1.0").await;
    let body = serde_yaml_ng::from_str::<Value>(&install_yaml("plumbus", &old)).unwrap();
    installs(&harness).create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
    wait_state(&harness, "plumbus", InstallState::PendingApproval).await;
    let approve = json!({"spec": {"approval": "Approved"}});
    installs(&harness).patch("plumbus", &PatchParams::default(), &Patch::Merge(&approve)).await.unwrap();
    wait_state(&harness, "plumbus", InstallState::Applying).await;
    harness.roll_out("operators").await;
    wait_state(&harness, "plumbus", InstallState::Installed).await;
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "operators");
    let running = deployments.get("plumbus-operator").await.unwrap();

    let update = json!({"spec": {"content": [{"type": "ManifestImage", "manifestImage": new}]}});
    installs(&harness).patch("plumbus", &PatchParams::default(), &Patch::Merge(&update)).await.unwrap();
    let waiting = wait(&harness, "plumbus", "pending the upgrade", |i| {
        i.status.as_ref().is_some_and(|s| {
            s.state == Some(InstallState::PendingApproval) && s.observed_generation == i.metadata.generation
        })
    })
    .await;
    assert_eq!(
        waiting.spec.approval,
        Approval::Unapproved,
        "the approval of the old version does not cover the new one"
    );
    let status = waiting.status.unwrap();
    let installed = status.conditions.iter().find(|c| c.type_ == "Installed").unwrap();
    assert_eq!(installed.reason, "AwaitingApproval");
    assert!(installed.message.contains("keeps running"), "{installed:?}");
    assert!(status.pending.unwrap().count > 0);
    let still = deployments.get("plumbus-operator").await.unwrap();
    assert_eq!(still.spec, running.spec, "the old version keeps running unchanged until approval");
    assert!(harness.admin_kubectl(&["get", "csv", "-n", "operators", "plumbus.v2.0.0-alpha"], None).status.success());

    installs(&harness).patch("plumbus", &PatchParams::default(), &Patch::Merge(&approve)).await.unwrap();
    wait(&harness, "plumbus", "upgraded", |i| {
        i.status.as_ref().is_some_and(|s| s.applied.iter().any(|o| o.name == "plumbus.v2.1.0"))
    })
    .await;
    let csvs = harness.admin_kubectl(&["get", "csv", "-n", "operators", "-o", "name"], None);
    assert_eq!(
        text(&csvs).trim(),
        "clusterserviceversion.operators.coreos.com/plumbus.v2.1.0",
        "the old record is pruned"
    );
    let pruned: Vec<_> = harness
        .audit_records()
        .into_iter()
        .filter(|r| r.verb == "delete" && r.resource == "clusterserviceversions" && r.name == "plumbus.v2.0.0-alpha")
        .collect();
    assert!(!pruned.is_empty(), "the old record was deleted");
    for record in pruned {
        assert!(
            record.acting_user().starts_with("system:serviceaccount:olmv2-system:plumbus-"),
            "pruned as the account: {record:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grant_of_cluster_admin_in_the_content_shows_in_the_pending_permissions() {
    let harness = start("escalation").await;
    // An Operator owns this Install, so what it applies carries the Operator's component label.
    let operators = Api::<olmv2::api::v2alpha1::Operator>::all(harness.admin.clone());
    let owner = operators
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": {"name": "grabby"}, "spec": {}})).unwrap())
        .await
        .unwrap();
    let raw = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: grabby\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: grabby-admin\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects:\n- {kind: ServiceAccount, name: grabby, namespace: default}\n";
    // Created already approved: nothing had been computed, so the approval stands for nothing and is reset. Owned by
    // an Operator, it is the controller's to create (the webhook refuses anyone else an owner reference).
    let install = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install",
        "metadata": {"name": "grabby", "ownerReferences": [{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "name": "grabby", "uid": owner.metadata.uid}]},
        "spec": {"approval": "Approved", "namespaces": [{"from": "default", "to": "operators"}], "content": [{"type": "Raw", "raw": raw}]}});
    let forged = harness.admin_kubectl(&["create", "-f", "-"], Some(&install.to_string()));
    assert!(text(&forged).contains("only the controller sets owner references"), "{}", text(&forged));
    let created = harness.admin_kubectl(&["create", "-f", "-", "--as", CONTROLLER_USER], Some(&install.to_string()));
    assert!(created.status.success(), "{}", text(&created));
    let pending = wait_state(&harness, "grabby", InstallState::PendingApproval).await;
    assert_eq!(pending.spec.approval, Approval::Unapproved);
    let permissions = pending.status.unwrap().pending.unwrap().permissions;
    assert!(
        permissions.iter().any(|p| p.scope == PermissionScope::Cluster
            && p.verbs == ["*"]
            && p.api_groups == ["*"]
            && p.resources == ["*"]),
        "cluster-admin's rules are pending: {permissions:#?}"
    );
    assert!(permissions.iter().any(|p| p.non_resource_urls == ["*"]), "{permissions:#?}");

    // Carol administers namespace operators and may edit Installs, but is no cluster-admin: refused.
    let carol = install_editor(&harness, "carol").await;
    let admin_binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "carol-admin", "namespace": "operators"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "carol"}]});
    harness.create(&admin_binding).await;
    let refused =
        harness.kubectl(&carol, &["patch", "install", "grabby", "--type", "merge", "-p", approve_patch()], None);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(text(&refused).contains("\"carol\" may not approve Install grabby"), "{}", text(&refused));
    assert!(text(&refused).contains("* * (*) cluster-wide"), "{}", text(&refused));

    let approved =
        harness.admin_kubectl(&["patch", "install", "grabby", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    let installed = wait_state(&harness, "grabby", InstallState::Installed).await;
    assert_eq!(installed.status.unwrap().applied.len(), 2);
    let binding = Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(harness.admin.clone())
        .get("grabby-admin")
        .await
        .unwrap();
    assert_eq!(
        binding.metadata.labels.unwrap().get("v2alpha1.operators.coreos.com/grabby").map(String::as_str),
        Some("")
    );
    let account = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(harness.admin.clone(), "operators")
        .get("grabby")
        .await
        .unwrap();
    assert!(account.metadata.labels.unwrap().contains_key("v2alpha1.operators.coreos.com/grabby"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pull_failure_is_a_content_import_error_until_the_registry_returns() {
    let mut harness = start("pull").await;
    let image = push(&harness, "plumbus/2.0.0-alpha", "v2.0.0-alpha").await;
    harness.registry.stop();
    let body = serde_yaml_ng::from_str::<Value>(&install_yaml("plumbus", &image)).unwrap();
    installs(&harness).create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
    let failed = wait_state(&harness, "plumbus", InstallState::Failed).await;
    let condition = failed.status.unwrap().conditions.into_iter().find(|c| c.type_ == "ContentImportError").unwrap();
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("True", "ManifestImagePullFailed"));
    assert!(condition.message.contains(&image), "{condition:?}");
    let event = harness.wait_event("default", "ManifestImagePullFailed").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.regarding.and_then(|r| r.name).as_deref(), Some("plumbus"));

    harness.registry.resume().expect("registry back");
    let recovered = wait_state(&harness, "plumbus", InstallState::PendingApproval).await;
    let condition = recovered.status.unwrap().conditions.into_iter().find(|c| c.type_ == "ContentImportError").unwrap();
    assert_eq!((condition.status.as_str(), condition.reason.as_str()), ("False", "ContentImported"));
    let event = harness.wait_event("default", "ContentImported").await;
    assert_eq!(event.type_.as_deref(), Some("Normal"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_controller_killed_mid_apply_converges_on_restart_without_duplicates() {
    let mut harness = start("restart").await;
    let _slow = harness.slow_configmap_writes().await;
    let raw: String = (0..30)
        .map(|i| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-{i:02}\ndata:\n  index: \"{i}\"\n---\n"
            )
        })
        .collect();
    let install = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "settings"},
        "spec": {"namespaces": [{"from": "default", "to": "operators"}], "content": [{"type": "Raw", "raw": raw}]}});
    installs(&harness).create(&PostParams::default(), &serde_json::from_value(install).unwrap()).await.unwrap();
    wait_state(&harness, "settings", InstallState::PendingApproval).await;
    let approve = json!({"spec": {"approval": "Approved"}});
    installs(&harness).patch("settings", &PatchParams::default(), &Patch::Merge(&approve)).await.unwrap();

    let configmaps = Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators");
    let mut created = 0;
    for _ in 0..400 {
        created = configmaps
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|c| c.metadata.name.as_deref().is_some_and(|n| n.starts_with("settings-")))
            .count();
        if created >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    harness.stop_controllers();
    assert!((3..30).contains(&created), "stopped mid-apply after {created} of 30");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let at_kill = configmaps.list(&ListParams::default()).await.unwrap().items.len();
    assert!(at_kill < 31, "the apply stopped with the controller ({at_kill} ConfigMaps)");

    harness.start_controllers().await;
    let installed = wait_state(&harness, "settings", InstallState::Installed).await;
    assert_eq!(installed.spec.approval, Approval::Approved);
    let names: Vec<String> = configmaps
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.starts_with("settings-"))
        .collect();
    assert_eq!(names.len(), 30, "{names:?}");
    let roles = Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(harness.admin.clone(), "operators")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let grants: Vec<_> = roles
        .iter()
        .filter(|r| r.metadata.name.as_deref().is_some_and(|n| n.starts_with("olmv2-install-settings-")))
        .collect();
    assert_eq!(grants.len(), 1, "one grant, written again rather than twice: {grants:?}");
    let accounts = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(harness.admin.clone(), "olmv2-system")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let own: Vec<_> =
        accounts.iter().filter(|a| a.metadata.name.as_deref().is_some_and(|n| n.starts_with("settings-"))).collect();
    assert_eq!(own.len(), 1, "one account, created once: {own:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_kubectl_plugin_shows_the_pending_permissions_and_approves_with_the_users_credentials() {
    let harness = start("plugin").await;
    let image = push(&harness, "plumbus/2.0.0-alpha", "v2.0.0-alpha").await;
    let body = serde_yaml_ng::from_str::<Value>(&install_yaml("plumbus", &image)).unwrap();
    installs(&harness).create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
    wait_state(&harness, "plumbus", InstallState::PendingApproval).await;

    let bin = harness.dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(crate::support::harness::olmv2_binary(), bin.join("kubectl-olmv2")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let plugin = |kubeconfig: &str, answer: &str| {
        let file = harness.dir.join(format!("plugin-{}.kubeconfig", answer.len() + kubeconfig.len()));
        std::fs::write(&file, kubeconfig).unwrap();
        run(
            Command::new("kubectl").args(["olmv2", "approve", "plumbus"]).env("PATH", &path).env("KUBECONFIG", &file),
            Some(answer),
        )
    };

    let declined = plugin(&harness.plane.kubeconfig(), "n\n");
    assert!(declined.status.success(), "{}", text(&declined));
    let shown = text(&declined);
    assert!(shown.contains("ServiceAccount olmv2-system/plumbus"), "{shown}");
    assert!(shown.contains("SCOPE") && shown.contains("deployments") && shown.contains("Not approved."), "{shown}");
    assert_eq!(installs(&harness).get("plumbus").await.unwrap().spec.approval, Approval::Unapproved);

    let bob = install_editor(&harness, "bob").await;
    let refused = plugin(&bob, "y\n");
    assert!(!refused.status.success());
    assert!(text(&refused).contains("the approval of Install plumbus was refused"), "{}", text(&refused));

    let approved = plugin(&harness.plane.kubeconfig(), "y\n");
    assert!(approved.status.success(), "{}", text(&approved));
    assert!(text(&approved).contains("Install plumbus approved."), "{}", text(&approved));
    wait_state(&harness, "plumbus", InstallState::Applying).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drift_from_the_applied_content_is_reported_and_repaired() {
    let harness = start("drift").await;
    let raw = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tuning\ndata:\n  level: \"3\"\n";
    let install = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "tuning"},
        "spec": {"namespaces": [{"from": "default", "to": "operators"}], "content": [{"type": "Raw", "raw": raw}]}});
    installs(&harness).create(&PostParams::default(), &serde_json::from_value(install).unwrap()).await.unwrap();
    wait_state(&harness, "tuning", InstallState::PendingApproval).await;
    let approve = json!({"spec": {"approval": "Approved"}});
    installs(&harness).patch("tuning", &PatchParams::default(), &Patch::Merge(&approve)).await.unwrap();
    wait_state(&harness, "tuning", InstallState::Installed).await;

    let configmaps = Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators");
    let edit = json!({"data": {"level": "9"}});
    configmaps.patch("tuning", &PatchParams::default(), &Patch::Merge(&edit)).await.unwrap();
    let reported = harness.wait_event("default", "ComponentsDivergeFromResolvedContent").await;
    assert_eq!(reported.type_.as_deref(), Some("Warning"));
    assert!(reported.note.unwrap_or_default().contains("ConfigMap operators/tuning"));
    wait(&harness, "tuning", "matching again", |i| {
        i.status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "ComponentsDiverge" && c.status == "False"))
    })
    .await;
    let repaired = configmaps.get("tuning").await.unwrap();
    assert_eq!(
        repaired.data.unwrap().get("level").map(String::as_str),
        Some("3"),
        "applied again as the ServiceAccount"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_raw_content_is_reported_until_it_is_fixed() {
    let harness = start("invalid").await;
    let configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tuning\ndata:\n  level: \"3\"\n";
    let unnamed = format!("{configmap}---\napiVersion: v1\nkind: ConfigMap\ndata:\n  level: \"4\"\n");
    let install = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "tuning"},
        "spec": {"namespaces": [{"from": "default", "to": "operators"}], "content": [{"type": "Raw", "raw": unnamed}]}});
    installs(&harness).create(&PostParams::default(), &serde_json::from_value(install).unwrap()).await.unwrap();
    let invalid = wait_state(&harness, "tuning", InstallState::Failed).await;
    let condition = |install: &Install, type_: &str| {
        install.status.as_ref().unwrap().conditions.iter().find(|c| c.type_ == type_).cloned().unwrap()
    };
    let reported = condition(&invalid, "InvalidContent");
    assert_eq!((reported.status.as_str(), reported.reason.as_str()), ("True", "BundleObjectInvalid"));
    assert!(reported.message.contains("spec.content[0].raw: document 1"), "{reported:?}");
    assert!(reported.message.contains("metadata.name is missing"), "{reported:?}");
    assert_eq!(condition(&invalid, "Installed").reason, "InvalidContent");
    let event = harness.wait_event("default", "BundleObjectInvalid").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // A kind the cluster does not serve, and no CRD in the content defines, cannot be installed either.
    let gizmo = format!("{configmap}---\napiVersion: example.com/v1\nkind: Gizmo\nmetadata:\n  name: spare\n");
    let update = json!({"spec": {"content": [{"type": "Raw", "raw": gizmo}]}});
    installs(&harness).patch("tuning", &PatchParams::default(), &Patch::Merge(&update)).await.unwrap();
    let unknown = wait(&harness, "tuning", "reporting the unknown kind", |i| {
        i.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| c.type_ == "InvalidContent" && c.reason == "ContentKindUnknown")
        })
    })
    .await;
    assert!(condition(&unknown, "InvalidContent").message.contains("Gizmo (example.com/v1) \"spare\""));
    assert_eq!(unknown.status.as_ref().unwrap().state, Some(InstallState::Failed));
    assert!(Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators")
        .get_opt("tuning")
        .await
        .unwrap()
        .is_none());

    let fixed = json!({"spec": {"content": [{"type": "Raw", "raw": configmap}]}});
    installs(&harness).patch("tuning", &PatchParams::default(), &Patch::Merge(&fixed)).await.unwrap();
    let pending = wait_state(&harness, "tuning", InstallState::PendingApproval).await;
    let valid = condition(&pending, "InvalidContent");
    assert_eq!((valid.status.as_str(), valid.reason.as_str()), ("False", "ContentValid"));
    assert_eq!(valid.observed_generation, pending.metadata.generation);
}

/// The proxy of `deployment`'s first container, from its environment.
fn proxy_of(deployment: &Deployment) -> Option<String> {
    let containers = &deployment.spec.as_ref()?.template.spec.as_ref()?.containers;
    let env = containers.first()?.env.as_ref()?;
    env.iter().find(|var| var.name == "HTTP_PROXY").and_then(|var| var.value.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deployment_configuration_reaches_the_deployment_and_a_new_one_waits_as_new_content_does() {
    let harness = start("config").await;
    let image = push(&harness, "plumbus/2.0.0-alpha", "v2.0.0-alpha").await;
    let mut body = serde_yaml_ng::from_str::<Value>(&install_yaml("plumbus", &image)).unwrap();
    // Updates approved by hand: content not let through before waits for a person, even when it needs nothing new.
    body["metadata"]["annotations"] = json!({olmv2::api::v2alpha1::MANUAL_APPROVAL_ANNOTATION: "true"});
    body["spec"]["content"][0]["config"] = json!({
        "env": [{"name": "HTTP_PROXY", "value": "http://proxy.example.com:3128"}],
        "annotations": {"example.com/team": "platform"},
    });
    installs(&harness).create(&PostParams::default(), &serde_json::from_value(body.clone()).unwrap()).await.unwrap();
    wait_state(&harness, "plumbus", InstallState::PendingApproval).await;
    let approve = json!({"spec": {"approval": "Approved"}});
    installs(&harness).patch("plumbus", &PatchParams::default(), &Patch::Merge(&approve)).await.unwrap();
    wait_state(&harness, "plumbus", InstallState::Applying).await;
    harness.roll_out("operators").await;
    let installed = wait_state(&harness, "plumbus", InstallState::Installed).await;
    assert!(installed.status.unwrap().resolved[0].config_digest.is_some());
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "operators");
    let running = deployments.get("plumbus-operator").await.unwrap();
    assert_eq!(proxy_of(&running).as_deref(), Some("http://proxy.example.com:3128"));
    assert_eq!(running.metadata.annotations.unwrap()["example.com/team"], "platform");
    let template = running.spec.unwrap().template.metadata.unwrap().annotations.unwrap();
    assert_eq!(template["example.com/team"], "platform");
    assert_eq!(template["capabilities"], "Basic Install", "the CSV's annotations are on the pods");

    // The same image with another proxy: a changed payload, which waits for a person as an update would.
    body["spec"]["content"][0]["config"]["env"][0]["value"] = json!("http://other.example.com:3128");
    let reconfigure = json!({"spec": {"content": body["spec"]["content"]}});
    installs(&harness).patch("plumbus", &PatchParams::default(), &Patch::Merge(&reconfigure)).await.unwrap();
    let waiting = wait(&harness, "plumbus", "the new configuration pending", |i| {
        i.status.as_ref().is_some_and(|s| {
            s.state == Some(InstallState::PendingApproval) && s.observed_generation == i.metadata.generation
        })
    })
    .await;
    let pending = waiting.status.unwrap().pending.unwrap();
    assert_eq!(pending.reason, Some(olmv2::api::v2alpha1::PendingReason::ManualApproval));
    let unchanged = deployments.get("plumbus-operator").await.unwrap();
    assert_eq!(proxy_of(&unchanged).as_deref(), Some("http://proxy.example.com:3128"), "nothing changes unapproved");

    installs(&harness).patch("plumbus", &PatchParams::default(), &Patch::Merge(&approve)).await.unwrap();
    harness
        .wait_for(&deployments, "plumbus-operator", "the new proxy", |d| {
            proxy_of(d).as_deref() == Some("http://other.example.com:3128")
        })
        .await;
}

/// The `Installed` condition of Install gizmos once it failed, as an unsafe CRD upgrade.
async fn refused_as_unsafe(
    harness: &support::harness::Harness,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    let refused = wait_state(harness, "gizmos", InstallState::Failed).await;
    let installed =
        refused.status.as_ref().unwrap().conditions.iter().find(|c| c.type_ == "Installed").cloned().unwrap();
    assert_eq!(installed.reason, "CRDUpgradeUnsafe");
    installed
}

fn gizmo_crd(versions: &[(&str, bool)]) -> String {
    let versions: Vec<String> = versions
        .iter()
        .map(|(name, storage)| {
            format!(
                "  - name: {name}\n    served: true\n    storage: {storage}\n    schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}\n"
            )
        })
        .collect();
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gizmos.example.com\nspec:\n  group: example.com\n  names: {{kind: Gizmo, plural: gizmos}}\n  scope: Namespaced\n  versions:\n{}",
        versions.concat()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crd_update_dropping_a_stored_version_is_refused_in_olms_words() {
    let harness = start("crd-safety").await;
    let install = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "gizmos"},
        "spec": {"namespaces": [{"from": "default", "to": "operators"}],
                 "content": [{"type": "Raw", "raw": gizmo_crd(&[("v1alpha1", true)])}]}});
    let created = harness.admin_kubectl(&["apply", "-f", "-"], Some(&install.to_string()));
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    wait_state(&harness, "gizmos", InstallState::PendingApproval).await;
    let approved = harness.admin_kubectl(&["patch", "install", "gizmos", "--type=merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    wait_state(&harness, "gizmos", InstallState::Installed).await;

    // v1 becomes the storage version and v1alpha1 stays: safe.
    let kept = json!({"spec": {"content": [{"type": "Raw", "raw": gizmo_crd(&[("v1alpha1", false), ("v1", true)])}]}});
    installs(&harness).patch("gizmos", &PatchParams::default(), &Patch::Merge(&kept)).await.unwrap();
    wait(&harness, "gizmos", "installed with both versions", |i| {
        i.status
            .as_ref()
            .is_some_and(|s| s.state == Some(InstallState::Installed) && s.observed_generation == i.metadata.generation)
    })
    .await;

    // Dropping v1alpha1, which objects may still be stored in, is refused before the API server sees it.
    let dropped = json!({"spec": {"content": [{"type": "Raw", "raw": gizmo_crd(&[("v1", true)])}]}});
    installs(&harness).patch("gizmos", &PatchParams::default(), &Patch::Merge(&dropped)).await.unwrap();
    let installed = refused_as_unsafe(&harness).await;
    assert!(
        installed.message.contains(
            "risk of data loss updating \"gizmos.example.com\": new CRD removes version v1alpha1 that is listed as a \
             stored version on the existing CRD"
        ),
        "{installed:?}"
    );
    let crd = Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(
        harness.admin.clone(),
    )
    .get("gizmos.example.com")
    .await
    .unwrap();
    assert_eq!(crd.spec.versions.len(), 2, "the CRD is left as it was");
}

const GIZMO_READER: &str = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: gizmo-reader}\nrules: [{apiGroups: [example.com], resources: [gizmos], verbs: [get, list, watch]}]\n";

/// The Gizmo CRD with one version whose `spec.count` is of `type_`, converting by webhook when `webhook`.
fn counted_gizmo_crd(type_: &str, webhook: bool) -> String {
    let conversion = if webhook {
        "  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig:\n        url: https://converter.example.com/convert\n"
    } else {
        ""
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gizmos.example.com\nspec:\n  group: example.com\n  names: {{kind: Gizmo, plural: gizmos}}\n  scope: Namespaced\n{conversion}  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema: {{openAPIV3Schema: {{type: object, properties: {{spec: {{type: object, properties: {{count: {{type: {type_}}}}}}}}}}}}}\n"
    )
}

fn gizmo_count_type(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Value {
    let schema = serde_json::to_value(crd.spec.versions[0].schema.as_ref().unwrap()).unwrap();
    schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["count"]["type"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crd_update_that_stored_objects_would_fail_is_refused_in_olms_words() {
    let harness = start("crd-objects").await;
    // The CRD, and (later) a ClusterRole reading Gizmos: its rules are the account's once approved, so that it may
    // list the Gizmos stored today when the CRD changes.
    let raw = |type_: &str, webhook: bool| format!("{}---\n{GIZMO_READER}", counted_gizmo_crd(type_, webhook));
    let content =
        |type_: &str, webhook: bool| json!({"spec": {"content": [{"type": "Raw", "raw": raw(type_, webhook)}]}});
    let install = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "gizmos"},
        "spec": {"namespaces": [{"from": "default", "to": "operators"}],
                 "content": [{"type": "Raw", "raw": counted_gizmo_crd("string", false)}]}});
    let created = harness.admin_kubectl(&["apply", "-f", "-"], Some(&install.to_string()));
    assert!(created.status.success(), "{}", text(&created));
    wait_state(&harness, "gizmos", InstallState::PendingApproval).await;
    let approved = harness.admin_kubectl(&["patch", "install", "gizmos", "--type=merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(&harness, "gizmos", InstallState::Installed).await;
    let gizmo =
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g1, namespace: operators}\nspec: {count: three}\n";
    let applied = harness.admin_kubectl(&["apply", "-f", "-"], Some(gizmo));
    assert!(applied.status.success(), "{}", text(&applied));

    // A new schema nobody can check against g1 (the account may not list Gizmos) is not applied.
    let bare = json!({"spec": {"content": [{"type": "Raw", "raw": counted_gizmo_crd("integer", false)}]}});
    installs(&harness).patch("gizmos", &PatchParams::default(), &Patch::Merge(&bare)).await.unwrap();
    let unverified = wait_state(&harness, "gizmos", InstallState::Failed).await;
    let condition = unverified.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Installed").unwrap();
    assert_eq!(condition.reason, "CRDUpgradeUnverifiable", "{condition:?}");
    assert!(
        condition.message.contains("failed to list gizmos.example.com/v1 as system:serviceaccount:"),
        "{condition:?}"
    );

    // With a ClusterRole reading Gizmos (approved, so the account holds it), the schema g1 would fail is refused
    // before the API server sees it, in OLM's words.
    installs(&harness)
        .patch("gizmos", &PatchParams::default(), &Patch::Merge(&content("integer", false)))
        .await
        .unwrap();
    wait_state(&harness, "gizmos", InstallState::PendingApproval).await;
    let approved = harness.admin_kubectl(&["patch", "install", "gizmos", "--type=merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    let installed = refused_as_unsafe(&harness).await;
    assert!(
        installed.message.contains(
            "error validating existing CRs against new CRD's schema for \"gizmos.example.com\": error validating \
             example.com/v1, Kind=Gizmo \"operators/g1\": updated validation is too restrictive: spec.count: value is \
             not of type \"integer\""
        ),
        "{installed:?}"
    );
    let crds = Api::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>::all(
        harness.admin.clone(),
    );
    assert_eq!(gizmo_count_type(&crds.get("gizmos.example.com").await.unwrap()), "string", "the CRD is left as it was");

    // A CRD converting by webhook is trusted to convert g1, as OLM trusts it: the update goes on, with a warning.
    installs(&harness)
        .patch("gizmos", &PatchParams::default(), &Patch::Merge(&content("integer", true)))
        .await
        .unwrap();
    let mut updated = false;
    for _ in 0..100 {
        if gizmo_count_type(&crds.get("gizmos.example.com").await.unwrap()) == "integer" {
            updated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(updated, "the webhook-converting CRD was never applied: {:?}", installs(&harness).get("gizmos").await);
    let event = harness.wait_event("default", "CRDValidation").await;
    assert!(event.note.unwrap_or_default().contains("a webhook conversion strategy was specified in the new CRD"));
}
