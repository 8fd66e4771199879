//! The defaults of pod specs against what kube-apiserver fills in: containers, probes, volumes, what Pods alone
//! get, and the pull policy kube derives from an image reference.

use serde_json::{json, Value};

use super::pulls_latest;
use crate::model::defaults::apply;

fn defaulted(group: &str, kind: &str, mut object: Value) -> Value {
    apply(group, kind, &mut object);
    object
}

#[test]
fn zero_values_of_plain_fields_are_defaulted_as_go_cannot_tell_them_from_absent() {
    let pod = json!({"spec": {"dnsPolicy": "", "restartPolicy": "", "schedulerName": "",
        "containers": [{"name": "a", "image": "a:2", "imagePullPolicy": "", "terminationMessagePath": "",
            "ports": [{"containerPort": 80, "protocol": ""}],
            "livenessProbe": {"timeoutSeconds": 0, "periodSeconds": 0, "successThreshold": 0, "failureThreshold": 0,
                "httpGet": {"port": 80, "path": "", "scheme": ""}}}]}});
    let spec = &defaulted("", "Pod", pod)["spec"];
    assert_eq!(
        (&spec["dnsPolicy"], &spec["restartPolicy"], &spec["schedulerName"]),
        (&json!("ClusterFirst"), &json!("Always"), &json!("default-scheduler"))
    );
    let container = &spec["containers"][0];
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["ports"], json!([{"containerPort": 80, "protocol": "TCP"}]));
    assert_eq!(
        container["livenessProbe"],
        json!({"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3,
            "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}})
    );
}

#[test]
fn image_pull_policy_follows_the_tag() {
    let digest = format!("sha256:{}", "a".repeat(64));
    for (image, latest) in [
        ("nginx", true),
        ("nginx:latest", true),
        ("nginx:1.25", false),
        ("docker.io/library/nginx", true),
        ("localhost:5000/app", true),
        ("localhost:5000/app:v1", false),
        ("registry.example.com:5000/team/app:latest", true),
        ("[::1]:5000/app", true),
        ("MyRegistry/app", true),
        ("a__b/c-d--e", true),
        (&format!("app@{digest}"), false),
        (&format!("app:latest@{digest}"), true),
        ("app@sha256:short", false),
        ("app/Upper", false),
        ("app:bad tag", false),
        ("", false),
    ] {
        assert_eq!(pulls_latest(image), latest, "{image:?}");
        let pod = defaulted("", "Pod", json!({"spec": {"containers": [{"name": "a", "image": image}]}}));
        let expected = if latest { "Always" } else { "IfNotPresent" };
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], expected, "{image:?}");
    }
}

