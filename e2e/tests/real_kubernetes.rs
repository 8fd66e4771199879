//! The real control plane (`olmv2_e2e::kubernetes`): etcd, kube-apiserver and kube-controller-manager start, kubectl
//! and the project's CRDs work on them, the controller-manager's controllers run, and RBAC refusals reach the audit
//! log; and the README's walkthrough runs on it, the controller in-process as `deploy/`'s ServiceAccount, with its
//! webhooks and aggregated API reached by kube-apiserver through their Services, as `olmv2-control-plane --kubernetes
//! real` runs it. One control plane for the file's checks and the walkthrough, started by the first test that needs
//! it. (Every end-to-end suite of `tests/project` runs on real Kubernetes too, with `OLMV2_E2E_KUBERNETES=real`.)

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::future::Future;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use olmv2::api::v2alpha1::{Install, InstallState, Operator, OperatorState};
use olmv2_e2e::cluster::{Cluster, Kubernetes};
use olmv2_e2e::kubernetes::RealControlPlane;
use olmv2_e2e::real::{self, ServicePorts};
use olmv2_e2e::registry::Registry;
use olmv2_e2e::walkthrough::{self, Rollouts};
use serde_json::json;
use tokio::sync::OnceCell;

static PLANE: OnceCell<RealControlPlane> = OnceCell::const_new();

/// The file's control plane. Being in a `static`, it is never dropped: its reaper stops it when the test process
/// exits, and removes its directory unless a test panicked while holding [`RealControlPlane::keep_logs_on_panic`].
async fn plane() -> &'static RealControlPlane {
    PLANE
        .get_or_init(|| async {
            let plane = RealControlPlane::start("tests").await.expect("the real control plane starts");
            eprintln!(
                "real control plane (Kubernetes {}, etcd {}) ready at {} in {:.1?}",
                plane.binaries.kubernetes_version, plane.binaries.etcd_version, plane.url, plane.start_time
            );
            plane
        })
        .await
}

/// Runs kubectl with `kubeconfig`, its discovery cache in the control plane's directory; stdout, or the failure.
fn kubectl(plane: &RealControlPlane, kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new("kubectl")
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--cache-dir={}", plane.dir().join("kubectl-cache").display()))
        .args(args)
        .output()
        .map_err(|error| format!("kubectl does not run: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!("kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr)))
    }
}

/// Polls `check` every 100 ms until it answers `Some`, for at most `timeout`; the answer and how long it took.
async fn eventually<T, F, Fut>(timeout: Duration, mut check: F) -> Option<(T, Duration)>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(answer) = check().await {
            return Some((answer, started.elapsed()));
        }
        if started.elapsed() > timeout {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn kubectl_lists_namespaces_and_api_resources() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let admin = plane.admin_kubeconfig();
    let namespaces = kubectl(plane, &admin, &["get", "ns", "-o", "name"]).expect("get ns");
    for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(namespaces.contains(&format!("namespace/{namespace}\n")), "{namespace} missing: {namespaces}");
    }
    let resources = kubectl(plane, &admin, &["api-resources", "-o", "name"]).expect("api-resources");
    for resource in ["pods", "deployments.apps", "customresourcedefinitions.apiextensions.k8s.io"] {
        assert!(resources.lines().any(|line| line == resource), "{resource} missing: {resources}");
    }
    eprintln!("kubectl api-resources: {} resources", resources.lines().count());
}

#[tokio::test]
async fn the_projects_crds_are_established_and_served() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let crds: Api<CustomResourceDefinition> = Api::all(plane.client().await.expect("admin client"));
    let generated = olmv2::crdgen::all_crds();
    for crd in &generated {
        let name = crd.metadata.name.clone().expect("named");
        crds.patch(&name, &PatchParams::apply("olmv2-e2e").force(), &Patch::Apply(crd)).await.expect("applied");
    }
    for crd in &generated {
        let name = crd.metadata.name.clone().expect("named");
        let established = eventually(Duration::from_secs(30), || async {
            let crd = crds.get(&name).await.ok()?;
            let conditions = crd.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        })
        .await;
        assert!(established.is_some(), "{name} is not Established");
    }
    // Discovery may lag the Established condition: kubectl is given a few seconds to see the new resources.
    let admin = plane.admin_kubeconfig();
    let served = eventually(Duration::from_secs(15), || async {
        kubectl(plane, &admin, &["get", "installs,operators,csv", "-A"]).ok()
    })
    .await;
    let (_, took) = served.expect("kubectl get installs,operators,csv -A succeeds");
    eprintln!("{} CRDs applied; kubectl served them {took:.1?} after they were Established", generated.len());
}

