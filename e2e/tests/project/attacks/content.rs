//! Attacks through content and approvals: a swapped payload, an Operator's source changed, a moved tag of a Manual
//! Install, approvals with nothing pending and forged records.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn swapping_the_payload_of_an_approved_install_waits_for_a_person_holding_all_it_uses() {
    let harness = start("attack-swap").await;
    installed_by_admin(&harness, "settings", "approved").await;

    // bob may update Installs and holds nothing the account was granted: his content (same rules, other data) waits.
    let bob = install_editor(&harness, "bob").await;
    let swapped = json!({"spec": {"content": [{"type": "Raw", "raw": config_map("settings", "bob's")}]}});
    let patched =
        harness.kubectl(&bob, &["patch", "install", "settings", "--type", "merge", "-p", &swapped.to_string()], None);
    assert!(patched.status.success(), "{}", text(&patched));
    let waiting = pending_reason(&harness, "settings", PendingReason::ContentChanged).await;
    assert_eq!(waiting.spec.approval, Approval::Unapproved);
    assert_eq!(waiting.metadata.annotations.clone().unwrap()[CONTENT_CHANGED_BY_ANNOTATION], "bob");
    let reason = waiting
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "PendingApproval")
        .unwrap()
        .reason
        .clone();
    assert_eq!(reason, "ContentChangeApprovalRequired");
    let live = Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators");
    assert_eq!(live.get("settings").await.unwrap().data.unwrap()["value"], "approved");

    // Neither lifting the mark (the webhook puts it back) nor approving is his to do.
    let unmark = json!({"metadata": {"annotations": {CONTENT_CHANGED_BY_ANNOTATION: null}}});
    let _ =
        harness.kubectl(&bob, &["patch", "install", "settings", "--type", "merge", "-p", &unmark.to_string()], None);
    let kept = installs(&harness).get("settings").await.unwrap().metadata.annotations.unwrap();
    assert_eq!(kept[CONTENT_CHANGED_BY_ANNOTATION], "bob");
    let refused =
        harness.kubectl(&bob, &["patch", "install", "settings", "--type", "merge", "-p", approve_patch()], None);
    assert!(text(&refused).contains("\"bob\" may not approve Install settings"), "{}", text(&refused));
    // Re-applying his manifest without the annotations leaves them in place (the webhook puts them back).
    let refreshed = installs(&harness).get("settings").await.unwrap();
    let mut stripped: Value = serde_json::to_value(&refreshed).unwrap();
    stripped["metadata"]["annotations"] = json!({});
    stripped["metadata"].as_object_mut().unwrap().remove("managedFields");
    stripped.as_object_mut().unwrap().remove("status");
    let replaced = harness.kubectl(&bob, &["replace", "-f", "-"], Some(&stripped.to_string()));
    assert!(replaced.status.success(), "{}", text(&replaced));
    let kept = installs(&harness).get("settings").await.unwrap().metadata.annotations.unwrap();
    assert_eq!(kept[CONTENT_CHANGED_BY_ANNOTATION], "bob");
    assert!(kept.contains_key(CREATOR_ANNOTATION));
    never_written_by_account(&harness, &waiting, "configmaps", 1);

    // A person holding everything the new content uses approves it: applied, and the mark gone.
    assert!(harness
        .admin_kubectl(&["patch", "install", "settings", "--type", "merge", "-p", approve_patch()], None)
        .status
        .success());
    wait(&harness, "settings", "bob's content applied and unmarked", |install| {
        install.status.as_ref().and_then(|s| s.state) == Some(InstallState::Installed)
            && !install.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CONTENT_CHANGED_BY_ANNOTATION))
    })
    .await;
    assert_eq!(live.get("settings").await.unwrap().data.unwrap()["value"], "bob's");

    // Moving the same content elsewhere (the digests unchanged) is a content change too.
    let elsewhere = json!({"spec": {"namespaces": [{"from": "default", "to": "kube-system"}]}});
    let patched =
        harness.kubectl(&bob, &["patch", "install", "settings", "--type", "merge", "-p", &elsewhere.to_string()], None);
    assert!(patched.status.success(), "{}", text(&patched));
    pending_reason(&harness, "settings", PendingReason::ContentChanged).await;
    never_written(&harness, "configmaps", "settings-in-kube-system");
    let moved = Api::<ConfigMap>::namespaced(harness.admin.clone(), "kube-system").get_opt("settings").await.unwrap();
    assert!(moved.is_none(), "nothing was applied in kube-system");
    controller_healthy(&harness, "after-swap").await;
}

