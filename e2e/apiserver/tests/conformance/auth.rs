//! Authentication, RBAC authorization, impersonation, the review kinds, escalation prevention and the audit log,
//! each allowance and denial with kube-apiserver's status and words.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use kube_emulator::ControlPlane;
use serde_json::{json, Value};
use support::{call, get, post, start};

async fn as_user(plane: &ControlPlane, name: &str, groups: &[&str]) -> kube::Client {
    ControlPlane::client_for(&plane.user_kubeconfig(name, groups)).await.expect("client")
}

async fn with_headers(
    client: &kube::Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Value) {
    let mut request = http::Request::builder().method(method).uri(path).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client
        .send(request.body(kube::client::Body::from(body.as_bytes().to_vec())).expect("request"))
        .await
        .expect("sent");
    let code = response.status().as_u16();
    use http_body_util::BodyExt;
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn bind(admin: &kube::Client, namespace: Option<&str>, name: &str, role_kind: &str, role: &str, subject: Value) {
    let (path, kind) = match namespace {
        Some(ns) => (format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"), "RoleBinding"),
        None => ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".to_owned(), "ClusterRoleBinding"),
    };
    let (code, body) = post(
        admin,
        &path,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role}, "subjects": [subject]}),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

async fn role(admin: &kube::Client, namespace: Option<&str>, name: &str, rules: Value) {
    let (path, kind) = match namespace {
        Some(ns) => (format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"), "Role"),
        None => ("/apis/rbac.authorization.k8s.io/v1/clusterroles".to_owned(), "ClusterRole"),
    };
    let (code, body) = post(admin, &path, &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "rules": rules})).await;
    assert_eq!(code, 201, "{body}");
}

fn user(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name})
}

#[tokio::test]
async fn who_a_request_is_from() {
    let (plane, admin) = start().await;
    let alice = as_user(&plane, "alice", &["developers"]).await;
    let (code, review) = post(
        &alice,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "alice", "groups": ["developers", "system:authenticated"]})
    );
    assert_eq!(get(&alice, "/apis").await.0, 200, "discovery is for every authenticated user");

    let bad = ControlPlane::client_for(&plane.token_kubeconfig("not-a-token")).await.expect("client");
    let (code, status) = get(&bad, "/api/v1/namespaces").await;
    assert_eq!(
        (code, status["reason"].clone(), status["message"].clone()),
        (401, json!("Unauthorized"), json!("Unauthorized"))
    );

    let anonymous = kube::Client::try_from({
        let mut config = kube::Config::new(plane.url.parse().expect("url"));
        config.root_cert = Some(vec![pem_der(&plane.ca_pem)]);
        config
    })
    .expect("client");
    assert_eq!(get(&anonymous, "/version").await.0, 200, "public info");
    let (code, status) = get(&anonymous, "/apis").await;
    assert_eq!(
        (code, status["message"].clone()),
        (403, json!("forbidden: User \"system:anonymous\" cannot get path \"/apis\""))
    );

    post(&admin, "/api/v1/namespaces/default/serviceaccounts", &json!({"metadata": {"name": "robot"}})).await;
    let (code, issued) = post(
        &admin,
        "/api/v1/namespaces/default/serviceaccounts/robot/token",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}),
    )
    .await;
    assert_eq!(code, 201, "{issued}");
    let token = issued["status"]["token"].as_str().expect("token");
    let robot = ControlPlane::client_for(&plane.token_kubeconfig(token)).await.expect("client");
    let (_, review) = post(
        &robot,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await;
    assert_eq!(review["status"]["userInfo"]["username"], "system:serviceaccount:default:robot");
    assert_eq!(
        review["status"]["userInfo"]["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"])
    );
    let (_, reviewed) = post(
        &admin,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}),
    )
    .await;
    assert_eq!(reviewed["status"]["authenticated"], true);
    support::delete(&admin, "/api/v1/namespaces/default/serviceaccounts/robot", &json!({})).await;
    assert_eq!(get(&robot, "/apis").await.0, 401, "a deleted account's token no longer authenticates");
}

