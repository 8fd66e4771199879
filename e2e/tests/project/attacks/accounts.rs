//! Attacks through accounts and grants: an Install named after an existing account, content taking over existing
//! objects, an OperatorGroup's account lent to creators who may not use it, orphaned grants, and accounts whose
//! requests share the controller's one connection pool.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_install_named_after_an_existing_account_gets_its_own_and_takes_over_nothing() {
    let harness = start("attack-names").await;
    let mallory = install_author(&harness, "mallory").await;
    // The controller's own account, a namespace's default account, the webhook's Service (and Secret) name.
    for name in ["olmv2-controller", "default", "olmv2-webhook"] {
        apply(&harness, &mallory, &raw_install(name, &escalation("mallory"), "operators"));
        let pending = wait_state(&harness, name, InstallState::PendingApproval).await;
        let status = pending.status.unwrap();
        let account = status.service_account_ref.unwrap();
        assert_eq!(account.namespace, "olmv2-system");
        assert_ne!(account.name, name, "an Install never runs as an existing account of its name");
        assert!(account.name.starts_with(&format!("{name}-")), "{account:?}");
        let pending = status.pending.unwrap();
        assert!(pending.count > 0);
        // The approver sees whom the content binds, and to what.
        let binding = pending.bindings.iter().find(|b| b.name == "mallory-is-admin").expect("disclosed");
        assert_eq!(binding.role_ref.name, "cluster-admin");
        assert!(binding.subjects.iter().any(|s| s.kind == "User" && s.name == "mallory"), "{binding:?}");
        let shown = olmv2::cmd::approve::describe_pending(&pending_install(&harness, name).await);
        assert!(shown.contains("mallory") && shown.contains("cluster-admin"), "{shown}");
        // The creator is recorded as the API server authenticated them.
        let creator = pending_install(&harness, name).await.metadata.annotations.unwrap()[CREATOR_ANNOTATION].clone();
        assert!(creator.contains("\"username\":\"mallory\""), "{creator}");
    }
    let accounts = Api::<ServiceAccount>::namespaced(harness.admin.clone(), "olmv2-system");
    for existing in ["olmv2-controller", "default"] {
        let account = accounts.get(existing).await.unwrap();
        assert!(account.metadata.owner_references.unwrap_or_default().is_empty(), "{existing} was adopted");
    }
    never_written(&harness, "clusterrolebindings", "mallory-is-admin");
    not_bound(&harness, "mallory").await;
    // Deleting the Install takes nothing of the controller's with it.
    installs(&harness).delete("olmv2-controller", &DeleteParams::default()).await.unwrap();
    controller_healthy(&harness, "after-names").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approved_content_never_takes_over_an_existing_object() {
    let harness = start("attack-takeover").await;
    // Content naming the controller's own account and an existing namespace: once approved (by someone holding
    // everything), applying would make them the Install's, and deleting the Install would delete them.
    let raw = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: olmv2-controller\n  namespace: olmv2-system\n";
    let mallory = install_author(&harness, "mallory").await;
    apply(&harness, &mallory, &raw_install("takeover", raw, "operators"));
    wait_state(&harness, "takeover", InstallState::PendingApproval).await;
    let approved =
        harness.admin_kubectl(&["patch", "install", "takeover", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    let refused = wait(&harness, "takeover", "refused", |install| {
        install
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Installed" && c.reason == "ObjectNotOwned"))
    })
    .await;
    let message = refused.status.unwrap().conditions.into_iter().find(|c| c.type_ == "Installed").unwrap().message;
    assert!(message.contains("ServiceAccount olmv2-system/olmv2-controller exists"), "{message}");
    installs(&harness).delete("takeover", &DeleteParams::default()).await.unwrap();
    controller_healthy(&harness, "after-takeover").await;
}

async fn pending_install(harness: &Harness, name: &str) -> Install {
    installs(harness).get(name).await.unwrap()
}

/// A namespace `team` whose one OperatorGroup names the account `robot`, which holds cluster-admin.
async fn powerful_operator_group(harness: &Harness) {
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "team"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "robot-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]}),
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup", "metadata": {"name": "team", "namespace": "team"},
            "spec": {"serviceAccountName": "robot", "targetNamespaces": ["team"]}}),
    ] {
        harness.create(&object).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_groups_account_lends_its_rights_only_to_creators_who_may_use_it() {
    let harness = start("attack-og").await;
    powerful_operator_group(&harness).await;
    let mallory = install_author(&harness, "mallory").await;
    apply(&harness, &mallory, &raw_install("borrow", &escalation("mallory"), "team"));
    let pending = wait_state(&harness, "borrow", InstallState::PendingApproval).await;
    let status = pending.status.unwrap();
    let account = status.service_account_ref.unwrap();
    assert_eq!((account.namespace.as_str(), account.name.as_str()), ("team", "robot"));
    assert!(status.pending.unwrap().count > 0, "robot's cluster-admin does not count for mallory");
    never_written(&harness, "clusterrolebindings", "mallory-is-admin");
    not_bound(&harness, "mallory").await;

    // Someone who may create Subscriptions in `team` (what OLM v0 asked of whoever used the group's account) may use
    // what it holds: their Install applies at once, with nothing pending.
    let alice = install_author(&harness, "alice").await;
    for object in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "subscriber", "namespace": "team"},
            "rules": [{"apiGroups": ["operators.coreos.com"], "resources": ["subscriptions"], "verbs": ["create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "alice-subscriber", "namespace": "team"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "subscriber"},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]}),
    ] {
        harness.create(&object).await;
    }
    apply(&harness, &alice, &raw_install("settings", &config_map("settings", "1"), "team"));
    let installed = wait_state(&harness, "settings", InstallState::Installed).await;
    assert_eq!(installed.status.unwrap().pending.map(|p| p.count), Some(0));
    assert!(Api::<ConfigMap>::namespaced(harness.admin.clone(), "team").get_opt("settings").await.unwrap().is_some());

    // Mallory may not borrow alice's standing either: changing the content of alice's Install is marked, and waits.
    let swapped = json!({"spec": {"content": [{"type": "Raw", "raw": escalation("mallory")}]}});
    let patched = harness.kubectl(
        &mallory,
        &["patch", "install", "settings", "--type", "merge", "-p", &swapped.to_string()],
        None,
    );
    assert!(patched.status.success(), "{}", text(&patched));
    let marked = pending_reason(&harness, "settings", PendingReason::ContentChanged).await;
    assert_eq!(marked.metadata.annotations.unwrap()[CONTENT_CHANGED_BY_ANNOTATION], "mallory");
    never_written(&harness, "clusterrolebindings", "mallory-is-admin");
    not_bound(&harness, "mallory").await;
    controller_healthy(&harness, "after-og").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn orphaned_grants_and_accounts_are_never_inherited() {
    let harness = start("attack-orphans").await;
    let first = installed_by_admin(&harness, "settings", "approved").await;
    let first_account = first.status.unwrap().service_account_ref.unwrap();

    let orphaned = harness.admin_kubectl(&["delete", "install", "settings", "--cascade=orphan"], None);
    assert!(orphaned.status.success(), "{}", text(&orphaned));
    let mallory = install_author(&harness, "mallory").await;
    // The same name, content needing exactly the rules granted before, other data.
    apply(&harness, &mallory, &raw_install("settings", &config_map("settings", "mallory's"), "operators"));
    let second = wait(&harness, "settings", "a new Install waiting", |install| {
        install.metadata.uid != first.metadata.uid
            && install.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
    })
    .await;
    let status = second.status.unwrap();
    let second_account = status.service_account_ref.unwrap();
    assert_ne!(second_account, first_account, "a new uid, a new account");
    assert!(status.pending.unwrap().count > 0, "the orphan's grants count for nothing");
    let live = Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators").get("settings").await.unwrap();
    assert_eq!(live.data.unwrap()["value"], "approved", "nothing of mallory's was applied");
    let new_user = format!("system:serviceaccount:olmv2-system:{}", second_account.name);
    let by_new = harness
        .audit_records()
        .into_iter()
        .filter(|r| r.acting_user() == new_user && r.verb != "get" && r.code < 300)
        .count();
    assert_eq!(by_new, 0, "the new account wrote nothing before an approval");
    controller_healthy(&harness, "after-orphans").await;
}

/// Every Install's account sends through one client of the controller (`controller::impersonation`): one pool of
/// connections for all. Six Installs at once, half approved: each approved one's content is written acting as its
/// own account and no other, and nothing of an unapproved one is written by anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn accounts_sharing_one_connection_pool_each_act_as_themselves() {
    let harness = start("attack-shared-pool").await;
    let names: Vec<String> = (0..6).map(|i| format!("shared-{i}")).collect();
    for name in &names {
        apply(&harness, &harness.plane.kubeconfig(), &raw_install(name, &config_map(name, "v"), "operators"));
    }
    let mut accounts = std::collections::BTreeMap::new();
    for name in &names {
        let pending = wait_state(&harness, name, InstallState::PendingApproval).await;
        let account = pending.status.unwrap().service_account_ref.unwrap();
        accounts.insert(name.clone(), format!("system:serviceaccount:{}:{}", account.namespace, account.name));
    }
    let distinct: std::collections::BTreeSet<&String> = accounts.values().collect();
    assert_eq!(distinct.len(), names.len(), "each Install has its own account: {accounts:?}");
    let approved: Vec<&String> = names.iter().step_by(2).collect();
    for name in &approved {
        let patched =
            harness.admin_kubectl(&["patch", "install", name, "--type", "merge", "-p", approve_patch()], None);
        assert!(patched.status.success(), "{}", text(&patched));
    }
    for name in &approved {
        wait_state(&harness, name, InstallState::Installed).await;
    }

    let records = harness.audit_records();
    for name in &approved {
        let writes: Vec<_> =
            records.iter().filter(|r| r.resource == "configmaps" && r.name == **name && r.wrote()).collect();
        assert!(!writes.is_empty(), "{name} was never written");
        for write in writes {
            assert_eq!(write.acting_user(), accounts[*name], "{name} written as another: {write:?}");
            assert_eq!(write.user, CONTROLLER_USER, "{write:?}");
        }
    }
    // Every request made as an account names the account alone, and each account acted only on its own content.
    for record in records.iter().filter(|r| r.resource == "configmaps" && r.name.starts_with("shared-")) {
        if let Some(acting) = &record.impersonated_user {
            assert_eq!(acting, &accounts[&record.name], "{record:?}");
        }
    }
    for name in names.iter().skip(1).step_by(2) {
        never_written(&harness, "configmaps", name);
    }
    controller_healthy(&harness, "after-shared-pool").await;
}
