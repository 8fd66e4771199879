//! The project installed on the test control plane as on a real cluster: its CRDs, the controller's namespace, RBAC and
//! Services from `deploy/`, a ServiceAccount token for the controller, and the controllers themselves (the webhook's
//! and the aggregated API's Services pointed at the in-process servers).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use kube_emulator::{ControlPlane, Target, WriteOptions};

/// The controller's namespace and ServiceAccount, as `deploy/` names them.
pub const CONTROLLER_NAMESPACE: &str = "olmv2-system";
pub const CONTROLLER_ACCOUNT: &str = "olmv2-controller";

const DEPLOY_NAMESPACE: &str = include_str!("../../deploy/00-namespace.yaml");
const DEPLOY_RBAC: &str = include_str!("../../deploy/10-rbac.yaml");
const DEPLOY_CONTROLLER: &str = include_str!("../../deploy/20-controller.yaml");
/// The Service in front of the aggregated API server, as `deploy/` names it.
pub const API_SERVICE: &str = "olmv2-packages";

#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("{0}")]
    Api(String),
    #[error("invalid manifest in deploy/: {0}")]
    Manifest(String),
    #[error("failed to start the controllers")]
    Controllers(#[source] olmv2::webhook::WebhookError),
    #[error("failed to reserve a loopback port for the webhook")]
    ReservePort(#[source] std::io::Error),
    #[error("failed to build the controller's client configuration: {0}")]
    Config(String),
}

fn api_error(error: kube_emulator::ApiError) -> ProjectError {
    ProjectError::Api(error.message)
}

/// Creates `object` as the control plane itself would (no admission by users).
pub async fn create(plane: &ControlPlane, object: &Value) -> Result<Value, ProjectError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let resource = plane
        .api
        .resources()
        .by_kind(api_version, kind)
        .cloned()
        .ok_or_else(|| ProjectError::Manifest(format!("{kind} ({api_version}) is not served")))?;
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
    let target = Target { resource, namespace, name: None, subresource: None };
    let written =
        plane.api.create(&target, object.clone(), &WriteOptions::internal("olmv2-e2e")).await.map_err(api_error)?;
    Ok(written.object)
}

/// Creates the project's CRDs and checks that each is Established.
pub async fn install_crds(plane: &ControlPlane) -> Result<usize, ProjectError> {
    let crds = olmv2::crdgen::all_crds();
    for crd in &crds {
        let body = serde_json::to_value(crd).map_err(|e| ProjectError::Manifest(e.to_string()))?;
        let written = create(plane, &body).await?;
        let established = written["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        if !established {
            return Err(ProjectError::Api(format!("{} was not established", written["metadata"]["name"])));
        }
    }
    Ok(crds.len())
}

/// Applies `deploy/`'s namespace and RBAC, and returns a client configuration authenticated as the controller's
/// ServiceAccount (a TokenRequest token), as the Deployment's pod would be.
pub async fn controller_config(plane: &ControlPlane) -> Result<kube::Config, ProjectError> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&controller_kubeconfig(plane).await?)
        .map_err(|e| ProjectError::Config(e.to_string()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| ProjectError::Config(e.to_string()))
}

/// [`controller_config`] as a kubeconfig file's text, for a controller run as its own process.
pub async fn controller_kubeconfig(plane: &ControlPlane) -> Result<String, ProjectError> {
    for value in deploy_objects()? {
        match create(plane, &value).await {
            // A controller started again finds its namespace and RBAC in place.
            Err(ProjectError::Api(message)) if message.contains("already exists") => {}
            other => {
                other?;
            }
        }
    }
    let admin = plane.client().await.map_err(|e| ProjectError::Config(e.to_string()))?;
    Ok(plane.token_kubeconfig(&controller_token(admin).await?))
}

