//! The generated certificates of the webhook (and so of the Installed API, the same code) renewed while requests
//! flow, on both backends: with a CA of 60 s and serving certificates of 20 s, the webhook presents three or more
//! certificates in turn without a restart, a second CA joins the trust bundle beside the first (both in the webhook
//! configurations' `caBundle`) before any certificate it signed is served, every admission call through the API
//! server succeeds meanwhile, and the expiry metric follows the certificate served.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use olmv2::api::v2alpha1::Install;
use olmv2::tls::rotation::Lifetimes;
use tokio_rustls::rustls;

use crate::support::harness::Harness;

/// The certificate the server at `address` presents to a client trusting only `roots` (PEM), DER; none when the
/// handshake fails (not trusted, or not answering).
async fn presented(address: std::net::SocketAddr, roots: &str) -> Option<Vec<u8>> {
    use rustls::pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(roots.as_bytes()) {
        store.add(certificate.ok()?).ok()?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(store)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(address).await.ok()?;
    let name = rustls::pki_types::ServerName::try_from("olmv2-webhook.olmv2-system.svc").ok()?;
    let stream = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.ok()?;
    Some(stream.get_ref().1.peer_certificates()?.first()?.to_vec())
}

fn text(secret: &Secret, key: &str) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()[key].0.clone()).unwrap()
}

fn der(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generated_certificates_are_renewed_and_a_new_ca_trusted_beside_the_old_without_a_failed_call() {
    let configure = Box::new(|options: &mut olmv2::runtime::ControllerOptions, _: &std::path::Path| {
        options.certificates = Lifetimes { ca: Duration::from_secs(60), serving: Duration::from_secs(20) };
    });
    let harness =
        Harness::start_configured("certificates", "rotation", &["ops"], Duration::from_secs(30), configure).await;
    let address = harness.webhook_address().unwrap();
    let secrets = Api::<Secret>::namespaced(harness.admin.clone(), "olmv2-system");
    let installs = Api::<Install>::all(harness.admin.clone());
    let probe: Install = serde_json::from_value(serde_json::json!({
        "apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "probe"},
        "spec": {"content": [{"type": "Raw", "raw": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: probe}\n"}]}}))
    .unwrap();
    let dry_run = PostParams { dry_run: true, ..PostParams::default() };

    let started = Instant::now();
    let (mut served, mut cas, mut failures) = (BTreeSet::new(), BTreeSet::new(), Vec::new());
    let mut largest_bundle = 0;
    let mut by_second_ca = false;
    while !by_second_ca {
        assert!(started.elapsed() < Duration::from_secs(100), "no certificate of a second CA served: {served:?}");
        // An admission call through the API server, which must trust whatever the webhook presents.
        if let Err(error) = installs.create(&dry_run, &probe).await {
            failures.push(format!("{:.1?}: {error}", started.elapsed()));
        }
        let secret = secrets.get("olmv2-webhook-generated-tls").await.unwrap();
        let bundle = olmv2::tls::pem_certificates(&text(&secret, "ca.crt"));
        largest_bundle = largest_bundle.max(bundle.len());
        cas.insert(bundle[0].clone());
        // What the webhook presents, to a client trusting the bundle the Secret holds now.
        match presented(address, &bundle.concat()).await {
            Some(leaf) => {
                served.insert(leaf.clone());
                // Signed by a CA that came after the first, and trusted by it alone.
                by_second_ca = cas.len() >= 2 && presented(address, &bundle[0]).await.as_ref() == Some(&leaf);
            }
            None => failures
                .push(format!("{:.1?}: the webhook's certificate is not trusted by the bundle", started.elapsed())),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(served.len() >= 3, "renewed at least twice without a restart: {} served", served.len());
    assert_eq!(largest_bundle, 2, "the new CA trusted beside the old");

    // The webhook configurations trust what the Secret holds, the webhook presents its certificate, and the metric
    // tells when that expires (looked at until they agree: a renewal may be between its steps).
    let configurations = Api::<ValidatingWebhookConfiguration>::all(harness.admin.clone());
    let labels = olmv2::metrics::CertificateLabels { service: "olmv2-webhook".into(), certificate: "serving" };
    let mut last = String::new();
    for _ in 0..50 {
        let secret = secrets.get("olmv2-webhook-generated-tls").await.unwrap();
        let configuration = configurations.get(olmv2::webhook::configuration::CONFIGURATION_NAME).await.unwrap();
        let trusted = configuration.webhooks.unwrap()[0].client_config.ca_bundle.clone().unwrap();
        let trusted = String::from_utf8(trusted.0).unwrap();
        let (_, expires) = olmv2::tls::validity(&text(&secret, "tls.crt")).unwrap();
        let metric = harness.metrics().unwrap().certificate_expiry.get_or_create(&labels).get();
        let shown = presented(address, &text(&secret, "ca.crt")).await;
        if trusted == text(&secret, "ca.crt") && metric == expires && shown == Some(der(&text(&secret, "tls.crt"))) {
            return;
        }
        last = format!(
            "caBundle as the Secret: {}, metric {metric} vs {expires}, presented as the Secret: {}",
            trusted == text(&secret, "ca.crt"),
            shown == Some(der(&text(&secret, "tls.crt")))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never agreed: {last}");
}