#[tokio::test]
async fn the_controller_manager_fills_namespaces_and_aggregates_roles() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let client = plane.client().await.expect("admin client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "controller-manager-check"}})).unwrap();
    let created = Instant::now();
    namespaces.create(&PostParams::default(), &namespace).await.expect("namespace created");

    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "controller-manager-check");
    let account = eventually(Duration::from_secs(30), || async { accounts.get_opt("default").await.ok()? }).await;
    assert!(account.is_some(), "no default ServiceAccount; see {}", plane.log("kube-controller-manager").display());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "controller-manager-check");
    let root_ca = eventually(Duration::from_secs(30), || async { config_maps.get_opt("kube-root-ca.crt").await.ok()? })
        .await
        .expect("kube-root-ca.crt published");
    let ca = std::fs::read_to_string(plane.dir().join("ca.crt")).unwrap();
    assert_eq!(root_ca.0.data.unwrap_or_default().get("ca.crt"), Some(&ca), "the cluster CA is published");
    eprintln!("default ServiceAccount and kube-root-ca.crt within {:.1?}", created.elapsed());

    let roles: Api<ClusterRole> = Api::all(client);
    let aggregated: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "olmv2-e2e-widgets-view",
                     "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["widgets.olmv2.example"], "resources": ["widgets"], "verbs": ["get", "list"]}],
    }))
    .unwrap();
    roles.create(&PostParams::default(), &aggregated).await.expect("ClusterRole created");
    let view = eventually(Duration::from_secs(30), || async {
        let view = roles.get("view").await.ok()?;
        view.rules?.iter().any(|rule| rule.resources.as_deref() == Some(&["widgets".to_owned()][..])).then_some(())
    })
    .await;
    let (_, took) = view.expect("the aggregate-to-view rules are aggregated into view");
    eprintln!("aggregated into view in {took:.1?}");
}

#[tokio::test]
async fn a_refused_user_is_in_the_audit_log() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let mallory = plane.user_client("mallory").await.expect("mallory's client");
    let secrets: Api<Secret> = Api::namespaced(mallory, "kube-system");
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("mallory listed secrets: {other:?}"),
    }
    let kubeconfig = plane.user_kubeconfig("mallory").expect("mallory's kubeconfig");
    let refused = kubectl(plane, &kubeconfig, &["get", "secrets", "-n", "kube-system"]).expect_err("refused");
    assert!(refused.contains("Forbidden") && refused.contains(r#"User "mallory""#), "{refused}");
    assert!(plane.user_kubeconfig("nobody").is_err(), "users are fixed at start");

    let recorded = eventually(Duration::from_secs(10), || async {
        let records = plane.audit_records().expect("audit log readable");
        let refusals: Vec<_> = records
            .into_iter()
            .filter(|r| r.user == "mallory" && r.verb == "list" && r.resource.as_deref() == Some("secrets"))
            .collect();
        (refusals.len() >= 2).then_some(refusals)
    })
    .await;
    let (refusals, _) = recorded.expect("both refusals audited");
    for refusal in refusals {
        assert_eq!(refusal.code, Some(403));
        assert_eq!(refusal.namespace.as_deref(), Some("kube-system"));
        assert_eq!(refusal.impersonated_user, None);
    }
}

/// The writes of a test the audit log of `cluster` records: ConfigMaps of `default` (but the CA bundle kube-controller
/// manager publishes there), as (verb, name, dry run, code), once `count` are there.
async fn configmap_writes(cluster: &Cluster, count: usize) -> Vec<(String, String, bool, u16)> {
    let recorded = eventually(Duration::from_secs(10), || async {
        let writes: Vec<_> = cluster
            .audit_records()
            .into_iter()
            .filter(|r| r.resource == "configmaps" && r.namespace == "default" && r.name != "kube-root-ca.crt")
            .filter(|r| matches!(r.verb.as_str(), "create" | "patch" | "update"))
            .map(|r| (r.verb, r.name, r.dry_run, r.code))
            .collect();
        (writes.len() >= count).then_some(writes)
    })
    .await;
    recorded.expect("the writes are audited").0
}

/// The tests prove who wrote an object by the audit log (`never_written`): both backends must record a create under
/// the name its body gives and mark a dry run, which writes nothing, as kube-apiserver does.
#[tokio::test]
async fn both_backends_audit_a_create_under_its_name_and_mark_dry_runs() {
    let mut seen = Vec::new();
    for kubernetes in [Kubernetes::Real, Kubernetes::Emulator] {
        let cluster = Cluster::start(kubernetes, "audit").await.expect("the cluster starts");
        let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client().await.unwrap(), "default");
        let named = |name: &str| serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": name}})).unwrap();
        configmaps.create(&PostParams::default(), &named("stored")).await.expect("created");
        let dry_run = PostParams { dry_run: true, ..PostParams::default() };
        configmaps.create(&dry_run, &named("probed")).await.expect("dry-run created");
        assert!(configmaps.get_opt("probed").await.unwrap().is_none(), "a dry run stores nothing");
        configmaps.patch("stored", &PatchParams::default(), &Patch::Merge(json!({"data": {"a": "b"}}))).await.unwrap();
        let writes = configmap_writes(&cluster, 3).await;
        let expected =
            [("create", "stored", false, 201), ("create", "probed", true, 201), ("patch", "stored", false, 200)];
        let expected: Vec<_> = expected.iter().map(|(v, n, d, c)| ((*v).to_owned(), (*n).to_owned(), *d, *c)).collect();
        assert_eq!(writes, expected, "{kubernetes:?}");
        let probe = cluster.audit_records().into_iter().filter(|r| r.name == "probed" && r.verb == "create");
        seen.push(probe.map(|r| r.wrote()).collect::<Vec<_>>());
    }
    assert_eq!(seen, [vec![false], vec![false]], "a dry run is no write on either backend");
}

