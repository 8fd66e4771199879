//! Each default of `defaults` (pod specs: `pod::tests`; the kinds added for `apply --prune`: `workloads::tests`,
//! `storage::tests`) against what kube-apiserver fills in, and what it leaves alone: explicit values of pointer
//! fields (even `0`, `false` and `""`) and every kind without defaults.

use serde_json::{json, Value};

use super::apply;

pub(super) fn defaulted(group: &str, kind: &str, mut object: Value) -> Value {
    apply(group, kind, &mut object);
    object
}

/// The pod spec kube gives a template of one container `app` running `image`.
pub(super) fn defaulted_pod_spec(image: &str, pull: &str) -> Value {
    json!({"containers": [{"name": "app", "image": image, "imagePullPolicy": pull,
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
        "securityContext": {}, "terminationGracePeriodSeconds": 30})
}

pub(super) fn template(spec: Value) -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": spec})
}

#[test]
fn a_deployment_gets_kube_defaults() {
    let deployment = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": template(json!({"containers": [{"name": "app", "image": "app:1"}]}))}});
    assert_eq!(
        defaulted("apps", "Deployment", deployment)["spec"],
        json!({"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "template": template(defaulted_pod_spec("app:1", "IfNotPresent"))})
    );
}

#[test]
fn a_replica_set_gets_replicas_and_its_template_defaults_only() {
    let replica_set = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": template(json!({"containers": [{"name": "app", "image": "app"}]}))}});
    assert_eq!(
        defaulted("apps", "ReplicaSet", replica_set)["spec"],
        json!({"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": template(defaulted_pod_spec("app", "Always"))})
    );
}

#[test]
fn explicit_values_of_pointer_fields_are_kept_even_when_zero() {
    let deployment = json!({"spec": {"replicas": 0, "revisionHistoryLimit": 0, "progressDeadlineSeconds": 0,
        "strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}},
        "template": {"spec": {"terminationGracePeriodSeconds": 0, "securityContext": {"runAsNonRoot": false},
            "containers": [{"name": "a", "image": "a:1", "imagePullPolicy": "Never",
                "terminationMessagePath": "/tmp/x", "terminationMessagePolicy": "FallbackToLogsOnError"}],
            "volumes": [{"name": "s", "secret": {"secretName": "s", "defaultMode": 0}},
                {"name": "h", "hostPath": {"path": "/x", "type": "Directory"}}]}}}});
    let spec = &defaulted("apps", "Deployment", deployment.clone())["spec"];
    for field in ["replicas", "revisionHistoryLimit", "progressDeadlineSeconds"] {
        assert_eq!(spec[field], 0, "{field}");
    }
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}})
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["terminationGracePeriodSeconds"], 0);
    assert_eq!(pod["securityContext"], json!({"runAsNonRoot": false}));
    assert_eq!(pod["containers"][0], deployment["spec"]["template"]["spec"]["containers"][0]);
    assert_eq!(pod["volumes"], deployment["spec"]["template"]["spec"]["volumes"]);
}

#[test]
fn recreate_gets_no_rolling_update_and_explicit_ones_are_completed() {
    let recreate = defaulted("apps", "Deployment", json!({"spec": {"strategy": {"type": "Recreate"}}}));
    assert_eq!(recreate["spec"]["strategy"], json!({"type": "Recreate"}));
    let partial = defaulted("apps", "Deployment", json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 2}}}}));
    assert_eq!(
        partial["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": "25%"}})
    );
}