/// What the test control plane takes from `deploy/`: the controller's namespace, its RBAC, and of the controller's
/// manifest its Services (the aggregation layer reaches the API through one); its Deployment is the in-process
/// controllers.
pub fn deploy_objects() -> Result<Vec<Value>, ProjectError> {
    let mut objects = Vec::new();
    for text in [DEPLOY_NAMESPACE, DEPLOY_RBAC, DEPLOY_CONTROLLER] {
        for document in serde_yaml_ng::Deserializer::from_str(text) {
            let value: Value =
                serde::Deserialize::deserialize(document).map_err(|e| ProjectError::Manifest(e.to_string()))?;
            let workload = text == DEPLOY_CONTROLLER && value["kind"] != "Service";
            if !value.is_null() && !workload {
                objects.push(value);
            }
        }
    }
    Ok(objects)
}

/// A token for the controller's ServiceAccount (a TokenRequest by `admin`, valid for a day), as the Deployment's pod
/// would be given.
pub async fn controller_token(admin: kube::Client) -> Result<String, ProjectError> {
    let accounts = kube::Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(admin, CONTROLLER_NAMESPACE);
    let request = k8s_openapi::api::authentication::v1::TokenRequest {
        spec: k8s_openapi::api::authentication::v1::TokenRequestSpec {
            expiration_seconds: Some(86400),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = accounts
        .create_token_request(CONTROLLER_ACCOUNT, &kube::api::PostParams::default(), &request)
        .await
        .map_err(|e| ProjectError::Api(e.to_string()))?;
    Ok(answer.status.map(|s| s.token).unwrap_or_default())
}

/// The controllers' options on the test control plane: the webhook on a loopback port, registries on loopback
/// reached over HTTP, quick retries.
pub fn controller_options(
    insecure_registries: Vec<String>,
    cache: PathBuf,
    resync: Duration,
) -> olmv2::runtime::ControllerOptions {
    olmv2::runtime::ControllerOptions {
        namespace: CONTROLLER_NAMESPACE.into(),
        webhook: olmv2::webhook::WebhookOptions {
            address: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            service_namespace: None,
            service_name: "olmv2-webhook".into(),
            service_port: 443,
            cert_dir: None,
        },
        api: olmv2::installed::ApiOptions {
            address: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            service_namespace: None,
            service_name: API_SERVICE.into(),
            service_port: 443,
            cert_dir: None,
            disabled: false,
        },
        registry: olmv2::bundle::image::RegistryOptions {
            insecure_registries,
            ..olmv2::bundle::image::RegistryOptions::default()
        },
        cache,
        resync,
        retry: Duration::from_secs(1),
        operator_namespace: "operators".into(),
        catalog_poll: Duration::from_secs(1),
        global_catalog_namespace: "olm".into(),
        // Short, so that a plan fails within a test; long enough for a transient failure to pass.
        install_plan_retry_timeout: Duration::from_secs(5),
        protected_copied_csv_namespaces: Vec::new(),
        enable_v2alpha1: true,
        adopt_subscriptions: false,
        certificates: olmv2::tls::rotation::Lifetimes::default(),
        leader: olmv2::controller::leader::LeaderOptions::default(),
    }
}

/// Starts the controllers as the controller's ServiceAccount, with the webhook's Service pointing at them before
/// their first pass: as with a Service in a cluster, the webhook is reachable at its name from the start, so a first
/// pass after a restart does not find the approval webhook missing (which, failing closed, would void approvals).
pub async fn start_controllers(
    plane: &ControlPlane,
    config: kube::Config,
    mut options: olmv2::runtime::ControllerOptions,
) -> Result<olmv2::process::Controllers, ProjectError> {
    let service = options.webhook.service_name.clone();
    let api_service = options.api.service_name.clone();
    if options.webhook.address.port() == 0 {
        // A free port chosen now, so the endpoint is set before anything reconciles.
        let probe = std::net::TcpListener::bind(options.webhook.address).map_err(ProjectError::ReservePort)?;
        options.webhook.address = probe.local_addr().map_err(ProjectError::ReservePort)?;
        drop(probe);
    }
    plane.api.endpoints.set(CONTROLLER_NAMESPACE, &service, options.webhook.address);
    let health = Arc::new(olmv2::server::Health::default());
    let controllers = olmv2::process::start(config, options, health).await.map_err(ProjectError::Controllers)?;
    plane.api.endpoints.set(CONTROLLER_NAMESPACE, &service, controllers.webhook.address);
    if let Some(api) = &controllers.api {
        plane.api.endpoints.set(CONTROLLER_NAMESPACE, &api_service, api.address);
    }
    Ok(controllers)
}

/// Stands in for the Deployment controller, which the test control plane does not run: reports every Deployment of
/// `namespace` rolled out and available at its generation.
pub async fn report_rollouts(client: &kube::Client, namespace: &str) -> Result<(), kube::Error> {
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::api::{Api, ListParams};
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace);
    for deployment in deployments.list(&ListParams::default()).await?.items {
        report_rollout(&deployments, &deployment).await?;
    }
    Ok(())
}

/// Reports `deployment` (of `deployments`) rolled out and available at its generation, as the Deployment controller
/// would once its pods run.
pub async fn report_rollout(
    deployments: &kube::Api<k8s_openapi::api::apps::v1::Deployment>,
    deployment: &k8s_openapi::api::apps::v1::Deployment,
) -> Result<(), kube::Error> {
    use kube::api::{Patch, PatchParams};
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let status = serde_json::json!({"status": {"observedGeneration": deployment.metadata.generation, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "standing in for the Deployment controller"}]}});
    match deployments.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await {
        // Deleted since the list (its CSV replaced or failed): nothing to report, as for the real controller.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        result => result.map(|_| ()),
    }
}