/// A Deployment's generation counts changes of its spec and of its annotations (kube-apiserver's Deployment strategy:
/// the Deployment controller copies them onto the ReplicaSets), not of its labels; a StatefulSet's counts its spec
/// alone. The controller judges a Deployment available only once observed at its generation
/// (`install::apply::deployment_available`), so a hand-made annotation is a rollout to wait for on both backends.
#[tokio::test]
async fn both_backends_count_a_deployments_annotations_in_its_generation() {
    let mut seen = Vec::new();
    for kubernetes in [Kubernetes::Real, Kubernetes::Emulator] {
        let cluster = Cluster::start(kubernetes, "generation").await.expect("the cluster starts");
        let admin = cluster.client().await.unwrap();
        let template = json!({"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "example.com/a:1"}]}});
        let spec = json!({"selector": {"matchLabels": {"app": "a"}}, "template": template});
        let deployments: Api<Deployment> = Api::namespaced(admin.clone(), "default");
        let created = deployments
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "a"}, "spec": spec})).unwrap(),
            )
            .await
            .expect("Deployment created");
        let mut generations = vec![created.metadata.generation];
        for patch in [
            json!({"metadata": {"labels": {"team": "x"}}}),
            json!({"metadata": {"annotations": {"note": "one"}}}),
            json!({"metadata": {"annotations": {"note": "one"}}}),
            json!({"metadata": {"annotations": {"note": null}}}),
            json!({"spec": {"replicas": 2}}),
        ] {
            let patched =
                deployments.patch("a", &PatchParams::default(), &Patch::Merge(&patch)).await.expect("patched");
            generations.push(patched.metadata.generation);
        }
        let statefulsets: Api<StatefulSet> = Api::namespaced(admin.clone(), "default");
        statefulsets
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "s"}, "spec": spec})).unwrap(),
            )
            .await
            .expect("StatefulSet created");
        let annotate = json!({"metadata": {"annotations": {"note": "one"}}});
        let annotated =
            statefulsets.patch("s", &PatchParams::default(), &Patch::Merge(&annotate)).await.expect("patched");
        seen.push((generations, annotated.metadata.generation));
    }
    assert_eq!(seen[0], seen[1], "the same generations on both backends");
    assert_eq!(seen[0], (vec![Some(1), Some(1), Some(2), Some(2), Some(3), Some(4)], Some(1)));
}

