//! The codec against k8s-pb, kube-rs' prost bindings of the same messages, as an independent implementation of
//! the wire form: what this module writes, prost reads into the Kubernetes types and writes back byte for byte, and
//! what prost writes this module reads back to the same JSON.

use prost::Message as _;
use serde_json::{json, Value};

use super::wire::put_bytes;
use super::{convert, decode, encode, table, DecodeError, MAGIC};

/// Encodes with this module, re-encodes with prost through the k8s-pb type, and decodes prost's bytes.
macro_rules! oracle {
    ($object:expr, $type:ty) => {{
        let object: Value = $object;
        let table = table::table().expect("the table");
        let message = table
            .root(object["apiVersion"].as_str().expect("apiVersion"), object["kind"].as_str().expect("kind"))
            .expect("a served kind");
        let ours = convert::encode(table, message, &object).expect("encodes");
        let typed = <$type>::decode(ours.as_slice()).expect("prost reads what this module writes");
        let theirs = typed.encode_to_vec();
        assert_eq!(ours, theirs, "prost writes {} back differently", object["kind"]);
        let mut read = convert::decode(table, message, &theirs).expect("decodes prost's bytes");
        read["apiVersion"] = object["apiVersion"].clone();
        read["kind"] = object["kind"].clone();
        assert_eq!(read, object);
        read
    }};
}

fn metadata() -> Value {
    json!({
        "name": "sample", "namespace": "team", "uid": "0e0b2c4e-0000-4000-8000-000000000001",
        "resourceVersion": "42", "generation": 3, "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {"app": "plumbus", "tier": "backend"}, "annotations": {"note": "x"},
        "finalizers": ["example.com/keep"],
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-1", "controller": true, "blockOwnerDeletion": false}],
        "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]
    })
}

#[test]
fn config_maps_and_secrets_round_trip() {
    oracle!(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(), "data": {"a": "1", "b": "two"},
            "binaryData": {"bin": "AAEC"}, "immutable": false}),
        k8s_pb::api::core::v1::ConfigMap
    );
    oracle!(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "type": "Opaque", "data": {"token": "c2VjcmV0"}}),
        k8s_pb::api::core::v1::Secret
    );
}

#[test]
fn deployments_keep_pointer_zeros_and_int_or_strings() {
    oracle!(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"a": "b"}},
            "spec": {"replicas": 0, "revisionHistoryLimit": 10, "selector": {"matchLabels": {"app": "d"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "d"}},
                    "spec": {"terminationGracePeriodSeconds": 0, "automountServiceAccountToken": false,
                        "containers": [{"name": "c", "image": "nginx:1.27", "args": ["--port", "8080"],
                            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "env": [{"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                            "securityContext": {"runAsNonRoot": true, "runAsUser": 0, "allowPrivilegeEscalation": false}}],
                        "volumes": [{"name": "v", "secret": {"secretName": "s", "defaultMode": 420}}]}}},
            "status": {"replicas": 1, "conditions": [{"type": "Available", "status": "True", "lastUpdateTime": "2026-01-02T03:04:05Z", "reason": "MinimumReplicasAvailable"}]}}),
        k8s_pb::api::apps::v1::Deployment
    );
}

#[test]
fn rbac_services_and_webhooks_round_trip() {
    oracle!(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"], "resourceNames": ["x"]}, {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}),
        k8s_pb::api::rbac::v1::ClusterRole
    );
    oracle!(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b", "namespace": "n"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "n"}, {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
        k8s_pb::api::rbac::v1::RoleBinding
    );
    oracle!(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
            "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "selector": {"app": "d"},
                "ports": [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}, {"port": 80, "targetPort": 8080}]}}),
        k8s_pb::api::core::v1::Service
    );
    oracle!(
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "w"},
            "webhooks": [{"name": "w.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None", "timeoutSeconds": 10,
                "failurePolicy": "Fail", "clientConfig": {"caBundle": "LS0tLS1CRUdJTg==", "service": {"namespace": "n", "name": "s", "path": "/v", "port": 443}},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "scope": "*"}],
                "namespaceSelector": {}}]}),
        k8s_pb::api::admissionregistration::v1::ValidatingWebhookConfiguration
    );
}

#[test]
fn custom_resource_definitions_keep_their_schema_unions() {
    oracle!(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList", "shortNames": ["th"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {"size": {"type": "integer", "minimum": 0.0, "default": 1},
                                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "closed": {"type": "object", "additionalProperties": false}}}}}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                    "subresources": {"status": {}}}]}}),
        k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition
    );
}

