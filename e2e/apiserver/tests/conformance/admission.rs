//! Admission webhooks called over HTTPS: matching by rules and selectors, the AdmissionReview the webhook gets
//! (requester, operation, objects), denials as kubectl shows them, mutation by JSON patch, failure policies and
//! timeouts.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::sync::{Arc, Mutex};

use crate::support;
use axum::body::Bytes;
use axum::extract::State;
use kube_emulator::backend::Backend;
use kube_emulator::ControlPlane;
use serde_json::{json, Value};
use support::workloads::admission_answer;
use support::{get, post, start, CMS};

type Seen = Arc<Mutex<Vec<Value>>>;

/// Denies objects labelled `deny=true`, with a message.
async fn validate(State(seen): State<Seen>, body: Bytes) -> axum::response::Response {
    let review: Value = serde_json::from_slice(&body).expect("AdmissionReview");
    seen.lock().expect("lock").push(review.clone());
    let object = if review["request"]["object"].is_null() {
        &review["request"]["oldObject"]
    } else {
        &review["request"]["object"]
    };
    if object["metadata"]["labels"]["deny"] == "true" {
        return admission_answer(
            &review,
            json!({"allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "objects labelled deny=true are refused"}}),
        );
    }
    admission_answer(&review, json!({"allowed": true}))
}

/// Adds the label `mutated=yes`.
async fn mutate(State(seen): State<Seen>, body: Bytes) -> axum::response::Response {
    use base64::Engine as _;
    let review: Value = serde_json::from_slice(&body).expect("AdmissionReview");
    seen.lock().expect("lock").push(review.clone());
    let patch = if review["request"]["object"]["metadata"]["labels"].is_object() {
        json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
    } else {
        json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
    };
    admission_answer(
        &review,
        json!({"allowed": true, "patchType": "JSONPatch", "patch": base64::engine::general_purpose::STANDARD.encode(patch.to_string())}),
    )
}

async fn slow(body: Bytes) -> axum::response::Response {
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let review: Value = serde_json::from_slice(&body).expect("AdmissionReview");
    admission_answer(&review, json!({"allowed": true}))
}

async fn webhook_backend(plane: &ControlPlane) -> (Backend, Seen) {
    let seen: Seen = Arc::default();
    let router = axum::Router::new()
        .route("/validate", axum::routing::post(validate))
        .route("/mutate", axum::routing::post(mutate))
        .route("/slow", axum::routing::post(slow))
        .with_state(seen.clone());
    let backend = Backend::start(router, &["webhooks.default.svc"], None).await.expect("webhook server");
    plane.api.endpoints.set("default", "webhooks", backend.address);
    (backend, seen)
}

fn webhook(name: &str, path: &str, ca_bundle: &str, extra: Value) -> Value {
    let mut webhook = json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"service": {"namespace": "default", "name": "webhooks", "path": path}, "caBundle": ca_bundle},
        "rules": [{"operations": ["CREATE", "UPDATE", "DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]});
    if let (Some(target), Some(extra)) = (webhook.as_object_mut(), extra.as_object()) {
        target.extend(extra.clone());
    }
    webhook
}

async fn configure(admin: &kube::Client, kind: &str, name: &str, webhooks: Vec<Value>) {
    let plural = format!("{}s", kind.to_lowercase());
    let (code, body) = post(admin, &format!("/apis/admissionregistration.k8s.io/v1/{plural}"), &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": webhooks})).await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test]
async fn a_validating_webhook_sees_the_requester_and_can_deny() {
    let (plane, admin) = start().await;
    let (backend, seen) = webhook_backend(&plane).await;
    configure(
        &admin,
        "ValidatingWebhookConfiguration",
        "policy",
        vec![webhook("deny.example.com", "/validate", &backend.ca_bundle(), json!({}))],
    )
    .await;

    let alice = ControlPlane::client_for(&plane.user_kubeconfig("alice", &["system:masters"])).await.expect("client");
    let (code, _) = post(&alice, CMS, &json!({"metadata": {"name": "fine"}})).await;
    assert_eq!(code, 201);
    let review = seen.lock().expect("lock").last().cloned().expect("the webhook was called");
    let request = &review["request"];
    assert_eq!(
        (request["operation"].clone(), request["name"].clone(), request["namespace"].clone()),
        (json!("CREATE"), json!("fine"), json!("default"))
    );
    assert_eq!(request["userInfo"], json!({"username": "alice", "groups": ["system:masters", "system:authenticated"]}));
    assert_eq!(request["resource"], json!({"group": "", "version": "v1", "resource": "configmaps"}));
    assert_eq!(request["kind"], json!({"group": "", "version": "v1", "kind": "ConfigMap"}));
    assert!(request["oldObject"].is_null());

    let (code, status) = post(&alice, CMS, &json!({"metadata": {"name": "refused", "labels": {"deny": "true"}}})).await;
    assert_eq!(code, 403);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(
        status["message"],
        "admission webhook \"deny.example.com\" denied the request: objects labelled deny=true are refused"
    );
    assert_eq!(get(&admin, &format!("{CMS}/refused")).await.0, 404);

    let (code, _) = support::patch(
        &alice,
        &format!("{CMS}/fine"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"deny":"true"}}}"#,
    )
    .await;
    assert_eq!(code, 403, "updates are reviewed too");
    let update = seen.lock().expect("lock").last().cloned().expect("called");
    assert_eq!(
        (update["request"]["operation"].clone(), update["request"]["oldObject"]["metadata"]["name"].clone()),
        (json!("UPDATE"), json!("fine"))
    );
    assert_eq!(support::delete(&alice, &format!("{CMS}/fine"), &json!({})).await.0, 200);
    assert_eq!(seen.lock().expect("lock").last().expect("called")["request"]["operation"], "DELETE");
    assert_eq!(
        post(
            &alice,
            "/api/v1/namespaces/default/secrets",
            &json!({"metadata": {"name": "s", "labels": {"deny": "true"}}})
        )
        .await
        .0,
        201,
        "secrets are not in the rules"
    );
}

#[tokio::test]
async fn selectors_decide_which_objects_a_webhook_sees() {
    let (plane, admin) = start().await;
    let (backend, seen) = webhook_backend(&plane).await;
    post(&admin, "/api/v1/namespaces", &json!({"metadata": {"name": "watched", "labels": {"policy": "on"}}})).await;
    post(&admin, "/api/v1/namespaces", &json!({"metadata": {"name": "free"}})).await;
    configure(&admin, "ValidatingWebhookConfiguration", "policy", vec![webhook("deny.example.com", "/validate", &backend.ca_bundle(),
        json!({"namespaceSelector": {"matchLabels": {"policy": "on"}}, "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}}))]).await;
    let denied = json!({"metadata": {"name": "x", "labels": {"deny": "true"}}});
    assert_eq!(post(&admin, "/api/v1/namespaces/watched/configmaps", &denied).await.0, 403);
    assert_eq!(post(&admin, "/api/v1/namespaces/free/configmaps", &denied).await.0, 201, "namespace not selected");
    let skipped = json!({"metadata": {"name": "y", "labels": {"deny": "true", "skip": ""}}});
    assert_eq!(post(&admin, "/api/v1/namespaces/watched/configmaps", &skipped).await.0, 201, "object not selected");
    // (kube-controller-manager's `kube-root-ca.crt` in the selected namespace may be reviewed too, as in a cluster)
    let reviewed: Vec<Value> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|review| review["request"]["name"].clone())
        .filter(|name| name != "kube-root-ca.crt")
        .collect();
    assert_eq!(reviewed, [json!("x")]);
}

#[tokio::test]
async fn a_mutating_webhook_patches_before_validation() {
    let (plane, admin) = start().await;
    let (backend, seen) = webhook_backend(&plane).await;
    configure(
        &admin,
        "MutatingWebhookConfiguration",
        "defaults",
        vec![webhook("label.example.com", "/mutate", &backend.ca_bundle(), json!({}))],
    )
    .await;
    configure(
        &admin,
        "ValidatingWebhookConfiguration",
        "policy",
        vec![webhook("deny.example.com", "/validate", &backend.ca_bundle(), json!({}))],
    )
    .await;
    let (code, created) = post(&admin, CMS, &json!({"metadata": {"name": "plain"}})).await;
    assert_eq!(code, 201);
    assert_eq!(created["metadata"]["labels"], json!({"mutated": "yes"}));
    let calls = seen.lock().expect("lock").clone();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1]["request"]["object"]["metadata"]["labels"],
        json!({"mutated": "yes"}),
        "validation sees the mutated object"
    );
}

#[tokio::test]
async fn failure_policies_and_timeouts() {
    let (plane, admin) = start().await;
    let (backend, _) = webhook_backend(&plane).await;
    let missing = json!({"clientConfig": {"service": {"namespace": "default", "name": "nowhere", "path": "/validate"}, "caBundle": backend.ca_bundle()}});
    configure(
        &admin,
        "ValidatingWebhookConfiguration",
        "broken",
        vec![webhook("broken.example.com", "/validate", &backend.ca_bundle(), missing.clone())],
    )
    .await;
    let (code, status) = post(&admin, CMS, &json!({"metadata": {"name": "a"}})).await;
    assert_eq!((code, status["reason"].clone()), (500, json!("InternalError")));
    assert_eq!(
        status["message"],
        "Internal error occurred: failed calling webhook \"broken.example.com\": service \"nowhere\" not found"
    );
    support::delete(&admin, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/broken", &json!({}))
        .await;

    let mut ignored = missing;
    ignored["failurePolicy"] = json!("Ignore");
    configure(
        &admin,
        "ValidatingWebhookConfiguration",
        "ignored",
        vec![webhook("ignored.example.com", "/validate", &backend.ca_bundle(), ignored)],
    )
    .await;
    assert_eq!(post(&admin, CMS, &json!({"metadata": {"name": "b"}})).await.0, 201, "Ignore lets the request through");
    support::delete(
        &admin,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/ignored",
        &json!({}),
    )
    .await;

    configure(
        &admin,
        "ValidatingWebhookConfiguration",
        "slow",
        vec![webhook("slow.example.com", "/slow", &backend.ca_bundle(), json!({"timeoutSeconds": 1}))],
    )
    .await;
    let (code, status) = post(&admin, CMS, &json!({"metadata": {"name": "c"}})).await;
    assert_eq!(code, 500);
    assert!(status["message"].as_str().expect("message").ends_with("context deadline exceeded"), "{status}");
    support::delete(&admin, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/slow", &json!({}))
        .await;

    let other_ca = Backend::start(axum::Router::new(), &["x"], None).await.expect("backend");
    configure(
        &admin,
        "ValidatingWebhookConfiguration",
        "untrusted",
        vec![webhook("untrusted.example.com", "/validate", &other_ca.ca_bundle(), json!({}))],
    )
    .await;
    let (code, status) = post(&admin, CMS, &json!({"metadata": {"name": "d"}})).await;
    assert_eq!(code, 500, "the caBundle does not trust the webhook's certificate: {status}");
}
