//! The newcomer's walkthrough the `olmv2-control-plane` binary runs: the sample plumbus bundle pushed to a local
//! registry, an Install of it, its pending permissions, an approval by the admin, and what then runs; then the
//! single entry point, an Operator for the grumbo bundle, whose Install waits for the same approval and whose status
//! gathers what it installed. Each step prints the kubectl command that does the same by hand.

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use olmv2::api::v2alpha1::{Install, InstallState, Operator, OperatorState};
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
    #[error("{0} did not reach {1} within a minute")]
    Timeout(String, &'static str),
}

fn api(action: &'static str) -> impl FnOnce(kube::Error) -> WalkthroughError {
    move |source| WalkthroughError::Api { action, source }
}

fn say(text: &str) {
    let _ = olmv2::output::write(&format!("{text}\n"));
}

async fn wait_for<K>(
    objects: &Api<K>,
    name: &str,
    wanted: &'static str,
    done: impl Fn(&K) -> bool,
) -> Result<K, WalkthroughError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for _ in 0..600 {
        if let Some(object) = objects.get_opt(name).await.map_err(api("reading the walkthrough's objects"))? {
            if done(&object) {
                return Ok(object);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(WalkthroughError::Timeout(name.to_owned(), wanted))
}

/// How the Deployments of the walkthrough's Installs become Available.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rollouts {
    /// Reported by the walkthrough once the content is applied ([`crate::project::report_rollouts`]): the emulator
    /// runs no Deployment controller.
    Reported,
    /// By the cluster's own Deployment and ReplicaSet controllers, from pods something marks Ready (on the real
    /// control plane, [`crate::real::spawn_kubelet`]).
    ByTheCluster,
}

/// Approves Install `name` as the admin, then, once its content is applied, reports its rollouts done when the
/// cluster does not.
async fn approve_and_roll_out(admin: &kube::Client, name: &str, rollouts: Rollouts) -> Result<(), WalkthroughError> {
    let installs = Api::<Install>::all(admin.clone());
    installs
        .patch(name, &PatchParams::default(), &Patch::Merge(&json!({"spec": {"approval": "Approved"}})))
        .await
        .map_err(api("approving the Install"))?;
    wait_for(&installs, name, "Applying", |i| {
        matches!(state(i), Some(InstallState::Applying | InstallState::Installed))
    })
    .await?;
    if rollouts == Rollouts::ByTheCluster {
        return Ok(());
    }
    crate::project::report_rollouts(admin, "operators").await.map_err(api("marking the Deployments available"))
}

async fn push(registry: &Registry, bundle: &Path, image: &str) -> Result<(), WalkthroughError> {
    let options = olmv2::bundle::image::RegistryOptions {
        insecure_registries: vec![registry.host.clone()],
        ..olmv2::bundle::image::RegistryOptions::default()
    };
    olmv2::bundle::image::ImageClient::new(options)
        .push_bundle(bundle, image, false)
        .await
        .map(|_| ())
        .map_err(|e| WalkthroughError::Push(olmv2::category::report(&e)))
}

fn state(install: &Install) -> Option<InstallState> {
    install.status.as_ref().and_then(|s| s.state)
}

/// Runs the walkthrough as `admin` with `registry` (which the controller may reach); the registry is handed back
/// to keep serving for the reader's own Installs. `controller_log`, when given, is where the controller's log lines
/// go (named first, and kept out of the steps).
pub async fn run(
    admin: kube::Client,
    bundles: &Path,
    registry: Registry,
    rollouts: Rollouts,
    controller_log: Option<&Path>,
) -> Result<Registry, WalkthroughError> {
    say("== Walkthrough: installing the sample plumbus operator ==\n");
    if let Some(log) = controller_log {
        say(&format!("The controller's log lines go to {} (tail -f it beside these steps).\n", log.display()));
    }
    let image = registry.reference("plumbus-bundle:v2.0.0-alpha");
    push(&registry, &bundles.join("plumbus/2.0.0-alpha"), &image).await?;
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

    let pending =
        wait_for(&installs, "plumbus", "PendingApproval", |i| state(i) == Some(InstallState::PendingApproval)).await?;
    say("3. The controller pulled the bundle, assigned a ServiceAccount and computed what it lacks (kubectl get install plumbus; olmv2 approve plumbus):\n");
    say(&olmv2::cmd::approve::describe_pending(&pending));

    say("4. The cluster admin, who holds all of these, approves (kubectl patch install plumbus --type merge -p '{\"spec\":{\"approval\":\"Approved\"}}').");
    say("   The webhook checks each rule with a SubjectAccessReview for the admin; a user lacking any would be refused.\n");
    approve_and_roll_out(&admin, "plumbus", rollouts).await?;
    let installed = wait_for(&installs, "plumbus", "Installed", |i| state(i) == Some(InstallState::Installed)).await?;
    say("5. The grants were created, then the content was applied as the ServiceAccount (kubectl get olm,deploy,sa,role,rolebinding -n operators):\n");
    let status = installed.status.unwrap_or_default();
    let rows: Vec<Vec<String>> = status
        .applied
        .iter()
        .map(|o| vec![o.kind.clone(), o.namespace.clone().unwrap_or_else(|| "-".into()), o.name.clone()])
        .collect();
    say(&olmv2::output::table(&["KIND", "NAMESPACE", "NAME"], &rows));
    for condition in &status.conditions {
        say(&format!("   {:<20} {:<8} {}", condition.type_, condition.status, condition.reason));
    }
    operator(&admin, bundles, &registry, rollouts).await?;
    say("\nExplore with kubectl (see the KUBECONFIG line above): kubectl get operators,installs; kubectl describe install plumbus\n(its events at the end); kubectl get operator grumbo -o yaml; kubectl get events -n default.\nThe registry stays up while this runs.\n");
    Ok(registry)
}

/// The single entry point: an Operator for the grumbo bundle, approved through its Install, and its status.
async fn operator(
    admin: &kube::Client,
    bundles: &Path,
    registry: &Registry,
    rollouts: Rollouts,
) -> Result<(), WalkthroughError> {
    let image = registry.reference("grumbo-bundle:v1.0.0");
    push(registry, &bundles.join("grumbo/1.0.0"), &image).await?;
    let operators = Api::<Operator>::all(admin.clone());
    let body = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": {"name": "grumbo"},
        "spec": {"updates": {"type": "ManifestImage", "manifestImage": image}}});
    operators
        .patch("grumbo", &PatchParams::apply("walkthrough"), &Patch::Apply(&body))
        .await
        .map_err(api("creating the Operator"))?;
    say("\n6. The usual entry point is an Operator (kubectl apply -f operator.yaml); here one for the grumbo bundle, which\n   provides the Grumbo API plumbus requires:\n");
    say(&serde_yaml_ng::to_string(&body).unwrap_or_default());
    let operator_state = |o: &Operator| o.status.as_ref().and_then(|s| s.state);
    wait_for(&operators, "grumbo", "PendingApproval", |o| operator_state(o) == Some(OperatorState::PendingApproval))
        .await?;
    let installs = Api::<Install>::all(admin.clone());
    let pending =
        wait_for(&installs, "grumbo", "PendingApproval", |i| state(i) == Some(InstallState::PendingApproval)).await?;
    say("7. It made an Install of the same name, which waits for approval like any other (kubectl get operator grumbo shows\n   InstallPendingApproval; olmv2 approve grumbo):\n");
    say(&olmv2::cmd::approve::describe_pending(&pending));
    approve_and_roll_out(admin, "grumbo", rollouts).await?;
    let installed =
        wait_for(&operators, "grumbo", "Installed", |o| operator_state(o) == Some(OperatorState::Installed)).await?;
    let status = installed.status.unwrap_or_default();
    let metadata = status.metadata.unwrap_or_default();
    say(&format!(
        "8. Approved by the admin, installed, and gathered in the Operator's status: {} {} (kubectl get operator grumbo -o yaml):\n",
        metadata.display_name.unwrap_or_default(),
        metadata.version.unwrap_or_default()
    ));
    let rows: Vec<Vec<String>> = status
        .components
        .map(|c| c.refs)
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            // The telling condition is the one that holds (Installed, Available, ...), when one does.
            let telling = r.conditions.iter().find(|c| c.status == "True").or(r.conditions.first());
            let condition = telling.map(|c| format!("{}={}", c.type_, c.status)).unwrap_or_default();
            vec![r.kind, r.namespace.unwrap_or_else(|| "-".into()), r.name, condition]
        })
        .collect();
    say(&olmv2::output::table(&["KIND", "NAMESPACE", "NAME", "CONDITION"], &rows));
    for condition in &status.conditions {
        say(&format!("   {:<22} {:<8} {}", condition.type_, condition.status, condition.reason));
    }
    Ok(())
}