#[test]
fn times_leases_events_and_generic_kinds_round_trip() {
    oracle!(
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2026-01-02T03:04:05.123456Z", "leaseTransitions": 0}}),
        k8s_pb::api::coordination::v1::Lease
    );
    oracle!(
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"}, "eventTime": "2026-01-02T03:04:05.000001Z",
            "reason": "Started", "note": "n", "type": "Normal", "action": "Start", "reportingController": "c", "reportingInstance": "i",
            "regarding": {"kind": "Pod", "name": "p", "namespace": "n"}}),
        k8s_pb::api::events::v1::Event
    );
    oracle!(
        json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "message": "m", "reason": "Invalid", "code": 422,
            "details": {"name": "x", "kind": "ConfigMap", "causes": [{"reason": "FieldValueInvalid", "message": "bad", "field": "data"}]}}),
        k8s_pb::apimachinery::pkg::apis::meta::v1::Status
    );
    oracle!(
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Foreground", "dryRun": ["All"]}),
        k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions
    );
    oracle!(
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {}, "spec": {"audiences": ["api"], "expirationSeconds": 3600}}),
        k8s_pb::api::authentication::v1::TokenRequest
    );
    oracle!(
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "d"}, "spec": {"replicas": 3}, "status": {"replicas": 1, "selector": "app=d"}}),
        k8s_pb::api::autoscaling::v1::Scale
    );
    oracle!(
        json!({"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {"resourceVersion": "7", "continue": "c", "remainingItemCount": 0},
            "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}, {"metadata": {"name": "b"}}]}),
        k8s_pb::api::core::v1::ConfigMapList
    );
}

fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    out
}

#[test]
fn what_go_writes_for_zero_values_reads_as_go_writes_json() {
    // Go's marshaller writes every non-pointer field, so kubectl's bodies carry empty strings, zeros and a zero
    // creation time; the JSON kube-apiserver keeps leaves them out (or writes null for the time).
    let typed = k8s_pb::api::core::v1::ConfigMap {
        metadata: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("cm".into()),
            generate_name: Some(String::new()),
            namespace: Some(String::new()),
            generation: Some(0),
            creation_timestamp: Some(Default::default()),
            ..Default::default()
        }),
        data: [("k".to_owned(), String::new())].into(),
        ..Default::default()
    };
    let body = envelope("v1", "ConfigMap", &typed.encode_to_vec());
    let object = decode(&body).expect("decodes");
    assert_eq!(
        object,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "creationTimestamp": null}, "data": {"k": ""}})
    );
}

#[test]
fn unknown_fields_are_skipped_as_kubernetes_skips_them_and_wrong_types_are_refused() {
    let mut raw = Vec::new();
    put_bytes(&mut raw, 99, b"not a field of ConfigMap");
    let mut data = Vec::new();
    put_bytes(&mut data, 1, b"k");
    put_bytes(&mut data, 2, b"v");
    put_bytes(&mut raw, 2, &data);
    let object = decode(&envelope("v1", "ConfigMap", &raw)).expect("decodes");
    assert_eq!(object["data"], json!({"k": "v"}));
    assert_eq!(object.as_object().map(|o| o.len()), Some(3));

    let mut wrong = Vec::new();
    super::wire::put_number(&mut wrong, 4, 1);
    super::wire::put_number(&mut wrong, 1, 7);
    match decode(&envelope("v1", "ConfigMap", &wrong)) {
        Err(DecodeError::Malformed { kind, problem, .. }) => {
            assert_eq!(kind, "ConfigMap");
            assert_eq!(problem, "proto: wrong wireType = 0 for field Metadata");
        }
        other => panic!("expected a malformed body, got {other:?}"),
    }
}

#[test]
fn garbage_and_custom_resources_are_refused_without_panicking() {
    assert!(matches!(decode(b"{}"), Err(DecodeError::Malformed { .. })));
    assert!(matches!(decode(b"k8s\0\xff\xff"), Err(DecodeError::Malformed { .. })));
    assert!(matches!(decode(&envelope("v1", "ConfigMap", &[0x0a, 0x7f])), Err(DecodeError::Malformed { .. })));
    assert_eq!(
        decode(&envelope("example.com/v1", "Thing", &[])),
        Err(DecodeError::Unsupported { kind: "Thing".into() })
    );
    // Every prefix of a valid body is an error or an object, never a panic.
    let body = encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(), "data": {"a": "b"}}))
        .expect("a served kind")
        .expect("encodes");
    for end in 0..body.len() {
        let _ = decode(&body[..end]);
    }
}

#[test]
fn encoded_objects_decode_to_themselves() {
    let object = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "n"},
        "secrets": [{"name": "t"}], "automountServiceAccountToken": false});
    let body = encode(&object).expect("a served kind").expect("encodes");
    assert!(body.starts_with(MAGIC));
    assert_eq!(decode(&body), Ok(object));
    assert!(encode(&json!({"apiVersion": "example.com/v1", "kind": "Thing"})).is_none());
}

#[test]
fn protobuf_is_answered_only_when_preferred() {
    assert!(super::preferred("application/vnd.kubernetes.protobuf, */*"));
    assert!(super::preferred("application/vnd.kubernetes.protobuf,application/json"));
    assert!(!super::preferred("application/json, application/vnd.kubernetes.protobuf"));
    assert!(!super::preferred("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
    assert!(!super::preferred("application/vnd.kubernetes.protobuf;stream=watch"));
    assert!(!super::preferred(""));
}
