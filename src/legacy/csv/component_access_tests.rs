use super::*;
use crate::legacy::csv::certs::fixtures::csv;

fn described(csv: &ClusterServiceVersion) -> Vec<String> {
    needs(csv)
        .iter()
        .map(|need| {
            let checks: Vec<String> = need
                .checks
                .iter()
                .map(|c| {
                    format!(
                        "{} {}/{} {} @{}",
                        c.verb,
                        c.group,
                        c.resource,
                        c.name,
                        c.namespace.as_deref().unwrap_or("*")
                    )
                })
                .collect();
            checks.join(" | ")
        })
        .collect()
}

#[test]
fn every_kind_of_object_made_for_the_author_is_checked() {
    assert_eq!(
        described(&csv()),
        [
            "create /services  @ops",
            "patch /services  @ops",
            "create /secrets  @ops",
            "patch /secrets  @ops",
            "create rbac.authorization.k8s.io/roles  @ops",
            "patch rbac.authorization.k8s.io/roles  @ops",
            "create rbac.authorization.k8s.io/rolebindings  @ops",
            "patch rbac.authorization.k8s.io/rolebindings  @ops",
            "get /secrets api-service-cert @ops | escalate rbac.authorization.k8s.io/roles api-service-cert @ops",
            "get /secrets api-service-cert @ops | bind rbac.authorization.k8s.io/roles api-service-cert @ops",
            "get /secrets hooks-service-cert @ops | escalate rbac.authorization.k8s.io/roles hooks-service-cert @ops",
            "get /secrets hooks-service-cert @ops | bind rbac.authorization.k8s.io/roles hooks-service-cert @ops",
            "create rbac.authorization.k8s.io/clusterrolebindings  @*",
            "patch rbac.authorization.k8s.io/clusterrolebindings  @*",
            "bind rbac.authorization.k8s.io/clusterroles system:auth-delegator @*",
            "create rbac.authorization.k8s.io/rolebindings  @kube-system",
            "patch rbac.authorization.k8s.io/rolebindings  @kube-system",
            "bind rbac.authorization.k8s.io/roles extension-apiserver-authentication-reader @kube-system",
            "create apiregistration.k8s.io/apiservices  @*",
            "patch apiregistration.k8s.io/apiservices  @*",
            "create admissionregistration.k8s.io/validatingwebhookconfigurations  @*",
            "patch admissionregistration.k8s.io/validatingwebhookconfigurations  @*",
            "create admissionregistration.k8s.io/mutatingwebhookconfigurations  @*",
            "patch admissionregistration.k8s.io/mutatingwebhookconfigurations  @*",
            "update apiextensions.k8s.io/customresourcedefinitions spells.example.com @*",
        ]
    );
}

#[test]
fn webhooks_alone_need_no_aggregated_api_server_bindings() {
    let mut csv = csv();
    csv.spec.api_service_definitions = None;
    csv.spec.webhook_definitions.retain(|w| w.webhook_type == WebhookAdmissionType::MutatingAdmissionWebhook);
    let described = described(&csv);
    assert!(
        described.iter().all(|d| !d.contains("clusterrolebindings") && !d.contains("apiservices")),
        "{described:?}"
    );
    assert!(described.iter().any(|d| d.contains("mutatingwebhookconfigurations")));
    assert!(described.iter().all(|d| !d.contains("validatingwebhookconfigurations")));
}

#[test]
fn a_csv_without_components_needs_nothing() {
    let mut csv = csv();
    csv.spec.api_service_definitions = None;
    csv.spec.webhook_definitions.clear();
    assert!(needs(&csv).is_empty());
}

#[test]
fn refusals_name_the_author_and_what_they_may_not_do() {
    let needs = needs(&csv());
    let mutating = needs.iter().find(|n| n.checks[0].resource == "mutatingwebhookconfigurations").expect("need");
    assert_eq!(
        refusal("mallory", mutating),
        "the CSV's author mallory may not create mutatingwebhookconfigurations, so its webhook configurations are not \
         created for them"
    );
    assert_eq!(
        refusal("mallory", &needs[0]),
        "the CSV's author mallory may not create services in namespace ops, so its Services are not created for them"
    );
    assert_eq!(
        refusal("mallory", &needs[8]),
        "the CSV's author mallory may not get secret api-service-cert in namespace ops (nor escalate its Role), so \
         its certificate Roles are not created for them"
    );
    assert_eq!(
        refusal("mallory", &needs[9]),
        "the CSV's author mallory may not get secret api-service-cert in namespace ops (nor bind its Role), so its \
         certificate RoleBindings are not created for them"
    );
    let delegator = needs.iter().find(|n| n.checks[0].verb == "bind" && n.checks[0].namespace.is_none()).expect("need");
    assert_eq!(
        refusal("mallory", delegator),
        "the CSV's author mallory may not bind clusterrole system:auth-delegator, so its system:auth-delegator \
         ClusterRoleBindings are not created for them"
    );
}