#[test]
fn services_by_type() {
    let service =
        |spec: Value| defaulted("", "Service", json!({"metadata": {"name": "s"}, "spec": spec}))["spec"].clone();
    assert_eq!(
        service(json!({"ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"},
            {"port": 8080, "targetPort": 0}]})),
        json!({"type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                {"port": 53, "protocol": "UDP", "targetPort": "dns"},
                {"port": 8080, "protocol": "TCP", "targetPort": 8080}]})
    );
    assert_eq!(
        service(json!({"type": "NodePort"})),
        json!({"type": "NodePort", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
            "externalTrafficPolicy": "Cluster"})
    );
    assert_eq!(
        service(json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "internalTrafficPolicy": "Local",
            "allocateLoadBalancerNodePorts": false})),
        json!({"type": "LoadBalancer", "sessionAffinity": "None", "internalTrafficPolicy": "Local",
            "externalTrafficPolicy": "Local", "allocateLoadBalancerNodePorts": false})
    );
    assert_eq!(service(json!({"type": "LoadBalancer"}))["allocateLoadBalancerNodePorts"], true);
    assert_eq!(
        service(json!({"type": "ExternalName", "externalName": "example.com"})),
        json!({"type": "ExternalName", "externalName": "example.com", "sessionAffinity": "None"})
    );
    assert_eq!(service(json!({"externalIPs": ["1.2.3.4"]}))["externalTrafficPolicy"], "Cluster");
    assert_eq!(
        service(json!({"sessionAffinity": "ClientIP"}))["sessionAffinityConfig"],
        json!({"clientIP": {"timeoutSeconds": 10800}})
    );
    let kept = json!({"clientIP": {"timeoutSeconds": 60}});
    assert_eq!(
        service(json!({"sessionAffinity": "ClientIP", "sessionAffinityConfig": kept}))["sessionAffinityConfig"],
        kept
    );
    assert!(service(json!({"sessionAffinityConfig": kept})).get("sessionAffinityConfig").is_none());
    let balanced = defaulted(
        "",
        "Service",
        json!({"spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "lb"}, {"ip": "5.6.7.8", "ipMode": "Proxy"}]}}}),
    );
    assert_eq!(
        balanced["status"]["loadBalancer"]["ingress"],
        json!([{"ip": "1.2.3.4", "ipMode": "VIP"}, {"hostname": "lb"}, {"ip": "5.6.7.8", "ipMode": "Proxy"}])
    );
}

#[test]
fn secrets_namespaces_and_endpoints() {
    assert_eq!(defaulted("", "Secret", json!({"data": {}}))["type"], "Opaque");
    assert_eq!(defaulted("", "Secret", json!({"type": "kubernetes.io/tls"}))["type"], "kubernetes.io/tls");
    let namespace = defaulted(
        "",
        "Namespace",
        json!({"metadata": {"name": "n", "labels": {"kubernetes.io/metadata.name": "x", "a": "b"}}}),
    );
    assert_eq!(namespace["metadata"]["labels"], json!({"kubernetes.io/metadata.name": "n", "a": "b"}));
    assert_eq!(namespace["status"], json!({"phase": "Active"}));
    let terminating =
        defaulted("", "Namespace", json!({"metadata": {"name": "n"}, "status": {"phase": "Terminating"}}));
    assert_eq!(terminating["status"]["phase"], "Terminating");
    let unnamed = defaulted("", "Namespace", json!({"metadata": {"generateName": "n-"}}));
    assert!(unnamed["metadata"].get("labels").is_none());
    let endpoints =
        defaulted("", "Endpoints", json!({"subsets": [{"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]}));
    assert_eq!(
        endpoints["subsets"][0]["ports"],
        json!([{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}])
    );
}

#[test]
fn bindings_name_the_groups_of_their_role_and_subjects() {
    for kind in ["RoleBinding", "ClusterRoleBinding"] {
        let binding = defaulted(
            "rbac.authorization.k8s.io",
            kind,
            json!({"roleRef": {"apiGroup": "", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "team", "apiGroup": ""},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}, {"kind": "Other", "name": "x"}]}),
        );
        assert_eq!(binding["roleRef"]["apiGroup"], "rbac.authorization.k8s.io", "{kind}");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"},
                {"kind": "Group", "name": "team", "apiGroup": "rbac.authorization.k8s.io"},
                {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}, {"kind": "Other", "name": "x"}]),
            "{kind}"
        );
    }
}

#[test]
fn webhooks_get_their_policies_selectors_and_timeouts() {
    let webhook = json!({"name": "w.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},
            {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "scope": "Namespaced"}]});
    let defaulted_webhook = |mutating: bool| {
        let mut expected = webhook.clone();
        expected["clientConfig"]["service"]["port"] = json!(443);
        expected["rules"][0]["scope"] = json!("*");
        for (key, value) in [
            ("failurePolicy", json!("Fail")),
            ("matchPolicy", json!("Equivalent")),
            ("namespaceSelector", json!({})),
            ("objectSelector", json!({})),
            ("timeoutSeconds", json!(10)),
        ] {
            expected[key] = value;
        }
        if mutating {
            expected["reinvocationPolicy"] = json!("Never");
        }
        expected
    };
    let group = "admissionregistration.k8s.io";
    let validating = defaulted(group, "ValidatingWebhookConfiguration", json!({"webhooks": [webhook.clone()]}));
    assert_eq!(validating["webhooks"][0], defaulted_webhook(false));
    let mutating = defaulted(group, "MutatingWebhookConfiguration", json!({"webhooks": [webhook.clone()]}));
    assert_eq!(mutating["webhooks"][0], defaulted_webhook(true));
    let explicit = json!({"name": "w", "failurePolicy": "Ignore", "matchPolicy": "Exact", "timeoutSeconds": 0,
        "namespaceSelector": {"matchLabels": {"a": "b"}}, "objectSelector": {"matchLabels": {"c": "d"}},
        "reinvocationPolicy": "IfNeeded", "clientConfig": {"url": "https://example.com"}});
    let kept = defaulted(group, "MutatingWebhookConfiguration", json!({"webhooks": [explicit.clone()]}));
    assert_eq!(kept["webhooks"][0], explicit);
    assert!(validating["webhooks"][0].get("sideEffects").is_some_and(|s| s == "None"), "required, not defaulted");
}

