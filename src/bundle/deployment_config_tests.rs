//! Each rule of `apply_deployment_config`, checked against what OLM v0's `inject` package and its tests do.

use serde_json::{json, Value};

use super::*;

fn config(value: Value) -> DeploymentConfig {
    serde_json::from_value(value).expect("a valid configuration")
}

/// A Deployment with two containers, as the conversion renders one.
fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "plumbus-operator", "namespace": "operators"},
        "spec": {
            "selector": {"matchLabels": {"app": "plumbus"}},
            "template": {
                "metadata": {"labels": {"app": "plumbus"}, "annotations": {"olm.targetNamespaces": "", "team": "bundle"}},
                "spec": {
                    "containers": [
                        {"name": "manager", "image": "m",
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                         "envFrom": [{"configMapRef": {"name": "base"}}],
                         "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                         "resources": {"limits": {"cpu": "1"}}},
                        {"name": "proxy", "image": "p"},
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
                                 "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
                },
            },
        },
    })
}

fn configured(value: Value) -> Value {
    let mut deployment = deployment();
    apply_deployment_config(&mut deployment, &config(value)).expect("applies");
    deployment
}

fn pod(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]
}

#[test]
fn an_empty_configuration_changes_nothing() {
    assert_eq!(configured(json!({})), deployment());
    // The selector is accepted and, as in OLM v0 and v1, ignored.
    assert_eq!(configured(json!({"selector": {"matchLabels": {"app": "other"}}})), deployment());
}

#[test]
fn env_replaces_by_name_in_place_and_appends_the_rest_in_every_container() {
    let out = configured(json!({"env": [{"name": "C", "value": "3"}, {"name": "A", "value": "one"}]}));
    assert_eq!(
        pod(&out)["containers"][0]["env"],
        json!([{"name": "A", "value": "one"}, {"name": "B", "value": "2"}, {"name": "C", "value": "3"}])
    );
    assert_eq!(pod(&out)["containers"][1]["env"], json!([{"name": "C", "value": "3"}, {"name": "A", "value": "one"}]));
}

#[test]
fn env_configured_twice_takes_the_last_value_as_olm_does() {
    // OLM's mergeEnvVars keeps the last value of a name; an absent name is appended once per mention.
    let out = configured(json!({"env": [{"name": "A", "value": "x"}, {"name": "A", "value": "y"}]}));
    assert_eq!(pod(&out)["containers"][0]["env"][0], json!({"name": "A", "value": "y"}));
    assert_eq!(pod(&out)["containers"][1]["env"], json!([{"name": "A", "value": "y"}, {"name": "A", "value": "y"}]));
}

#[test]
fn env_from_is_appended_without_duplicates() {
    let out = configured(json!({"envFrom": [{"configMapRef": {"name": "base"}}, {"secretRef": {"name": "creds"}}]}));
    assert_eq!(
        pod(&out)["containers"][0]["envFrom"],
        json!([{"configMapRef": {"name": "base"}}, {"secretRef": {"name": "creds"}}])
    );
    assert_eq!(
        pod(&out)["containers"][1]["envFrom"],
        json!([{"configMapRef": {"name": "base"}}, {"secretRef": {"name": "creds"}}])
    );
    // A prefix makes another source.
    let prefixed = configured(json!({"envFrom": [{"prefix": "X_", "configMapRef": {"name": "base"}}]}));
    assert_eq!(pod(&prefixed)["containers"][0]["envFrom"].as_array().map(Vec::len), Some(2));
}

#[test]
fn volumes_replace_by_name_and_append_the_rest() {
    let out = configured(json!({"volumes": [
        {"name": "data", "secret": {"secretName": "data"}},
        {"name": "certs", "configMap": {"name": "ca"}},
    ]}));
    assert_eq!(
        pod(&out)["volumes"],
        json!([{"name": "data", "secret": {"secretName": "data"}}, {"name": "certs", "configMap": {"name": "ca"}}])
    );
}

#[test]
fn volume_mounts_replace_by_name_in_every_container() {
    let out = configured(json!({"volumeMounts": [
        {"name": "data", "mountPath": "/var/data", "readOnly": true},
        {"name": "certs", "mountPath": "/certs"},
    ]}));
    assert_eq!(
        pod(&out)["containers"][0]["volumeMounts"],
        json!([{"name": "data", "mountPath": "/var/data", "readOnly": true}, {"name": "certs", "mountPath": "/certs"}])
    );
    assert_eq!(
        pod(&out)["containers"][1]["volumeMounts"],
        json!([{"name": "data", "mountPath": "/var/data", "readOnly": true}, {"name": "certs", "mountPath": "/certs"}])
    );
}