/// An aggregated API whose server is unavailable answers `503 service unavailable` to discovery on both backends, at
/// once (the controller's client takes it as the answer: `controller::connect`), and kubectl reports it the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_answer_503_for_an_unavailable_aggregated_api() {
    let mut answers = Vec::new();
    for kubernetes in [Kubernetes::Real, Kubernetes::Emulator] {
        let cluster = Cluster::start(kubernetes, "unavailable").await.expect("the cluster starts");
        cluster
            .create(&json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": "v1.probe.example.com"},
                "spec": {"group": "probe.example.com", "version": "v1", "groupPriorityMinimum": 100,
                    "versionPriority": 10, "insecureSkipTLSVerify": true,
                    "service": {"namespace": "default", "name": "nobody", "port": 443}}}))
            .await
            .expect("APIService created");
        let dir = std::env::temp_dir().join(format!("olmv2-unavailable-{}-{kubernetes:?}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, cluster.kubeconfig()).unwrap();
        let output = Command::new("kubectl")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--cache-dir={}", dir.join("cache").display()))
            .args(["get", "--raw", "/apis/probe.example.com/v1"])
            .output()
            .expect("kubectl runs");
        assert!(!output.status.success(), "{kubernetes:?}");
        answers.push(String::from_utf8_lossy(&output.stderr).trim().to_owned());
        std::fs::remove_dir_all(&dir).unwrap();
        // The controller's client is answered at once, not after kube's retries (minutes).
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&cluster.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
        let client = olmv2::controller::connect::client(config).unwrap();
        let request = http::Request::get("/apis/probe.example.com/v1").body(Vec::new()).unwrap();
        let started = Instant::now();
        let answered = client.request_text(request).await;
        assert!(matches!(answered, Err(kube::Error::Api(ref status)) if status.code == 503), "{answered:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "{kubernetes:?}: {:?}", started.elapsed());
    }
    assert_eq!(answers[0], answers[1], "kubectl tells both alike");
    assert!(answers[0].contains("ServiceUnavailable"), "{}", answers[0]);
}

/// The status a request to `/api` with only `token` as credentials is answered (200, or 401 when refused).
async fn answer_with_token(cluster: &Cluster, token: &str) -> u16 {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&cluster.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    config.auth_info = kube::config::AuthInfo { token: Some(token.to_owned().into()), ..Default::default() };
    let client = kube::Client::try_from(config).unwrap();
    match client.request_text(http::Request::get("/api").body(Vec::new()).unwrap()).await {
        Ok(_) => 200,
        Err(kube::Error::Api(status)) => status.code,
        Err(other) => panic!("no answer: {other}"),
    }
}

/// The header and claims of a JWT, as a tool decodes them (no verification).
fn jwt_parts(token: &str) -> (serde_json::Value, serde_json::Value) {
    use base64::Engine as _;
    let decode = |part: &str| -> serde_json::Value {
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    };
    let parts: Vec<&str> = token.trim().split('.').collect();
    assert_eq!(parts.len(), 3, "a JWS in compact form: {token}");
    (decode(parts[0]), decode(parts[1]))
}

/// The keys of a JSON object, sorted.
fn keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = value.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
    keys.sort();
    keys
}