#[test]
fn custom_resource_definitions_and_api_services() {
    let crd = defaulted(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        json!({"spec": {"names": {"kind": "Widget", "plural": "widgets"}}}),
    );
    assert_eq!(
        crd["spec"],
        json!({"names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "conversion": {"strategy": "None"}})
    );
    let webhook = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "ns", "name": "conv"}}}});
    let converted = defaulted(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        json!({"spec": {"names": {"kind": "W",
        "singular": "one", "listKind": "Many"}, "conversion": webhook}}),
    );
    assert_eq!(converted["spec"]["names"], json!({"kind": "W", "singular": "one", "listKind": "Many"}));
    assert_eq!(converted["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"], 443);
    let api_service = defaulted(
        "apiregistration.k8s.io",
        "APIService",
        json!({"spec": {"service": {"namespace": "ns", "name": "api"}}}),
    );
    assert_eq!(api_service["spec"]["service"], json!({"namespace": "ns", "name": "api", "port": 443}));
    let local = defaulted("apiregistration.k8s.io", "APIService", json!({"spec": {"group": "g"}}));
    assert_eq!(local["spec"], json!({"group": "g"}));
}

#[test]
fn kinds_without_defaults_and_custom_resources_are_left_alone_and_defaulting_is_idempotent() {
    for (group, kind) in [
        ("", "ConfigMap"),
        ("", "ServiceAccount"),
        ("", "Event"),
        ("coordination.k8s.io", "Lease"),
        ("rbac.authorization.k8s.io", "Role"),
        ("networking.k8s.io", "Ingress"),
        ("example.com", "Widget"),
    ] {
        let object = json!({"metadata": {"name": "x"}, "data": {}, "spec": {}});
        assert_eq!(defaulted(group, kind, object.clone()), object, "{kind}");
    }
    let once = defaulted(
        "apps",
        "Deployment",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a"}],
        "volumes": [{"name": "v"}]}}}}),
    );
    assert_eq!(defaulted("apps", "Deployment", once.clone()), once);
}