fn pem_der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD.decode(body).expect("PEM")
}

#[tokio::test]
async fn rbac_allows_what_bindings_grant_and_nothing_else() {
    let (plane, admin) = start().await;
    post(&admin, "/api/v1/namespaces", &json!({"metadata": {"name": "team"}})).await;
    post(&admin, "/api/v1/namespaces/team/configmaps", &json!({"metadata": {"name": "public"}})).await;
    post(&admin, "/api/v1/namespaces/team/configmaps", &json!({"metadata": {"name": "private"}})).await;
    let alice = as_user(&plane, "alice", &[]).await;
    let (code, status) = get(&alice, "/api/v1/namespaces/team/configmaps").await;
    assert_eq!(code, 403);
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["message"], "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\"");
    assert_eq!(status["details"], json!({"kind": "configmaps"}));

    role(
        &admin,
        Some("team"),
        "one-configmap",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["public"], "verbs": ["get"]}]),
    )
    .await;
    bind(&admin, Some("team"), "alice-one", "Role", "one-configmap", user("alice")).await;
    assert_eq!(get(&alice, "/api/v1/namespaces/team/configmaps/public").await.0, 200);
    let (code, status) = get(&alice, "/api/v1/namespaces/team/configmaps/private").await;
    assert_eq!((code, status["message"].clone()), (403, json!("configmaps \"private\" is forbidden: User \"alice\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team\"")));
    assert_eq!(get(&alice, "/api/v1/namespaces/team/configmaps").await.0, 403, "a named grant does not allow list");

    bind(&admin, Some("team"), "alice-view", "ClusterRole", "view", user("alice")).await;
    assert_eq!(get(&alice, "/api/v1/namespaces/team/configmaps").await.0, 200, "view, bound in the namespace");
    assert_eq!(get(&alice, "/api/v1/namespaces/default/configmaps").await.0, 403, "only in that namespace");
    assert_eq!(get(&alice, "/api/v1/namespaces/team/secrets").await.0, 403, "view does not read secrets");

    role(&admin, None, "operator-status", json!([{"apiGroups": ["apps"], "resources": ["*/status"], "verbs": ["*"]}, {"nonResourceURLs": ["/metrics/*"], "verbs": ["get"]}])).await;
    bind(&admin, None, "alice-status", "ClusterRole", "operator-status", user("alice")).await;
    let merge = "application/merge-patch+json";
    let (code, status) =
        support::patch(&alice, "/apis/apps/v1/namespaces/team/deployments/web/status", merge, "{}").await;
    assert_eq!(code, 404, "allowed through */status, then not found: {status}");
    assert_eq!(
        support::patch(&alice, "/apis/apps/v1/namespaces/team/deployments/web", merge, "{}").await.0,
        403,
        "the resource itself is not granted"
    );

    // An aggregated ClusterRole picks up a labelled role.
    role(&admin, None, "widgets-view", json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}])).await;
    support::call(
        &admin,
        "PATCH",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/widgets-view",
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"rbac.authorization.k8s.io/aggregate-to-view":"true"}}}"#,
    )
    .await;
    support::eventually("view aggregates the new role", || async {
        get(&alice, "/api/v1/namespaces/team/secrets").await.0 == 200
    })
    .await;
}

#[tokio::test]
async fn a_namespace_admin_administers_only_its_namespace() {
    let (plane, admin) = start().await;
    let kubeconfig = plane.namespace_admin_kubeconfig("team").await.expect("namespace admin");
    let team_admin = ControlPlane::client_for(&kubeconfig).await.expect("client");
    support::eventually("admin aggregated", || async {
        post(&team_admin, "/api/v1/namespaces/team/configmaps", &json!({"metadata": {"name": "x"}})).await.0 == 201
    })
    .await;
    let (code, _) =
        post(&team_admin, "/api/v1/namespaces/default/configmaps", &json!({"metadata": {"name": "x"}})).await;
    assert_eq!(code, 403);
    let (code, _) = get(&team_admin, "/api/v1/namespaces").await;
    assert_eq!(code, 403);
    drop(admin);
}

