//! The structural-schema and CRD checks against what kube-apiserver answers.

use super::*;
use serde_json::json;

fn crd_with_schema(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]
        }
    })
}

fn messages(crd: &Value) -> Vec<String> {
    validate_crd(crd).iter().map(ToString::to_string).collect()
}

#[test]
fn typed_schema_is_accepted() {
    let crd = crd_with_schema(json!({
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}},
            "spec": {"type": "object", "properties": {
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "blob": {"x-kubernetes-preserve-unknown-fields": true},
                "kind": {"type": "string", "enum": ["A", "B"]},
                "a": {"type": "string"},
            },
            "oneOf": [{"required": ["a"]}, {"properties": {"kind": {"enum": ["B"]}}}]}
        }
    }));
    assert_eq!(messages(&crd), Vec::<String>::new());
}

#[test]
fn untyped_field_is_refused() {
    let crd = crd_with_schema(json!({"type": "object", "properties": {"spec": {"properties": {}}}}));
    assert_eq!(
        messages(&crd),
        vec!["spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified fields"]
    );
}

#[test]
fn root_must_be_an_object() {
    let crd = crd_with_schema(json!({"type": "string"}));
    assert_eq!(
        messages(&crd),
        vec!["spec.versions[0].schema.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root"]
    );
}

#[test]
fn type_or_description_inside_a_junctor_is_refused() {
    let crd = crd_with_schema(json!({"type": "object", "properties": {"a": {"type": "string"}},
        "oneOf": [{"type": "object"}, {"description": "x", "required": ["a"]}]}));
    assert_eq!(
        messages(&crd),
        vec![
            "spec.versions[0].schema.openAPIV3Schema.oneOf[0].type: Forbidden: must be empty to be structural",
            "spec.versions[0].schema.openAPIV3Schema.oneOf[1].description: Forbidden: must be empty to be structural",
        ]
    );
}

#[test]
fn junctor_property_absent_outside_is_refused() {
    let crd = crd_with_schema(json!({"type": "object", "properties": {"a": {"type": "string"}},
        "anyOf": [{"properties": {"b": {"enum": ["x"]}}}]}));
    assert_eq!(
        messages(&crd),
        vec!["spec.versions[0].schema.openAPIV3Schema.anyOf[0].properties[b]: Forbidden: must have a corresponding property outside of value validations"]
    );
}

#[test]
fn metadata_may_restrict_only_name_and_generate_name() {
    let crd = crd_with_schema(json!({"type": "object", "properties": {"metadata": {"type": "object",
        "properties": {"labels": {"type": "object"}}}}}));
    assert_eq!(
        messages(&crd),
        vec!["spec.versions[0].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"]
    );
    let described =
        crd_with_schema(json!({"type": "object", "properties": {"metadata": {"type": "object", "description": "x",
        "properties": {"name": {"type": "string"}}}}}));
    assert_eq!(
        messages(&described),
        vec!["spec.versions[0].schema.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"]
    );
}

#[test]
fn unsupported_keywords_and_mixed_object_shapes_are_refused() {
    let crd = crd_with_schema(json!({"type": "object", "properties": {
        "a": {"$ref": "#/definitions/x", "type": "string"},
        "b": {"type": "array", "items": [{"type": "string"}]},
        "c": {"type": "array", "uniqueItems": true, "items": {"type": "string"}},
        "d": {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}},
        "e": {"type": "array"},
    }}));
    assert_eq!(
        messages(&crd),
        vec![
            "spec.versions[0].schema.openAPIV3Schema.properties[a].$ref: Forbidden: $ref is not supported",
            "spec.versions[0].schema.openAPIV3Schema.properties[b].items: Forbidden: items must be a schema object and not an array",
            "spec.versions[0].schema.openAPIV3Schema.properties[c].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            "spec.versions[0].schema.openAPIV3Schema.properties[d].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            "spec.versions[0].schema.openAPIV3Schema.properties[e].items: Required value: must be specified",
        ]
    );
}

#[test]
fn names_versions_and_columns_are_checked() {
    let mut crd = crd_with_schema(json!({"type": "object"}));
    crd["metadata"]["name"] = json!("widget.example.com");
    crd["spec"]["versions"] = json!([
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}},
         "additionalPrinterColumns": [{"name": "A", "type": "text", "jsonPath": "spec.a"}, {"name": "A", "type": "string", "jsonPath": ".a"}]},
        {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
    ]);
    assert_eq!(
        messages(&crd),
        vec![
            "metadata.name: Invalid value: must be spec.names.plural+\".\"+spec.group",
            "spec.versions[0].additionalPrinterColumns[0].type: Invalid value: must be one of integer, number, string, boolean, date",
            "spec.versions[0].additionalPrinterColumns[0].jsonPath: Invalid value: must be a simple json path starting with .",
            "spec.versions[0].additionalPrinterColumns[1].name: Duplicate value: \"A\"",
            "spec.versions[1].name: Duplicate value: \"v1\"",
            "spec.versions: Invalid value: must have exactly one version marked as storage version",
        ]
    );
}

#[test]
fn dns1035_labels() {
    assert!(is_dns1035_label("csv"));
    assert!(is_dns1035_label("a-1"));
    assert!(!is_dns1035_label("1a"));
    assert!(!is_dns1035_label("A"));
    assert!(!is_dns1035_label("a-"));
    assert!(!is_dns1035_label(""));
}

#[test]
fn a_crd_of_a_protected_group_needs_the_api_approval_annotation_as_kube_apiserver_asks() {
    let crd = |group: &str, approval: Option<&str>| {
        let mut crd = crd_with_schema(json!({"type": "object"}));
        crd["spec"]["group"] = json!(group);
        crd["metadata"]["name"] = json!(format!("widgets.{group}"));
        if let Some(approval) = approval {
            crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": approval});
        }
        crd
    };
    let shown = |errors: Vec<FieldError>| errors.iter().map(ToString::to_string).collect::<Vec<_>>();
    // The message kube-apiserver v1.37 answered for such a CRD.
    assert_eq!(
        shown(validate_api_approval(&crd("rbac.authorization.k8s.io", None), None)),
        ["metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation"]
    );
    for protected in ["k8s.io", "x.kubernetes.io", "kubernetes.io"] {
        assert_eq!(validate_api_approval(&crd(protected, None), None).len(), 1, "{protected}");
    }
    assert!(validate_api_approval(&crd("example.com", None), None).is_empty(), "not protected");
    assert!(validate_api_approval(&crd("notk8s.io", None), None).is_empty(), "only the domain and its subdomains");
    assert!(validate_api_approval(&crd("x.k8s.io", Some("unapproved, testing")), None).is_empty());
    assert!(validate_api_approval(
        &crd("x.k8s.io", Some("https://github.com/kubernetes/enhancements/pull/1111")),
        None
    )
    .is_empty());
    assert_eq!(
        validate_api_approval(&crd("x.k8s.io", Some("approved")), None).len(),
        1,
        "neither a URL nor unapproved"
    );
    // An update keeping the state it had is never refused for it.
    let missing = crd("x.k8s.io", None);
    assert!(validate_api_approval(&missing, Some(&missing)).is_empty());
}