#[test]
fn containers_ports_env_probes_and_hooks() {
    let container = json!({"name": "a", "image": "a:1",
        "ports": [{"containerPort": 8080}, {"containerPort": 53, "protocol": "UDP"}],
        "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "V", "value": "x"}, {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        "readinessProbe": {"grpc": {"port": 9000}, "timeoutSeconds": 5},
        "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
        "lifecycle": {"preStop": {"httpGet": {"port": 80}}, "postStart": {"exec": {"command": ["true"]}}}});
    let spec = defaulted(
        "",
        "Pod",
        json!({"spec": {"initContainers": [container.clone()],
        "containers": [container.clone()], "ephemeralContainers": [container]}}),
    )["spec"]
        .clone();
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        let container = &spec[key][0];
        assert_eq!(
            container["ports"],
            json!([{"containerPort": 8080, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]),
            "{key}"
        );
        assert_eq!(
            container["env"][0]["valueFrom"]["fieldRef"],
            json!({"apiVersion": "v1", "fieldPath": "metadata.name"})
        );
        assert_eq!(container["env"][1], json!({"name": "V", "value": "x"}));
        assert_eq!(container["env"][2]["valueFrom"], json!({"secretKeyRef": {"name": "s", "key": "k"}}));
        assert_eq!(
            container["readinessProbe"],
            json!({"grpc": {"port": 9000, "service": ""}, "timeoutSeconds": 5, "periodSeconds": 10,
                "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(container["startupProbe"]["failureThreshold"], 30);
        assert_eq!(container["startupProbe"]["timeoutSeconds"], 1);
        assert_eq!(container["lifecycle"]["preStop"]["httpGet"], json!({"port": 80, "path": "/", "scheme": "HTTP"}));
        assert_eq!(container["lifecycle"]["postStart"], json!({"exec": {"command": ["true"]}}));
    }
}

#[test]
fn volumes_get_their_sources_defaults() {
    let spec = json!({"containers": [], "volumes": [
        {"name": "empty"},
        {"name": "secret", "secret": {"secretName": "s"}},
        {"name": "config", "configMap": {"name": "c"}},
        {"name": "downward", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"name": "projected", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}},
            {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            {"configMap": {"name": "c"}}]}},
        {"name": "host", "hostPath": {"path": "/var"}},
        {"name": "scratch", "emptyDir": {"medium": "Memory"}},
        {"name": "iscsi", "iscsi": {"targetPortal": "t", "iqn": "i", "lun": 0}},
        {"name": "rbd", "rbd": {"monitors": ["m"], "image": "i"}},
        {"name": "azure", "azureDisk": {"diskName": "d", "diskURI": "u"}},
        {"name": "scaleio", "scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "x"}}},
        {"name": "ephemeral", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}]});
    let volumes = defaulted("", "Pod", json!({"spec": spec}))["spec"]["volumes"].clone();
    let field_ref = json!([{"path": "n", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}]);
    assert_eq!(
        volumes,
        json!([
            {"name": "empty", "emptyDir": {}},
            {"name": "secret", "secret": {"secretName": "s", "defaultMode": 420}},
            {"name": "config", "configMap": {"name": "c", "defaultMode": 420}},
            {"name": "downward", "downwardAPI": {"items": field_ref, "defaultMode": 420}},
            {"name": "projected", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"path": "t", "expirationSeconds": 3600}},
                {"downwardAPI": {"items": field_ref}},
                {"configMap": {"name": "c"}}]}},
            {"name": "host", "hostPath": {"path": "/var", "type": ""}},
            {"name": "scratch", "emptyDir": {"medium": "Memory"}},
            {"name": "iscsi", "iscsi": {"targetPortal": "t", "iqn": "i", "lun": 0, "iscsiInterface": "default"}},
            {"name": "rbd", "rbd": {"monitors": ["m"], "image": "i", "pool": "rbd", "user": "admin",
                "keyring": "/etc/ceph/keyring"}},
            {"name": "azure", "azureDisk": {"diskName": "d", "diskURI": "u", "cachingMode": "ReadWrite",
                "fsType": "ext4", "readOnly": false, "kind": "Shared"}},
            {"name": "scaleio", "scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "x"},
                "storageMode": "ThinProvisioned", "fsType": "xfs"}},
            {"name": "ephemeral", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"],
                "volumeMode": "Filesystem"}}}}
        ])
    );
}

#[test]
fn pods_alone_get_service_links_requests_from_limits_and_host_ports() {
    let spec = json!({"hostNetwork": true, "containers": [{"name": "a", "image": "a:1",
        "ports": [{"containerPort": 8080}, {"containerPort": 9090, "hostPort": 9091}],
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}},
        {"name": "b", "image": "b:1", "resources": {"limits": {}}}]});
    let pod = defaulted("", "Pod", json!({"spec": spec.clone()}));
    assert_eq!(pod["spec"]["enableServiceLinks"], true);
    let first = &pod["spec"]["containers"][0];
    assert_eq!(first["resources"]["requests"], json!({"cpu": "500m", "memory": "1Gi"}));
    assert_eq!(
        first["ports"],
        json!([{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"},
            {"containerPort": 9090, "hostPort": 9091, "protocol": "TCP"}])
    );
    assert_eq!(pod["spec"]["containers"][1]["resources"], json!({"limits": {}}), "no limits, no requests");
    let kept = defaulted("", "Pod", json!({"spec": {"enableServiceLinks": false, "containers": []}}));
    assert_eq!(kept["spec"]["enableServiceLinks"], false);
    let deployment = defaulted("apps", "Deployment", json!({"spec": {"template": {"spec": spec}}}));
    let template = &deployment["spec"]["template"]["spec"];
    assert!(template.get("enableServiceLinks").is_none());
    assert_eq!(template["containers"][0]["resources"]["requests"], json!({"cpu": "500m"}));
    assert!(template["containers"][0]["ports"][0].get("hostPort").is_none());
}

#[test]
fn service_account_is_an_alias_of_service_account_name() {
    let alias = |spec: Value| {
        let pod = defaulted("", "Pod", json!({"spec": spec}));
        (pod["spec"]["serviceAccountName"].clone(), pod["spec"]["serviceAccount"].clone())
    };
    assert_eq!(alias(json!({"serviceAccountName": "a"})), (json!("a"), json!("a")));
    assert_eq!(alias(json!({"serviceAccount": "b"})), (json!("b"), json!("b")));
    assert_eq!(alias(json!({"serviceAccountName": "a", "serviceAccount": "b"})), (json!("a"), json!("a")));
    assert_eq!(alias(json!({})), (Value::Null, Value::Null));
}