#[tokio::test]
async fn impersonation_needs_the_impersonate_verb() {
    let (plane, admin) = start().await;
    let (code, status) =
        with_headers(&admin, "GET", "/api/v1/namespaces/default/configmaps", &[("Impersonate-User", "bob")], "").await;
    assert_eq!((code, status["message"].clone()), (403, json!("configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"")), "the admin acts as bob");
    let alice = as_user(&plane, "alice", &[]).await;
    let (code, status) =
        with_headers(&alice, "GET", "/api/v1/namespaces/default/configmaps", &[("Impersonate-User", "bob")], "").await;
    assert_eq!(code, 403);
    assert_eq!(status["message"], "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope");
    role(
        &admin,
        None,
        "impersonate-bob",
        json!([{"apiGroups": [""], "resources": ["users"], "resourceNames": ["bob"], "verbs": ["impersonate"]}]),
    )
    .await;
    bind(&admin, None, "alice-as-bob", "ClusterRole", "impersonate-bob", user("alice")).await;
    bind(&admin, None, "bob-views", "ClusterRole", "view", user("bob")).await;
    support::eventually("view aggregated", || async {
        with_headers(&alice, "GET", "/api/v1/namespaces/default/configmaps", &[("Impersonate-User", "bob")], "").await.0
            == 200
    })
    .await;
    let (code, status) = with_headers(
        &alice,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[("Impersonate-User", "bob"), ("Impersonate-Group", "system:masters")],
        "",
    )
    .await;
    assert_eq!((code, status["message"].clone()), (403, json!("groups \"system:masters\" is forbidden: User \"alice\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope")));
    let (code, _) = with_headers(
        &alice,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[("Impersonate-User", "system:serviceaccount:default:default")],
        "",
    )
    .await;
    assert_eq!(code, 403, "impersonating a service account needs impersonate on serviceaccounts");

    with_headers(
        &admin,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Impersonate-User", "carol"), ("Impersonate-Group", "system:masters")],
        &json!({"metadata": {"name": "by-carol"}}).to_string(),
    )
    .await;
    let record = plane
        .api
        .audit
        .records()
        .into_iter()
        .find(|r| r.verb == "create" && r.resource == "configmaps")
        .expect("audited");
    assert_eq!(
        (record.user.as_str(), record.impersonated_user.as_deref(), record.acting_user(), record.code),
        ("kubernetes-admin", Some("carol"), "carol", 201)
    );
    let denied = plane
        .api
        .audit
        .records()
        .into_iter()
        .find(|r| r.user == "alice" && r.code == 403)
        .expect("denials are audited");
    assert_eq!(denied.verb, "list");
}

#[tokio::test]
async fn access_reviews_answer_from_rbac() {
    let (plane, admin) = start().await;
    role(
        &admin,
        Some("default"),
        "reader",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
    )
    .await;
    bind(&admin, Some("default"), "alice-reads", "Role", "reader", user("alice")).await;
    let review = |verb: &str, namespace: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "groups": ["system:authenticated"], "resourceAttributes": {"namespace": namespace, "verb": verb, "resource": "configmaps"}}})
    };
    let (code, allowed) =
        post(&admin, "/apis/authorization.k8s.io/v1/subjectaccessreviews", &review("get", "default")).await;
    assert_eq!(code, 201);
    assert_eq!(
        allowed["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"alice-reads/default\" of Role \"reader\" to User \"alice\""})
    );
    let (_, denied) =
        post(&admin, "/apis/authorization.k8s.io/v1/subjectaccessreviews", &review("delete", "default")).await;
    assert_eq!(denied["status"], json!({"allowed": false}));
    let (code, status) = post(
        &admin,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        &json!({"spec": {"resourceAttributes": {"verb": "get"}}}),
    )
    .await;
    assert_eq!((code, status["reason"].clone()), (422, json!("Invalid")));
    let (code, local) = post(
        &admin,
        "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews",
        &review("list", "default"),
    )
    .await;
    assert_eq!((code, local["status"]["allowed"].clone()), (201, json!(true)));
    let (code, _) = post(
        &admin,
        "/apis/authorization.k8s.io/v1/namespaces/other/localsubjectaccessreviews",
        &review("list", "default"),
    )
    .await;
    assert_eq!(code, 400);

    let alice = as_user(&plane, "alice", &[]).await;
    let (code, status) =
        post(&alice, "/apis/authorization.k8s.io/v1/subjectaccessreviews", &review("get", "default")).await;
    assert_eq!((code, status["message"].clone()), (403, json!("subjectaccessreviews.authorization.k8s.io is forbidden: User \"alice\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope")));
    let (_, mine) = post(&alice, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "configmaps"}}})).await;
    assert_eq!(mine["status"]["allowed"], true);
    let (_, rules) = post(&alice, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}})).await;
    assert!(rules["status"]["resourceRules"]
        .as_array()
        .expect("rules")
        .contains(&json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]})));
    assert!(rules["status"]["nonResourceRules"]
        .as_array()
        .expect("rules")
        .iter()
        .any(|r| r["nonResourceURLs"].as_array().is_some_and(|u| u.contains(&json!("/apis")))));
    assert_eq!(rules["status"]["incomplete"], false);
}