/// ServiceAccount tokens as kube-apiserver issues them, on both backends: `kubectl create token` answers an RS256
/// JWT (`iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti` and the `kubernetes.io` claim naming the namespace, the
/// account and the Secret it is bound to) whose signature verifies against the key set at `/openid/v1/jwks` that the
/// discovery document names; it authenticates for the API's audience only, and no more once its payload is changed,
/// its bound Secret is deleted or its account is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_issue_service_account_tokens_as_signed_jwts() {
    use jsonwebtoken::{Algorithm, DecodingKey, Validation};
    let mut shapes = Vec::new();
    for kubernetes in [Kubernetes::Real, Kubernetes::Emulator] {
        let cluster = Cluster::start(kubernetes, "tokens").await.expect("the cluster starts");
        let admin = cluster.client().await.unwrap();
        let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
        let account = accounts
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap())
            .await
            .unwrap();
        let secrets: Api<Secret> = Api::namespaced(admin.clone(), "default");
        let secret = secrets
            .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "bound"}})).unwrap())
            .await
            .unwrap();
        let dir = std::env::temp_dir().join(format!("olmv2-tokens-{}-{kubernetes:?}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, cluster.kubeconfig()).unwrap();
        let kubectl = |args: &[&str]| -> String {
            let output = Command::new("kubectl")
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .arg(format!("--cache-dir={}", dir.join("cache").display()))
                .args(args)
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "{kubernetes:?} kubectl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            String::from_utf8_lossy(&output.stdout).trim().to_owned()
        };
        let token = kubectl(&["create", "token", "robot", "--duration=10m"]);
        let for_vault = kubectl(&["create", "token", "robot", "--audience=vault"]);
        let bound = kubectl(&["create", "token", "robot", "--bound-object-kind=Secret", "--bound-object-name=bound"]);
        let discovery: serde_json::Value =
            serde_json::from_str(&kubectl(&["get", "--raw", "/.well-known/openid-configuration"])).unwrap();
        let jwks: serde_json::Value = serde_json::from_str(&kubectl(&["get", "--raw", "/openid/v1/jwks"])).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();

        let issuer = discovery["issuer"].as_str().unwrap().to_owned();
        assert!(discovery["jwks_uri"].as_str().unwrap().ends_with("/openid/v1/jwks"), "{kubernetes:?}: {discovery}");
        assert_eq!(discovery["id_token_signing_alg_values_supported"], json!(["RS256"]), "{kubernetes:?}");
        let (header, claims) = jwt_parts(&token);
        let jwk = &jwks["keys"][0];
        assert_eq!(header, json!({"alg": "RS256", "kid": jwk["kid"]}), "{kubernetes:?}");
        let key = DecodingKey::from_jwk(&serde_json::from_value(jwk.clone()).unwrap()).unwrap();
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[&issuer]);
        validation.set_audience(&[&issuer]);
        let verified = jsonwebtoken::decode::<serde_json::Value>(&token, &key, &validation).expect("signed by the key");
        assert_eq!(verified.claims, claims);
        assert_eq!(claims["sub"], "system:serviceaccount:default:robot", "{kubernetes:?}");
        assert_eq!(claims["aud"], json!([issuer]), "the API's audience by default: {kubernetes:?}");
        assert_eq!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(), 600, "{kubernetes:?}");
        assert_eq!(claims["nbf"], claims["iat"], "{kubernetes:?}");
        let uid = |object: &Option<String>| object.clone().unwrap();
        assert_eq!(
            claims["kubernetes.io"],
            json!({"namespace": "default", "serviceaccount": {"name": "robot", "uid": uid(&account.metadata.uid)}}),
            "{kubernetes:?}"
        );
        assert_eq!(jwt_parts(&for_vault).1["aud"], json!(["vault"]), "{kubernetes:?}");
        let bound_claims = jwt_parts(&bound).1;
        assert_eq!(
            bound_claims["kubernetes.io"]["secret"],
            json!({"name": "bound", "uid": uid(&secret.metadata.uid)}),
            "{kubernetes:?}"
        );

        // A TokenReview for an audience: the token issued for it passes, the API's does not.
        let reviews: Api<k8s_openapi::api::authentication::v1::TokenReview> = Api::all(admin.clone());
        let review = |token: &str, audiences: &[&str]| {
            serde_json::from_value::<k8s_openapi::api::authentication::v1::TokenReview>(
                json!({"spec": {"token": token, "audiences": audiences}}),
            )
            .unwrap()
        };
        let reviewed = reviews.create(&PostParams::default(), &review(&for_vault, &["vault"])).await.unwrap();
        let status = reviewed.status.unwrap();
        assert_eq!(
            (status.authenticated, status.audiences),
            (Some(true), Some(vec!["vault".to_owned()])),
            "{kubernetes:?}"
        );
        let reviewed = reviews.create(&PostParams::default(), &review(&token, &["vault"])).await.unwrap();
        assert_ne!(reviewed.status.unwrap().authenticated, Some(true), "the API's token for vault: {kubernetes:?}");

        assert_eq!(answer_with_token(&cluster, &token).await, 200, "{kubernetes:?}");
        assert_eq!(answer_with_token(&cluster, &bound).await, 200, "{kubernetes:?}");
        assert_eq!(answer_with_token(&cluster, &for_vault).await, 401, "another audience: {kubernetes:?}");
        let mut forged: Vec<String> = token.split('.').map(str::to_owned).collect();
        {
            use base64::Engine as _;
            let mut changed = claims.clone();
            changed["sub"] = json!("system:serviceaccount:kube-system:admin");
            forged[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(changed.to_string());
        }
        assert_eq!(answer_with_token(&cluster, &forged.join(".")).await, 401, "a changed payload: {kubernetes:?}");
        secrets.delete("bound", &Default::default()).await.unwrap();
        let refused = eventually(Duration::from_secs(30), || async {
            (answer_with_token(&cluster, &bound).await == 401).then_some(())
        });
        assert!(refused.await.is_some(), "its Secret gone, the bound token is refused: {kubernetes:?}");
        accounts.delete("robot", &Default::default()).await.unwrap();
        let refused = eventually(Duration::from_secs(30), || async {
            (answer_with_token(&cluster, &token).await == 401).then_some(())
        });
        assert!(refused.await.is_some(), "its account gone, the token is refused: {kubernetes:?}");
        shapes.push((keys(&header), keys(&claims), keys(&bound_claims["kubernetes.io"]), keys(jwk)));
    }
    assert_eq!(shapes[0], shapes[1], "the same headers, claims and keys on both backends");
}

