//! Whether a CSV's author may have its APIServices and webhooks installed: every kind of object the install
//! makes for them (Services, certificate Secrets, the Role and RoleBinding reading them, the aggregated API
//! server's bindings, APIServices, webhook configurations, CRD conversion) is one the author must be allowed, by
//! SubjectAccessReview, to create by hand (and to patch, where the install applies over an object of the name;
//! to hold what the roles it makes grant or `escalate` them, and to hold it or `bind` the roles it binds: for
//! `system:auth-delegator`, `bind` only, stricter than RBAC, which would also take holding its rules). OLM v0 makes them with its own rights, so a CSV would let anyone who
//! may write one register a webhook that sees every object of the cluster; here writing a CSV never does more than
//! its author could do.

use crate::access::{allowed, AccessCheck};
use crate::api::v1alpha1::{ClusterServiceVersion, WebhookAdmissionType};
use crate::api::v2alpha1::Requester;

use super::certs::{secret_name, served, service_name, AUTH_DELEGATOR, AUTH_READER, KUBE_SYSTEM};

/// One thing the author must be allowed: any of `checks`, for the objects named `objects`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    pub checks: Vec<AccessCheck>,
    pub objects: String,
}

fn need(check: AccessCheck, objects: &str) -> Need {
    Need { checks: vec![check], objects: objects.to_owned() }
}

/// Creating and patching one kind (the install server-side applies it, over an object of the name if one exists).
fn written(needs: &mut Vec<Need>, namespace: Option<&str>, group: &str, resource: &str, objects: &str) {
    for verb in ["create", "patch"] {
        needs.push(need(AccessCheck::resource(namespace, verb, group, resource, ""), objects));
    }
}

/// Everything the install of `csv`'s APIServices and webhooks needs its author to be allowed, in install order.
pub fn needs(csv: &ClusterServiceVersion) -> Vec<Need> {
    let namespace = csv.metadata.namespace.clone().unwrap_or_default();
    let ns = Some(namespace.as_str());
    let rbac = "rbac.authorization.k8s.io";
    let mut needs = Vec::new();
    let served = served(csv);
    if !served.is_empty() {
        written(&mut needs, ns, "", "services", "Services");
        written(&mut needs, ns, "", "secrets", "certificate Secrets");
        written(&mut needs, ns, rbac, "roles", "certificate Roles");
        written(&mut needs, ns, rbac, "rolebindings", "certificate RoleBindings");
    }
    for deployment in served.keys() {
        // Making the Role needs what it grants (reading the Secret) or `escalate`, and binding it that or `bind`
        // on it, as RBAC checks them.
        let secret = secret_name(&service_name(deployment));
        needs.push(Need {
            checks: vec![
                AccessCheck::resource(ns, "get", "", "secrets", &secret),
                AccessCheck::resource(ns, "escalate", rbac, "roles", &secret),
            ],
            objects: "certificate Roles".to_owned(),
        });
        needs.push(Need {
            checks: vec![
                AccessCheck::resource(ns, "get", "", "secrets", &secret),
                AccessCheck::resource(ns, "bind", rbac, "roles", &secret),
            ],
            objects: "certificate RoleBindings".to_owned(),
        });
    }
    if served.values().any(|served| served.api_service) {
        let delegator = "system:auth-delegator ClusterRoleBindings";
        written(&mut needs, None, rbac, "clusterrolebindings", delegator);
        needs.push(need(AccessCheck::resource(None, "bind", rbac, "clusterroles", AUTH_DELEGATOR), delegator));
        let reader = "authentication-reader RoleBindings";
        written(&mut needs, Some(KUBE_SYSTEM), rbac, "rolebindings", reader);
        needs.push(need(AccessCheck::resource(Some(KUBE_SYSTEM), "bind", rbac, "roles", AUTH_READER), reader));
        written(&mut needs, None, "apiregistration.k8s.io", "apiservices", "APIServices");
    }
    let kinds = [
        (WebhookAdmissionType::ValidatingAdmissionWebhook, "validatingwebhookconfigurations"),
        (WebhookAdmissionType::MutatingAdmissionWebhook, "mutatingwebhookconfigurations"),
    ];
    for (kind, resource) in kinds {
        if csv.spec.webhook_definitions.iter().any(|webhook| webhook.webhook_type == kind) {
            // Created, or patched when found by their labels.
            written(&mut needs, None, "admissionregistration.k8s.io", resource, "webhook configurations");
        }
    }
    let conversions =
        csv.spec.webhook_definitions.iter().filter(|w| w.webhook_type == WebhookAdmissionType::ConversionWebhook);
    for crd in conversions.flat_map(|webhook| &webhook.conversion_crds) {
        let check = AccessCheck::resource(None, "update", "apiextensions.k8s.io", "customresourcedefinitions", crd);
        needs.push(need(check, "conversion webhooks"));
    }
    needs.dedup();
    needs
}

/// The CSV's failure message when `author` lacks `need` (the first of its checks says what they may not do).
pub fn refusal(author: &str, need: &Need) -> String {
    let Some(check) = need.checks.first() else { return String::new() };
    let object = if check.name.is_empty() {
        check.resource.clone()
    } else {
        format!("{} {}", singular(&check.resource), check.name)
    };
    let place = match &check.namespace {
        Some(namespace) => format!(" in namespace {namespace}"),
        None => String::new(),
    };
    let alternatives = match need.checks.get(1) {
        Some(other) => format!(" (nor {} its Role)", other.verb),
        None => String::new(),
    };
    format!(
        "the CSV's author {author} may not {} {object}{place}{alternatives}, so its {} are not created for them",
        check.verb, need.objects
    )
}

fn singular(resource: &str) -> &str {
    resource.strip_suffix('s').unwrap_or(resource)
}

/// Whether `author` holds every need of `csv`: Err(the refusal of the first they lack).
pub async fn author_may_install(
    client: &kube::Client,
    author: &Requester,
    csv: &ClusterServiceVersion,
) -> Result<Result<(), String>, kube::Error> {
    for need in needs(csv) {
        let mut held = false;
        for check in &need.checks {
            if allowed(client, author, check).await? {
                held = true;
                break;
            }
        }
        if !held {
            return Ok(Err(refusal(&author.username, &need)));
        }
    }
    Ok(Ok(()))
}

#[cfg(test)]
#[path = "component_access_tests.rs"]
mod tests;
