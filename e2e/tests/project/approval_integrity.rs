//! What keeps an approval honest beyond the webhook's check of the approver: the webhook served with a certificate
//! cert-manager issued (and failing closed until its CA is injected), and an approval given while the controller is
//! computing a new pending set, which must never be taken as approving that set.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::support;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use olmv2::api::v2alpha1::{Approval, Install, InstallState};
use serde_json::{json, Value};
use support::emulator::kubectl::text;
use support::harness::Harness;
use support::installs::{approve_patch, install_editor, install_yaml, installs, wait, wait_state};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
/// A serving certificate issued for the webhook's Service as cert-manager would, mounted as its Secret would be:
/// `tls.crt`, `tls.key` and `ca.crt` in `<dir>/webhook-cert`.
fn mount_issued_certificate(options: &mut olmv2::runtime::ControllerOptions, dir: &std::path::Path) {
    let mounted = dir.join("webhook-cert");
    if !mounted.exists() {
        let issued = olmv2::webhook::configuration::generate("olmv2-webhook", "olmv2-system").unwrap();
        std::fs::create_dir_all(&mounted).unwrap();
        std::fs::write(mounted.join("tls.crt"), &issued.cert_pem).unwrap();
        std::fs::write(mounted.join("tls.key"), &issued.key_pem).unwrap();
        std::fs::write(mounted.join("ca.crt"), issued.ca_pem.unwrap()).unwrap();
    }
    options.webhook.cert_dir = Some(mounted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mounted_certificate_serves_the_webhook_once_cert_manager_injects_its_ca() {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let mut harness = Harness::start_configured(
        "install",
        "certs",
        &["operators"],
        Duration::from_secs(2),
        Box::new(mount_issued_certificate),
    )
    .await;
    let configurations = Api::<ValidatingWebhookConfiguration>::all(harness.admin.clone());
    let written = configurations.get("olmv2-install-approval").await.unwrap();
    let annotations = written.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations.get("cert-manager.io/inject-ca-from").map(String::as_str),
        Some("olmv2-system/olmv2-webhook")
    );
    let webhooks = written.webhooks.unwrap_or_default();
    assert_eq!(webhooks.len(), 2);
    assert!(webhooks.iter().all(|w| w.client_config.ca_bundle.is_none()), "the CA is left to cert-manager");

    // Until the CA is injected the API server cannot trust the webhook, and Installs fail closed.
    let raw = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tuning\ndata:\n  level: \"3\"\n";
    let install: Install = serde_json::from_value(
        json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "tuning"},
        "spec": {"namespaces": [{"from": "default", "to": "operators"}], "content": [{"type": "Raw", "raw": raw}]}}),
    )
    .unwrap();
    let refused = installs(&harness).create(&PostParams::default(), &install).await.unwrap_err();
    assert!(refused.to_string().contains("failed calling webhook"), "{refused}");

    // cert-manager's CA injector writes the CA into every webhook of the configuration.
    let ca = std::fs::read_to_string(harness.dir.join("webhook-cert/ca.crt")).unwrap();
    let bundle = olmv2::tls::ca_bundle(&ca);
    let injection: Vec<Value> = (0..webhooks.len())
        .map(|i| json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle}))
        .collect();
    let injected = harness.admin_kubectl(
        &[
            "patch",
            "validatingwebhookconfiguration",
            "olmv2-install-approval",
            "--type=json",
            "--field-manager=cert-manager-cainjector",
            "-p",
            &Value::from(injection).to_string(),
        ],
        None,
    );
    assert!(injected.status.success(), "{}", text(&injected));
    let identity = harness.admin_kubectl(
        &[
            "patch",
            "mutatingwebhookconfiguration",
            "olmv2-install-identity",
            "--type=json",
            "--field-manager=cert-manager-cainjector",
            "-p",
            &Value::from(
                (0..2)
                    .map(|i| json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": bundle}))
                    .collect::<Vec<_>>(),
            )
            .to_string(),
        ],
        None,
    );
    assert!(identity.status.success(), "{}", text(&identity));

    // kube-apiserver reads webhook configurations from its own watch of them: the injected CA is trusted a moment
    // after the write, not at once.
    let started = std::time::Instant::now();
    loop {
        match installs(&harness).create(&PostParams::default(), &install).await {
            Ok(_) => break,
            Err(error) if error.to_string().contains("certificate signed by unknown authority") => {
                assert!(started.elapsed() < Duration::from_secs(10), "the injected CA was never trusted: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("{error}"),
        }
    }
    wait_state(&harness, "tuning", InstallState::PendingApproval).await;
    let bob = install_editor(&harness, "bob").await;
    let denied = harness.kubectl(&bob, &["patch", "install", "tuning", "--type", "merge", "-p", approve_patch()], None);
    assert!(text(&denied).contains("\"bob\" may not approve Install tuning"), "{}", text(&denied));

    // A restarted controller writes its configuration again and leaves the injected CA where it is.
    harness.stop_controllers();
    harness.start_controllers().await;
    let rewritten = configurations.get("olmv2-install-approval").await.unwrap();
    assert!(rewritten.webhooks.unwrap().iter().all(|w| w.client_config.ca_bundle.is_some()), "the CA stays");
    let approved =
        harness.admin_kubectl(&["patch", "install", "tuning", "--type", "merge", "-p", approve_patch()], None);
    assert!(approved.status.success(), "{}", text(&approved));
    wait_state(&harness, "tuning", InstallState::Installed).await;
}

/// A TCP proxy in front of the registry that can hold what clients send, to stop the controller in the middle of a
/// pull at a moment the test chooses.
struct HoldingProxy {
    hold: tokio::sync::watch::Sender<bool>,
    held: Arc<AtomicUsize>,
}

impl HoldingProxy {
    fn start(listener: TcpListener, upstream: String) -> Self {
        let (hold, holding) = tokio::sync::watch::channel(false);
        let held = Arc::new(AtomicUsize::new(0));
        let counter = held.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(&upstream).await.unwrap();
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                tokio::spawn(async move { tokio::io::copy(&mut server_read, &mut client_write).await });
                let (mut holding, counter) = (holding.clone(), counter.clone());
                tokio::spawn(async move {
                    let mut buffer = vec![0; 16 * 1024];
                    loop {
                        let read = match client_read.read(&mut buffer).await {
                            Ok(0) | Err(_) => break,
                            Ok(read) => read,
                        };
                        if *holding.borrow() {
                            counter.fetch_add(1, Ordering::SeqCst);
                            let _ = holding.wait_for(|hold| !hold).await;
                        }
                        if server_write.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self { hold, held }
    }

    /// Holds what clients send from now on.
    fn hold(&self) {
        self.hold.send_replace(true);
    }

    /// Waits until something is held.
    async fn wait_until_holding(&self) {
        for _ in 0..200 {
            if self.held.load(Ordering::SeqCst) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("no request reached the registry");
    }

    fn release(&self) {
        self.hold.send_replace(false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_given_while_a_new_pending_set_is_computed_does_not_approve_it() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_host = listener.local_addr().unwrap().to_string();
    let insecure = proxy_host.clone();
    let harness = Harness::start_configured(
        "install",
        "race",
        &["operators"],
        Duration::from_secs(2),
        Box::new(move |options, _| options.registry.insecure_registries.push(insecure.clone())),
    )
    .await;
    let proxy = HoldingProxy::start(listener, harness.registry.host.clone());
    harness.push_bundle("plumbus/2.0.0-alpha", "plumbus-bundle", "latest").await;
    let image = format!("{proxy_host}/plumbus-bundle:latest");
    let body = serde_yaml_ng::from_str::<Value>(&install_yaml("plumbus", &image)).unwrap();
    installs(&harness).create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
    let first = wait_state(&harness, "plumbus", InstallState::PendingApproval).await;
    let judged = first.status.unwrap().pending.unwrap();

    // The controller's next pass stops in the middle of its pull, having read the Install unapproved; meanwhile the
    // tag moves to a version that needs more (pushed past the proxy, so no pass can see it before it is held). Then
    // the admin approves what the status shows: the old version's pending set.
    proxy.hold();
    harness.push_bundle("plumbus/2.1.0", "plumbus-bundle", "latest").await;
    proxy.wait_until_holding().await;
    let approve = json!({"spec": {"approval": "Approved"}});
    installs(&harness).patch("plumbus", &PatchParams::default(), &Patch::Merge(&approve)).await.unwrap();
    proxy.release();

    let waiting = wait(&harness, "plumbus", "asking approval of the new pending set", |i: &Install| {
        i.spec.approval == Approval::Unapproved
            && i.status.as_ref().and_then(|s| s.pending.as_ref()).is_some_and(|p| p.permissions != judged.permissions)
    })
    .await;
    assert_eq!(waiting.status.unwrap().state, Some(InstallState::PendingApproval));
    // Nothing was applied on the strength of the approval given for the old set, and it stays so.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = installs(&harness).get("plumbus").await.unwrap();
    assert_eq!(later.spec.approval, Approval::Unapproved);
    assert!(later.status.unwrap().applied.is_empty());
    let deployments = Api::<Deployment>::namespaced(harness.admin.clone(), "operators");
    assert!(deployments.get_opt("plumbus-operator").await.unwrap().is_none());
}