#[tokio::test]
async fn a_dropped_control_plane_stops_its_processes_and_removes_its_directory() {
    let plane = RealControlPlane::start_with_users("dropped", &["zed"]).await.expect("a second control plane starts");
    eprintln!("second control plane ready in {:.1?}", plane.start_time);
    let dir = plane.dir().to_owned();
    let processes = plane.processes();
    let names: Vec<&str> = processes.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, ["etcd", "kube-apiserver", "kube-controller-manager"]);
    let zed = plane.user_client("zed").await.expect("zed's client");
    let review = kube::Api::<Namespace>::all(zed).list(&ListParams::default()).await.expect_err("zed is refused");
    assert!(matches!(review, kube::Error::Api(ref status) if status.code == 403), "{review:?}");
    assert!(plane.user_kubeconfig("alice").is_err(), "only the users given at start");

    let stopping = Instant::now();
    drop(plane);
    eprintln!("stopped in {:.1?}", stopping.elapsed());
    assert!(!dir.exists(), "{} is removed", dir.display());
    for (name, pid) in processes {
        assert!(!Path::new(&format!("/proc/{pid}")).exists(), "{name} ({pid}) still runs");
    }
}

/// The walkthrough of `olmv2-control-plane --kubernetes real`: the controller's ServiceAccount and token, `deploy/`'s
/// Services as ExternalName Services of the controller's loopback ports, and a stand-in kubelet. What kube-apiserver
/// did is checked afterwards: the mutating webhook recorded the creator, the aggregation layer serves the Installed
/// API, the real Deployment controller made the Deployments Available, and the approval webhook refuses a user
/// lacking the pending rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_walkthrough_installs_plumbus_and_the_grumbo_operator_on_real_kubernetes() {
    let plane = plane().await;
    let _keep = plane.keep_logs_on_panic();
    let admin = plane.client().await.expect("admin client");
    let registry = Registry::start("walkthrough-real").expect("docker-registry starts");
    let started = Instant::now();
    real::install_crds(&admin).await.expect("the project's CRDs are established");
    let ports = ServicePorts::free().expect("free ports");
    let config = real::controller_config(plane, &admin, &ports).await.expect("deploy/ applied, a token issued");
    let mut options = olmv2_e2e::project::controller_options(
        vec![registry.host.clone()],
        plane.dir().join("bundle-cache"),
        Duration::from_secs(30),
    );
    options.webhook.address = ([127, 0, 0, 1], ports.webhook).into();
    options.webhook.service_port = i32::from(ports.webhook);
    options.api.address = ([127, 0, 0, 1], ports.api).into();
    options.api.service_port = i32::from(ports.api);
    let health = std::sync::Arc::new(olmv2::server::Health::default());
    let controllers = olmv2::process::start(config, options, health).await.expect("the controllers start");
    let kubelet = real::spawn_kubelet(admin.clone(), "operators");
    let set_up = started.elapsed();
    let bundles = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundles");
    let registry = walkthrough::run(admin.clone(), &bundles, registry, Rollouts::ByTheCluster, None)
        .await
        .expect("the walkthrough runs to its end");
    eprintln!("set up in {set_up:.1?}; walkthrough done {:.1?} after the start", started.elapsed());

    let installs: Api<Install> = Api::all(admin.clone());
    let plumbus = installs.get("plumbus").await.unwrap();
    assert_eq!(plumbus.status.as_ref().and_then(|s| s.state), Some(InstallState::Installed));
    let creator = plumbus.metadata.annotations.unwrap_or_default();
    let creator = creator.get(olmv2::api::v2alpha1::CREATOR_ANNOTATION).expect("the mutating webhook ran");
    assert!(creator.contains(r#""username":"admin""#), "{creator}");
    let grumbo = Api::<Operator>::all(admin.clone()).get("grumbo").await.unwrap();
    let status = grumbo.status.unwrap();
    assert_eq!(status.state, Some(OperatorState::Installed));
    let kinds: Vec<String> = status.components.unwrap().refs.into_iter().map(|r| r.kind).collect();
    for kind in ["Install", "ClusterServiceVersion", "Deployment", "CustomResourceDefinition"] {
        assert!(kinds.iter().any(|k| k == kind), "no {kind} among {kinds:?}");
    }
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(admin.clone(), "operators");
    for name in ["plumbus-operator", "grumbo-operator"] {
        let deployment = deployments.get(name).await.unwrap();
        assert_eq!(deployment.status.and_then(|s| s.available_replicas), Some(1), "{name} is available");
    }
    let replica_sets: Api<k8s_openapi::api::apps::v1::ReplicaSet> = Api::namespaced(admin.clone(), "operators");
    let owners: Vec<String> = replica_sets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .flat_map(|rs| rs.metadata.owner_references.unwrap_or_default())
        .map(|owner| owner.name)
        .collect();
    assert!(owners.iter().any(|o| o == "grumbo-operator"), "the Deployment controller made ReplicaSets: {owners:?}");
    let installed = kubectl(plane, &plane.admin_kubeconfig(), &["get", "installed"]).expect("the Installed API");
    assert!(installed.contains("grumbo.v1.0.0") && installed.contains("plumbus.v2.0.0-alpha"), "{installed}");

    // An Install of its own, pending; mallory may patch Installs but holds none of the pending rules.
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "refused"}})).unwrap();
    namespaces.create(&PostParams::default(), &namespace).await.expect("namespace refused");
    let image = registry.reference("grumbo-bundle:v1.0.0");
    let body = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "refused"},
        "spec": {"namespaces": [{"from": "default", "to": "refused"}],
                 "content": [{"type": "ManifestImage", "manifestImage": image}]}});
    installs.patch("refused", &PatchParams::apply("olmv2-e2e"), &Patch::Apply(&body)).await.expect("Install created");
    let pending = eventually(Duration::from_secs(60), || async {
        let install = installs.get("refused").await.ok()?;
        let status = install.status?;
        (status.state == Some(InstallState::PendingApproval)).then_some(())
    })
    .await;
    assert!(pending.is_some(), "Install refused is pending: {:?}", installs.get("refused").await.unwrap().status);
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "olmv2-e2e-install-patcher"},
        "rules": [{"apiGroups": ["operators.coreos.com"], "resources": ["installs"], "verbs": ["get", "patch"]}]}))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.expect("ClusterRole created");
    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    let binding = serde_json::from_value(json!({"metadata": {"name": "olmv2-e2e-install-patcher"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "olmv2-e2e-install-patcher"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "mallory"}]}))
    .unwrap();
    bindings.create(&PostParams::default(), &binding).await.expect("ClusterRoleBinding created");
    let mallory: Api<Install> = Api::all(plane.user_client("mallory").await.expect("mallory's client"));
    let approve = json!({"spec": {"approval": "Approved"}});
    // RBAC may take a moment to let mallory patch at all; the webhook's refusal is what is waited for.
    let refused = eventually(Duration::from_secs(10), || async {
        match mallory.patch("refused", &PatchParams::default(), &Patch::Merge(&approve)).await {
            Err(kube::Error::Api(status)) if status.message.contains("may not approve Install refused") => Some(status),
            Err(_) => None,
            Ok(_) => panic!("mallory approved Install refused"),
        }
    })
    .await;
    let (status, _) = refused.expect("the approval webhook refuses mallory");
    assert!(status.message.contains(r#"user "mallory""#), "{status:?}");
    let refused = installs.get("refused").await.unwrap();
    assert_ne!(format!("{:?}", refused.spec.approval), "Approved", "the approval was not stored");

    kubelet.abort();
    controllers.stop().await;
    drop(registry);
}