/// The account of `install` wrote `resource` exactly `times` times (successfully).
fn never_written_by_account(harness: &Harness, install: &Install, resource: &str, times: usize) {
    let account = install.status.as_ref().unwrap().service_account_ref.clone().unwrap();
    let user = format!("system:serviceaccount:{}:{}", account.namespace, account.name);
    let writes = harness
        .audit_records()
        .into_iter()
        .filter(|r| r.acting_user() == user && r.resource == resource && r.wrote())
        .count();
    assert_eq!(writes, times, "writes of {resource} as {user}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changing_an_operators_source_without_holding_its_grants_waits_for_a_person() {
    let harness = start("attack-operator").await;
    let plumbus = push(&harness, "plumbus/2.0.0-alpha", "v2.0.0-alpha").await;
    let grumbo = harness.push_bundle("grumbo/1.0.0", "grumbo-bundle", "v1.0.0").await;
    let operator = format!(
        "apiVersion: operators.coreos.com/v2alpha1\nkind: Operator\nmetadata:\n  name: plumbus\nspec:\n  updates:\n    type: ManifestImage\n    manifestImage: {plumbus}\n"
    );
    apply(&harness, &harness.plane.kubeconfig(), &operator);
    wait_state(&harness, "plumbus", InstallState::PendingApproval).await;
    approve_and_roll_out(&harness, "plumbus").await;

    // bob may edit Operators, and holds nothing plumbus's account was granted: he points it at another bundle.
    let bob = may(&harness, "bob", "operators", &["get", "list", "update", "patch"]).await;
    let moved = json!({"spec": {"updates": {"type": "ManifestImage", "manifestImage": grumbo}}});
    let patched =
        harness.kubectl(&bob, &["patch", "operator", "plumbus", "--type", "merge", "-p", &moved.to_string()], None);
    assert!(patched.status.success(), "{}", text(&patched));
    // The controller moves the Install to the new bundle as its own update, but the mark comes along: it waits.
    let waiting = pending_reason(&harness, "plumbus", PendingReason::ContentChanged).await;
    assert_eq!(waiting.metadata.annotations.clone().unwrap()[CONTENT_CHANGED_BY_ANNOTATION], "bob");
    assert_eq!(waiting.spec.content[0].manifest_image.as_deref(), Some(grumbo.as_str()));
    let csvs = harness.admin_kubectl(&["get", "csv", "-n", "operators", "-o", "name"], None);
    assert!(!text(&csvs).contains("grumbo"), "grumbo was not applied: {}", text(&csvs));
    never_written(&harness, "deployments", "grumbo-operator");
    // The Operator's mark went over to its Install.
    mark_carried_over(&harness, "plumbus").await;

    // Loosening the Operator's hold on its Install (to stop the marks) is not an editor's to do.
    let editor = install_editor(&harness, "carol").await;
    let owners = waiting.metadata.owner_references.clone().unwrap();
    let mut loosened = serde_json::to_value(&owners).unwrap();
    loosened[0]["controller"] = json!(false);
    let patch = json!({"metadata": {"ownerReferences": loosened}});
    let refused =
        harness.kubectl(&editor, &["patch", "install", "plumbus", "--type", "merge", "-p", &patch.to_string()], None);
    assert!(text(&refused).contains("only the controller sets owner references"), "{}", text(&refused));
    controller_healthy(&harness, "after-operator").await;
}

/// The Operator's source-change mark goes over to its Install.
async fn mark_carried_over(harness: &Harness, name: &str) {
    let operators = Api::<olmv2::api::v2alpha1::Operator>::all(harness.admin.clone());
    harness
        .wait_for(&operators, name, "without its mark", |operator| {
            !operator.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CONTENT_CHANGED_BY_ANNOTATION))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_set_before_the_operator_has_an_install_does_not_borrow_its_creators_standing() {
    let harness = start("attack-early").await;
    let grumbo = harness.push_bundle("grumbo/1.0.0", "grumbo-bundle", "v1.0.0").await;
    // The admin's Operator names a catalog that does not resolve (yet): it has no Install.
    let operator = "apiVersion: operators.coreos.com/v2alpha1\nkind: Operator\nmetadata:\n  name: early\nspec:\n  updates:\n    type: CatalogSource\n    catalogSource:\n      ref:\n        name: missing\n        namespace: operators\n      package: plumbus\n      channel: stable\n      approval: Automatic\n";
    apply(&harness, &harness.plane.kubeconfig(), operator);
    let bob = may(&harness, "bob", "operators", &["get", "list", "update", "patch"]).await;
    let moved = json!({"spec": {"updates": {"type": "ManifestImage", "manifestImage": grumbo, "catalogSource": null}}});
    let patched =
        harness.kubectl(&bob, &["patch", "operator", "early", "--type", "merge", "-p", &moved.to_string()], None);
    assert!(patched.status.success(), "{}", text(&patched));
    // Its first Install is bob's doing, not the admin's: it waits for a person holding all it uses.
    let waiting = pending_reason(&harness, "early", PendingReason::ContentChanged).await;
    assert_eq!(waiting.metadata.annotations.clone().unwrap()[CONTENT_CHANGED_BY_ANNOTATION], "bob");
    mark_carried_over(&harness, "early").await;
    never_written(&harness, "deployments", "grumbo-operator");
    controller_healthy(&harness, "after-early").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_moved_tag_of_a_manual_install_is_an_update_waiting_for_approval() {
    let harness = start("attack-manual").await;
    let tag = push(&harness, "plumbus/2.0.0-alpha", "stable").await;
    let manifest = format!(
        "apiVersion: operators.coreos.com/v2alpha1\nkind: Install\nmetadata:\n  name: plumbus\n  annotations:\n    {MANUAL_APPROVAL_ANNOTATION}: \"true\"\nspec:\n  namespaces:\n  - from: default\n    to: operators\n  content:\n  - type: ManifestImage\n    manifestImage: {tag}\n"
    );
    apply(&harness, &harness.plane.kubeconfig(), &manifest);
    pending_reason(&harness, "plumbus", PendingReason::ManualApproval).await;
    let installed = approve_and_roll_out(&harness, "plumbus").await;
    let first_digest = installed.status.unwrap().resolved[0].digest.clone();

    // The tag moves to another bundle: the image string is the same, the digest is not.
    push(&harness, "plumbus/2.1.0", "stable").await;
    let waiting = wait(&harness, "plumbus", "the moved tag waiting", |install| {
        let status = install.status.as_ref();
        status.and_then(|s| s.pending.as_ref()).and_then(|p| p.reason) == Some(PendingReason::ManualApproval)
            && status.is_some_and(|s| s.resolved.first().is_some_and(|r| r.digest != first_digest))
    })
    .await;
    assert_eq!(waiting.spec.approval, Approval::Unapproved, "the approval of the old digest was revoked");
    let csv = harness.admin_kubectl(&["get", "csv", "-n", "operators", "-o", "name"], None);
    assert!(!text(&csv).contains("plumbus.v2.1.0"), "2.1.0 was not applied: {}", text(&csv));

    // Lifting Manual to slip the update through is not an editor's to do.
    let bob = install_editor(&harness, "bob").await;
    let lift = json!({"metadata": {"annotations": {MANUAL_APPROVAL_ANNOTATION: null}}});
    let _ = harness.kubectl(&bob, &["patch", "install", "plumbus", "--type", "merge", "-p", &lift.to_string()], None);
    let kept = installs(&harness).get("plumbus").await.unwrap().metadata.annotations.unwrap();
    assert_eq!(kept[MANUAL_APPROVAL_ANNOTATION], "true", "the webhook puts it back");

    assert!(harness
        .admin_kubectl(&["patch", "install", "plumbus", "--type", "merge", "-p", approve_patch()], None)
        .status
        .success());
    for _ in 0..100 {
        harness.roll_out("operators").await;
        let csv = harness.admin_kubectl(&["get", "csv", "-n", "operators", "-o", "name"], None);
        if text(&csv).contains("plumbus.v2.1.0") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the approved update was never applied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_with_nothing_pending_is_refused_and_forgeries_are_refused() {
    let harness = start("attack-forgery").await;
    let mallory = install_author(&harness, "mallory").await;
    // A creator annotation naming someone else is replaced by the real creator.
    let forged_creator = json!({"username": "kubernetes-admin", "groups": ["system:masters"]}).to_string();
    let manifest = raw_install("forged", &config_map("forged", "1"), "operators").replace(
        "metadata:\n  name: forged\n",
        &format!("metadata:\n  name: forged\n  annotations:\n    {CREATOR_ANNOTATION}: '{forged_creator}'\n"),
    );
    apply(&harness, &mallory, &manifest);
    let created = wait_state(&harness, "forged", InstallState::PendingApproval).await;
    let creator = created.metadata.annotations.clone().unwrap()[CREATOR_ANNOTATION].clone();
    assert!(creator.contains("\"username\":\"mallory\""), "{creator}");
    // Nor can it be rewritten later.
    let rewrite = json!({"metadata": {"annotations": {CREATOR_ANNOTATION: forged_creator}}});
    let patched =
        harness.kubectl(&mallory, &["patch", "install", "forged", "--type", "merge", "-p", &rewrite.to_string()], None);
    let after =
        installs(&harness).get("forged").await.unwrap().metadata.annotations.unwrap()[CREATOR_ANNOTATION].clone();
    assert_eq!(after, creator, "{}", text(&patched));

    // A forged status (an empty pending set beside an approval) is refused, even to system:masters.
    let forged_status = r#"{"status":{"pending":{"count":0,"permissions":[]}}}"#;
    let masters = harness.plane.user_kubeconfig("eve", &["system:masters"]);
    let refused = harness.kubectl(
        &masters,
        &["patch", "install", "forged", "--subresource", "status", "--type", "merge", "-p", forged_status],
        None,
    );
    assert!(text(&refused).contains("only the controller"), "{}", text(&refused));

    // Approving when nothing is pending would be a blank cheque for whatever comes next: refused.
    apply(&harness, &harness.plane.kubeconfig(), &raw_install("blank", &config_map("blank", "1"), "operators"));
    wait_state(&harness, "blank", InstallState::PendingApproval).await;
    assert!(harness
        .admin_kubectl(&["patch", "install", "blank", "--type", "merge", "-p", approve_patch()], None)
        .status
        .success());
    wait_state(&harness, "blank", InstallState::Installed).await;
    let unapprove = r#"{"spec":{"approval":"Unapproved"}}"#;
    assert!(harness
        .admin_kubectl(&["patch", "install", "blank", "--type", "merge", "-p", unapprove], None)
        .status
        .success());
    let refused = harness.admin_kubectl(&["patch", "install", "blank", "--type", "merge", "-p", approve_patch()], None);
    assert!(!refused.status.success());
    assert!(text(&refused).contains("no pending permissions to approve"), "{}", text(&refused));
    controller_healthy(&harness, "after-forgery").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_catalog_source_is_used_only_with_the_install_verb() {
    let harness = start("attack-catalog").await;
    let mallory = may(&harness, "mallory", "operators", &["create", "get", "list", "update", "patch"]).await;
    let operator = "apiVersion: operators.coreos.com/v2alpha1\nkind: Operator\nmetadata:\n  name: plumbus\nspec:\n  updates:\n    type: CatalogSource\n    catalogSource:\n      ref:\n        name: community\n        namespace: olm\n      package: plumbus\n      channel: stable\n      approval: Automatic\n";
    let refused = harness.kubectl(&mallory, &["apply", "-f", "-"], Some(operator));
    assert!(!refused.status.success());
    assert!(text(&refused).contains("install"), "{}", text(&refused));
    never_written(&harness, "operators", "plumbus");
    controller_healthy(&harness, "after-catalog").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_is_approved_or_applied_while_the_webhook_does_not_guard() {
    let mut harness = start("attack-webhook").await;
    let mallory = install_editor(&harness, "mallory").await;
    apply(&harness, &harness.plane.kubeconfig(), &raw_install("grab", &escalation("mallory"), "operators"));
    wait_state(&harness, "grab", InstallState::PendingApproval).await;

    // The webhook down: every write it guards fails closed.
    harness.stop_controllers();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    harness.plane.point_service("olmv2-system", "olmv2-webhook", dead).await.expect("Service pointed");
    let refused = harness.admin_kubectl(&["patch", "install", "grab", "--type", "merge", "-p", approve_patch()], None);
    assert!(text(&refused).contains("failed calling webhook"), "{}", text(&refused));
    let refused =
        harness.kubectl(&mallory, &["patch", "install", "grab", "--type", "merge", "-p", approve_patch()], None);
    assert!(!refused.status.success(), "{}", text(&refused));

    // The configurations removed (by someone holding that power) let an unchecked approval through the API server;
    // the controller finds its guard gone and voids it, granting and applying nothing.
    harness.start_controllers().await;
    wait(&harness, "grab", "seen again", |i| i.status.is_some()).await;
    for kind in
        ["validatingwebhookconfiguration/olmv2-install-approval", "mutatingwebhookconfiguration/olmv2-install-identity"]
    {
        let deleted = harness.admin_kubectl(&["delete", kind], None);
        assert!(deleted.status.success(), "{}", text(&deleted));
    }
    let approved =
        harness.kubectl(&mallory, &["patch", "install", "grab", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "unchecked, the API server lets it through: {}", text(&approved));
    // The condition says so only until the next pass (the void itself wakes one, which finds nothing approved): the
    // void stays, and the event of the transition says why.
    wait(&harness, "grab", "voided for want of a guard", |install| install.spec.approval == Approval::Unapproved).await;
    let event = harness.wait_event("default", "ApprovalWebhookUnavailable").await;
    let note = event.note.unwrap_or_default();
    assert!(note.contains("refusing to grant or apply while the approval webhook does not guard Installs"), "{note}");
    never_written(&harness, "clusterrolebindings", "mallory-is-admin");
    not_bound(&harness, "mallory").await;

    // Restarted, the controller writes its configurations again, and works.
    harness.stop_controllers();
    harness.start_controllers().await;
    let grab = installs(&harness).get("grab").await.unwrap();
    assert_eq!(grab.spec.approval, Approval::Unapproved);
    controller_healthy(&harness, "after-webhook").await;
    never_written(&harness, "clusterrolebindings", "mallory-is-admin");
    // The controller's own identity granted nothing for `grab`: its grants would be named after it.
    let granted = harness
        .audit_records()
        .into_iter()
        .filter(|r| r.acting_user() == CONTROLLER_USER && r.name.starts_with("olmv2-install-grab-") && r.code < 300);
    assert_eq!(granted.count(), 0);
}

/// A Role and its binding to `subject` (a Group), granting `verb` on ConfigMap `name`, beside that ConfigMap.
fn config_map_with_role(name: &str, verb: &str, subject: &str) -> String {
    format!(
        "{}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {name}-{verb}\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  resourceNames: [{name}]\n  verbs: [{verb}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: {name}-{verb}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {name}-{verb}\nsubjects:\n- apiGroup: rbac.authorization.k8s.io\n  kind: Group\n  name: {subject}\n",
        config_map(name, "v")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verbs_that_follow_from_a_granted_create_never_reach_a_role_of_the_content_unseen() {
    let harness = start("attack-follows").await;
    // Approved once: a ConfigMap, a Role reading it and its binding (create on all three granted in `operators`).
    let first = raw_install("widgets", &config_map_with_role("a", "get", "readers"), "operators");
    apply(&harness, &harness.plane.kubeconfig(), &first);
    wait_state(&harness, "widgets", InstallState::PendingApproval).await;
    let approved =
        harness.admin_kubectl(&["patch", "install", "widgets", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(&harness, "widgets", InstallState::Installed).await;
    let configmaps = Api::<ConfigMap>::namespaced(harness.admin.clone(), "operators");

    // Another ConfigMap, b, instead of a (the Role and binding as they were): the verbs on the new name follow from
    // the granted create, and it installs without a person.
    let content = |raw: String| json!({"spec": {"content": [{"type": "Raw", "raw": raw}]}}).to_string();
    let reader_of_a = config_map_with_role("a", "get", "readers").split_once("---\n").unwrap().1.to_owned();
    let renamed = content(format!("{}---\n{reader_of_a}", config_map("b", "v")));
    let patched = harness.admin_kubectl(&["patch", "install", "widgets", "--type", "merge", "-p", &renamed], None);
    assert!(patched.status.success(), "{}", text(&patched));
    wait(&harness, "widgets", "the renamed content applied", |install| {
        install.status.as_ref().and_then(|s| s.state) == Some(InstallState::Installed)
            && install.status.as_ref().is_some_and(|s| s.applied.iter().any(|a| a.name == "b"))
    })
    .await;
    assert!(configmaps.get_opt("b").await.unwrap().is_some());

    // Then a Role handing `update` on b, which the account holds only because it followed, to every authenticated
    // user: a person decides, seeing whom the binding binds.
    let mut handed = format!("{}---\n{reader_of_a}", config_map("b", "v"));
    handed.push_str("---\n");
    handed.push_str(config_map_with_role("b", "update", "system:authenticated").split_once("---\n").unwrap().1);
    let patched =
        harness.admin_kubectl(&["patch", "install", "widgets", "--type", "merge", "-p", &content(handed)], None);
    assert!(patched.status.success(), "{}", text(&patched));
    let waiting = wait(&harness, "widgets", "waiting for a person", |install| {
        install.status.as_ref().and_then(|s| s.state) == Some(InstallState::PendingApproval)
    })
    .await;
    let pending = waiting.status.unwrap().pending.unwrap();
    let shown = serde_json::to_string(&pending.bindings).unwrap();
    assert!(shown.contains("system:authenticated"), "the approver sees whom the binding binds: {shown}");
    assert!(
        pending.permissions.iter().any(|p| p.verbs.contains(&"update".to_owned()) && p.resource_names == ["b"]),
        "{:?}",
        pending.permissions
    );
    never_written(&harness, "rolebindings", "b-update");
    controller_healthy(&harness, "after-follows").await;
}