#[tokio::test]
async fn roles_and_bindings_cannot_grant_what_the_writer_does_not_hold() {
    let (plane, admin) = start().await;
    role(&admin, Some("default"), "rbac-writer", json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}])).await;
    bind(&admin, Some("default"), "alice-rbac", "Role", "rbac-writer", user("alice")).await;
    let alice = as_user(&plane, "alice", &[]).await;
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let secret_reader = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "secret-reader"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]});
    let (code, status) = post(&alice, roles, &secret_reader).await;
    assert_eq!(code, 403);
    assert_eq!(status["message"], "roles.rbac.authorization.k8s.io \"secret-reader\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}");
    let (code, _) = post(&alice, roles, &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "configmap-getter"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})).await;
    assert_eq!(code, 201, "a role within what alice holds");

    role(&admin, Some("default"), "secret-reader", secret_reader["rules"].clone()).await;
    let binding = |role: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": format!("bob-{role}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}, "subjects": [user("bob")]})
    };
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let (code, status) = post(&alice, bindings, &binding("secret-reader")).await;
    assert_eq!(code, 403);
    assert!(
        status["message"]
            .as_str()
            .expect("message")
            .starts_with("rolebindings.rbac.authorization.k8s.io \"bob-secret-reader\" is forbidden: user \"alice\""),
        "{status}"
    );
    assert_eq!(post(&alice, bindings, &binding("configmap-getter")).await.0, 201, "binding a role alice covers");

    role(&admin, Some("default"), "may-bind-and-escalate", json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "resourceNames": ["secret-reader"], "verbs": ["bind", "escalate"]}])).await;
    bind(&admin, Some("default"), "alice-binds", "Role", "may-bind-and-escalate", user("alice")).await;
    assert_eq!(post(&alice, bindings, &binding("secret-reader")).await.0, 201, "bind on the role");
    let mut wider = secret_reader.clone();
    wider["rules"][0]["verbs"] = json!(["get", "list", "watch"]);
    let (code, current) = get(&admin, &format!("{roles}/secret-reader")).await;
    assert_eq!(code, 200);
    wider["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let (code, body) =
        call(&alice, "PUT", &format!("{roles}/secret-reader"), "application/json", &wider.to_string()).await;
    assert_eq!(code, 200, "escalate on the role: {body}");
}