/// The cargo profile the image builds the controller in (`Containerfile`; a test keeps them in step), which the
/// benchmarks measure unless told otherwise.
pub const IMAGE_PROFILE: &str = "production";

/// Builds the controller's binary as the image ships it (in [`IMAGE_PROFILE`], or `OLMV2_BENCH_PROFILE`'s: heaptrack
/// keeps up with `release` better) and answers its path, from cargo's own report (wherever the target directory is,
/// `CARGO_TARGET_DIR` included): for the benchmarks, which run the controller as its own process and so measure what
/// a cluster would run.
pub fn build_controller(cargo: &str) -> Result<std::path::PathBuf, String> {
    let profile = std::env::var("OLMV2_BENCH_PROFILE").unwrap_or_else(|_| IMAGE_PROFILE.into());
    build_controller_in(cargo, &profile)
}

/// [`build_controller`] in the cargo profile named: for a benchmark that compares builds.
pub fn build_controller_in(cargo: &str, profile: &str) -> Result<std::path::PathBuf, String> {
    let output = std::process::Command::new(cargo)
        .args([
            "build",
            "--profile",
            profile,
            "--locked",
            "-p",
            "olmv2",
            "--bin",
            "olmv2",
            "--message-format=json-render-diagnostics",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|error| format!("cargo does not run: {error}"))?;
    if !output.status.success() {
        return Err("the olmv2 binary does not build".into());
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["target"]["name"] == "olmv2")
        .find_map(|message| message["executable"].as_str().map(std::path::PathBuf::from))
        .ok_or_else(|| "cargo names no olmv2 executable".into())
}

#[cfg(test)]
#[allow(clippy::expect_used)] // test code fails loudly by design
mod tests {
    #[test]
    fn the_benchmarks_build_the_controller_as_the_image_does() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Containerfile");
        let containerfile = std::fs::read_to_string(path).expect("the workspace's Containerfile");
        let build = format!("cargo build --profile {} --locked -p olmv2 --bin olmv2", super::IMAGE_PROFILE);
        assert!(containerfile.contains(&build), "the image builds with `{build}`");
        let copied = format!("target/{}/olmv2", super::IMAGE_PROFILE);
        assert!(containerfile.contains(&copied), "the image copies {copied}");
    }
}