#[test]
fn tolerations_are_appended_unless_an_equal_one_is_there() {
    let out = configured(json!({"tolerations": [
        {"key": "infra", "operator": "Exists", "effect": "NoSchedule", "value": ""},
        {"key": "gpu", "operator": "Equal", "value": "true"},
    ]}));
    // An empty string is Go's absent string: the first is the pod's own toleration.
    assert_eq!(
        pod(&out)["tolerations"],
        json!([{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}, {"key": "gpu", "operator": "Equal", "value": "true"}])
    );
    let timed = configured(
        json!({"tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 0}]}),
    );
    assert_eq!(pod(&timed)["tolerations"].as_array().map(Vec::len), Some(2), "a set number is not an absent one");
}

#[test]
fn resources_replace_those_of_every_container() {
    let out = configured(json!({"resources": {"requests": {"memory": "128Mi"}}}));
    assert_eq!(pod(&out)["containers"][0]["resources"], json!({"requests": {"memory": "128Mi"}}));
    assert_eq!(pod(&out)["containers"][1]["resources"], json!({"requests": {"memory": "128Mi"}}));
    let emptied = configured(json!({"resources": {}}));
    assert_eq!(pod(&emptied)["containers"][0]["resources"], json!({}));
}

#[test]
fn a_node_selector_replaces_the_pods_and_an_empty_one_removes_it() {
    let out = configured(json!({"nodeSelector": {"role": "infra"}}));
    assert_eq!(pod(&out)["nodeSelector"], json!({"role": "infra"}));
    let removed = configured(json!({"nodeSelector": {}}));
    assert!(pod(&removed).get("nodeSelector").is_none());
}

#[test]
fn an_empty_affinity_removes_the_pods_affinity() {
    let out = configured(json!({"affinity": {}}));
    assert!(pod(&out).get("affinity").is_none());
    // Every part emptied is the same.
    let parts = configured(json!({"affinity": {"nodeAffinity": {}, "podAffinity": {}, "podAntiAffinity": {}}}));
    assert!(pod(&parts).get("affinity").is_none());
}

#[test]
fn an_affinity_part_replaces_the_pods_own_and_leaves_the_others() {
    let pod_affinity = json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]});
    let out = configured(json!({"affinity": {"podAffinity": pod_affinity}}));
    assert_eq!(
        pod(&out)["affinity"],
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
               "podAffinity": pod_affinity,
               "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}})
    );
}

#[test]
fn an_empty_affinity_part_removes_only_that_part() {
    // OLM v0 removed the whole affinity for `podAntiAffinity: {}`; OLM v1 removes the anti-affinity alone.
    let out = configured(json!({"affinity": {"podAntiAffinity": {}}}));
    assert_eq!(
        pod(&out)["affinity"],
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}})
    );
    let node = configured(json!({"affinity": {"nodeAffinity": {}}}));
    assert_eq!(
        pod(&node)["affinity"],
        json!({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}})
    );
}

#[test]
fn an_affinity_lands_on_a_pod_without_one_without_its_empty_parts() {
    let mut bare = deployment();
    if let Some(pod) = bare["spec"]["template"]["spec"].as_object_mut() {
        pod.remove("affinity");
    }
    let anti = json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]});
    apply_deployment_config(&mut bare, &config(json!({"affinity": {"podAntiAffinity": anti, "nodeAffinity": {}}})))
        .expect("applies");
    assert_eq!(pod(&bare)["affinity"], json!({"podAntiAffinity": anti}));
}

#[test]
fn annotations_are_added_where_absent_on_the_deployment_and_its_pods() {
    let out = configured(json!({"annotations": {"team": "config", "cost-center": "42", "olm.targetNamespaces": "x"}}));
    assert_eq!(
        out["metadata"]["annotations"],
        json!({"team": "config", "cost-center": "42", "olm.targetNamespaces": "x"})
    );
    // The pod template's own (and OLM's) keep their values.
    assert_eq!(
        out["spec"]["template"]["metadata"]["annotations"],
        json!({"olm.targetNamespaces": "", "team": "bundle", "cost-center": "42"})
    );
}

#[test]
fn a_deployment_without_a_pod_spec_is_left_alone_where_nothing_applies() {
    let mut empty = json!({"metadata": {"name": "x"}, "spec": {}});
    apply_deployment_config(&mut empty, &config(json!({"env": [{"name": "A"}], "annotations": {"a": "b"}})))
        .expect("applies");
    assert_eq!(empty["metadata"]["annotations"], json!({"a": "b"}));
    assert!(empty["spec"]["template"]["spec"].get("containers").is_none());
}

#[test]
fn initial_containers_are_not_configured() {
    let mut with_init = deployment();
    with_init["spec"]["template"]["spec"]["initContainers"] = json!([{"name": "init", "image": "i"}]);
    apply_deployment_config(&mut with_init, &config(json!({"env": [{"name": "A", "value": "x"}]}))).expect("applies");
    assert_eq!(pod(&with_init)["initContainers"], json!([{"name": "init", "image": "i"}]));
}
