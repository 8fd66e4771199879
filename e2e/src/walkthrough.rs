//! The newcomer's walkthrough the `olmv2-control-plane` binary runs: the sample plumbus bundle pushed to a local
//! registry, an Install of it, its pending permissions, an approval by the admin, and what then runs. Each step
//! prints the kubectl command that does the same by hand.

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use olmv2::api::v2alpha1::{Install, InstallState};
use serde_json::json;

use crate::registry::Registry;

#[derive(Debug, thiserror::Error)]
pub enum WalkthroughError {
    #[error("the local registry did not start: {0}")]
    Registry(#[from] crate::registry::RegistryError),
    #[error("pushing the sample bundle failed: {0}")]
    Push(String),
    #[error("{action} failed: {source}")]
    Api { action: &'static str, source: kube::Error },
    #[error("Install plumbus did not reach {0} within a minute")]
    Timeout(&'static str),
}

fn api(action: &'static str) -> impl FnOnce(kube::Error) -> WalkthroughError {
    move |source| WalkthroughError::Api { action, source }
}

fn say(text: &str) {
    let _ = olmv2::output::write(&format!("{text}\n"));
}

async fn wait_for(
    installs: &Api<Install>,
    wanted: &'static str,
    done: impl Fn(&Install) -> bool,
) -> Result<Install, WalkthroughError> {
    for _ in 0..600 {
        if let Some(install) = installs.get_opt("plumbus").await.map_err(api("reading the Install"))? {
            if done(&install) {
                return Ok(install);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(WalkthroughError::Timeout(wanted))
}

fn state(install: &Install) -> Option<InstallState> {
    install.status.as_ref().and_then(|s| s.state)
}

/// Runs the walkthrough as `admin` with `registry` (which the controller may reach); the registry is handed back
/// to keep serving for the reader's own Installs.
pub async fn run(admin: kube::Client, bundles: &Path, registry: Registry) -> Result<Registry, WalkthroughError> {
    say("== Walkthrough: installing the sample plumbus operator ==\n");
    let image = registry.reference("plumbus-bundle:v2.0.0-alpha");
    let options = olmv2::bundle::image::RegistryOptions {
        insecure_registries: vec![registry.host.clone()],
        credentials: Default::default(),
    };
    olmv2::bundle::image::ImageClient::new(options)
        .push_bundle(&bundles.join("plumbus/2.0.0-alpha"), &image, false)
        .await
        .map_err(|e| WalkthroughError::Push(olmv2::error::report(&e)))?;
    say(&format!("1. A local registry serves the sample bundle: {image}\n   (olmv2 bundle build bundles/plumbus/2.0.0-alpha --push {image} --insecure-registry {})\n", registry.host));

    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": "operators"}}))
        .map_err(|e| WalkthroughError::Push(e.to_string()))?;
    if let Err(error) = namespaces.create(&PostParams::default(), &namespace).await {
        if !matches!(&error, kube::Error::Api(status) if status.code == 409) {
            return Err(WalkthroughError::Api { action: "creating namespace operators", source: error });
        }
    }
    let installs = Api::<Install>::all(admin.clone());
    let body = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "plumbus"},
        "spec": {"namespaces": [{"from": "default", "to": "operators"}], "content": [{"type": "ManifestImage", "manifestImage": image}]}});
    installs
        .patch("plumbus", &PatchParams::apply("walkthrough"), &Patch::Apply(&body))
        .await
        .map_err(api("creating the Install"))?;
    say("2. An Install of it into namespace operators (kubectl apply -f install.yaml):\n");
    say(&serde_yaml_ng::to_string(&body).unwrap_or_default());

    let pending = wait_for(&installs, "PendingApproval", |i| state(i) == Some(InstallState::PendingApproval)).await?;
    say("3. The controller pulled the bundle, assigned a ServiceAccount and computed what it lacks (kubectl get install plumbus; olmv2 approve plumbus):\n");
    say(&olmv2::approve_command::describe_pending(&pending));

    installs
        .patch("plumbus", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"approval": "Approved"}})))
        .await
        .map_err(api("approving the Install"))?;
    say("4. The cluster admin, who holds all of these, approves (kubectl patch install plumbus --type merge -p '{\"spec\":{\"approval\":\"Approved\"}}').");
    say("   The webhook checked each rule with a SubjectAccessReview for the admin; a user lacking any would be refused.\n");

    wait_for(&installs, "Applying", |i| matches!(state(i), Some(InstallState::Applying | InstallState::Installed)))
        .await?;
    // No kubelet runs here: stand in for the Deployment controller and report the rollout done.
    let deployments = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(admin.clone(), "operators");
    for deployment in deployments.list(&ListParams::default()).await.map_err(api("listing Deployments"))?.items {
        let name = deployment.metadata.name.clone().unwrap_or_default();
        let status = json!({"status": {"observedGeneration": deployment.metadata.generation, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "standing in for the Deployment controller"}]}});
        deployments
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(api("marking the Deployment available"))?;
    }
    let installed = wait_for(&installs, "Installed", |i| state(i) == Some(InstallState::Installed)).await?;
    say("5. The grants were created, then the content was applied as the ServiceAccount (kubectl get olm,deploy,sa,role,rolebinding -n operators):\n");
    let status = installed.status.unwrap_or_default();
    let rows: Vec<Vec<String>> = status
        .applied
        .iter()
        .map(|o| vec![o.kind.clone(), o.namespace.clone().unwrap_or_else(|| "-".into()), o.name.clone()])
        .collect();
    say(&olmv2::bundle_command::table(&["KIND", "NAMESPACE", "NAME"], &rows));
    for condition in &status.conditions {
        say(&format!("   {:<20} {:<8} {}", condition.type_, condition.status, condition.reason));
    }
    say("\nExplore with kubectl (see the KUBECONFIG line above): kubectl get installs; kubectl describe install plumbus (its events at the end);\nkubectl get events -n default. The registry stays up while this runs.\n");
    Ok(registry)
}
