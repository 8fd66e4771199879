//! The checks kube-apiserver makes when a CustomResourceDefinition is created: the rules of a structural schema
//! (apiextensions v1), and the consistency of names, versions and printer columns. Objects are plain JSON because
//! that is what arrives at an API server.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::status::{error, ErrorType, FieldError};

const JUNCTORS: [&str; 3] = ["allOf", "anyOf", "oneOf"];
/// Keywords apiextensions.k8s.io/v1 does not accept anywhere in a schema.
const UNSUPPORTED: [&str; 7] =
    ["$ref", "additionalItems", "patternProperties", "dependencies", "definitions", "id", "$schema"];
/// Keywords a structural schema does not accept inside allOf, anyOf, oneOf or not.
const FORBIDDEN_IN_JUNCTORS: [&str; 8] = [
    "type",
    "description",
    "default",
    "additionalProperties",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];
const PRINTER_COLUMN_TYPES: [&str; 5] = ["integer", "number", "string", "boolean", "date"];

/// Every reason kube-apiserver would refuse this apiextensions.k8s.io/v1 CustomResourceDefinition; empty when it
/// would accept it.
pub fn validate_crd(crd: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let group = spec.get("group").and_then(Value::as_str).unwrap_or_default();
    let names = spec.get("names").cloned().unwrap_or(Value::Null);
    let plural = names.get("plural").and_then(Value::as_str).unwrap_or_default();
    let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();

    if group.is_empty() || !group.contains('.') {
        errors.push(error("spec.group", ErrorType::Invalid, "should be a domain with at least one dot"));
    }
    if name != format!("{plural}.{group}") {
        errors.push(error("metadata.name", ErrorType::Invalid, "must be spec.names.plural+\".\"+spec.group"));
    }
    validate_names(&names, &mut errors);
    match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced" | "Cluster") => {}
        _ => errors.push(error("spec.scope", ErrorType::Invalid, "must be one of Cluster, Namespaced")),
    }

    let versions = spec.get("versions").and_then(Value::as_array).cloned().unwrap_or_default();
    if versions.is_empty() {
        errors.push(error(
            "spec.versions",
            ErrorType::Invalid,
            "must have exactly one version marked as storage version",
        ));
    }
    let mut seen = BTreeSet::new();
    let mut storage = 0;
    for (index, version) in versions.iter().enumerate() {
        let path = format!("spec.versions[{index}]");
        let version_name = version.get("name").and_then(Value::as_str).unwrap_or_default();
        if !is_dns1035_label(version_name) {
            errors.push(error(&format!("{path}.name"), ErrorType::Invalid, "must be a DNS-1035 label"));
        }
        if !seen.insert(version_name.to_owned()) {
            errors.push(error(&format!("{path}.name"), ErrorType::Duplicate, format!("\"{version_name}\"")));
        }
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        match version.pointer("/schema/openAPIV3Schema") {
            Some(schema) => {
                errors.extend(validate_structural_schema(schema, &format!("{path}.schema.openAPIV3Schema")))
            }
            None => errors.push(error(
                &format!("{path}.schema.openAPIV3Schema"),
                ErrorType::Required,
                "schemas are required",
            )),
        }
        validate_printer_columns(version, &path, &mut errors);
        if let Some(status) = version.pointer("/subresources/status") {
            if !status.is_object() {
                errors.push(error(&format!("{path}.subresources.status"), ErrorType::Invalid, "must be an object"));
            }
        }
    }
    if !versions.is_empty() && storage != 1 {
        errors.push(error(
            "spec.versions",
            ErrorType::Invalid,
            "must have exactly one version marked as storage version",
        ));
    }
    errors
}

/// The annotation kube-apiserver requires on a CustomResourceDefinition of a protected group (`k8s.io`,
/// `kubernetes.io` and their subdomains): a URL to the API's approval, or a value starting `unapproved`.
const API_APPROVAL_ANNOTATION: &str = "api-approved.kubernetes.io";

/// What kube-apiserver's API approval policy says of a CRD (`validateAPIApproval`): nothing for groups outside the
/// protected ones, nothing when the approval state is the one `old` had; otherwise a missing annotation is required
/// and one that is neither a URL nor `unapproved…` is invalid. Without this, a CRD naming a built-in resource of
/// `rbac.authorization.k8s.io` was accepted here as written and refused by kube-apiserver.
pub fn validate_api_approval(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
    let protected =
        ["k8s.io", "kubernetes.io"].iter().any(|domain| group == *domain || group.ends_with(&format!(".{domain}")));
    if !protected {
        return Vec::new();
    }
    let state = |object: &Value| -> ApprovalState {
        match object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(API_APPROVAL_ANNOTATION))
            .and_then(Value::as_str)
        {
            None => ApprovalState::Missing,
            Some(value) if value.starts_with("unapproved") => ApprovalState::Bypassed,
            Some(value) if value.starts_with("http://") || value.starts_with("https://") => ApprovalState::Approved,
            Some(_) => ApprovalState::Invalid,
        }
    };
    let new = state(crd);
    if old.map(state) == Some(new) {
        return Vec::new();
    }
    let field = format!("metadata.annotations[{API_APPROVAL_ANNOTATION}]");
    match new {
        ApprovalState::Missing => {
            vec![error(&field, ErrorType::Required, "protected groups must have approval annotation")]
        }
        ApprovalState::Invalid => vec![error(&field, ErrorType::Invalid, "not a url")],
        ApprovalState::Approved | ApprovalState::Bypassed => Vec::new(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ApprovalState {
    Missing,
    Invalid,
    Approved,
    Bypassed,
}

fn validate_names(names: &Value, errors: &mut Vec<FieldError>) {
    for field in ["plural", "singular"] {
        if let Some(value) = names.get(field).and_then(Value::as_str) {
            if !is_dns1035_label(value) {
                errors.push(error(&format!("spec.names.{field}"), ErrorType::Invalid, "must be a DNS-1035 label"));
            }
        } else if field == "plural" {
            errors.push(error("spec.names.plural", ErrorType::Required, ""));
        }
    }
    if names.get("kind").and_then(Value::as_str).is_none_or(str::is_empty) {
        errors.push(error("spec.names.kind", ErrorType::Required, ""));
    }
    for field in ["shortNames", "categories"] {
        for (index, value) in names.get(field).and_then(Value::as_array).into_iter().flatten().enumerate() {
            if !value.as_str().is_some_and(is_dns1035_label) {
                errors.push(error(
                    &format!("spec.names.{field}[{index}]"),
                    ErrorType::Invalid,
                    "must be a DNS-1035 label",
                ));
            }
        }
    }
}

fn validate_printer_columns(version: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    for (index, column) in
        version.get("additionalPrinterColumns").and_then(Value::as_array).into_iter().flatten().enumerate()
    {
        let path = format!("{path}.additionalPrinterColumns[{index}]");
        let name = column.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            errors.push(error(&format!("{path}.name"), ErrorType::Required, ""));
        } else if !seen.insert(name.to_owned()) {
            errors.push(error(&format!("{path}.name"), ErrorType::Duplicate, format!("\"{name}\"")));
        }
        let column_type = column.get("type").and_then(Value::as_str).unwrap_or_default();
        if !PRINTER_COLUMN_TYPES.contains(&column_type) {
            errors.push(error(
                &format!("{path}.type"),
                ErrorType::Invalid,
                "must be one of integer, number, string, boolean, date",
            ));
        }
        let json_path = column.get("jsonPath").and_then(Value::as_str).unwrap_or_default();
        if !json_path.starts_with('.') {
            errors.push(error(
                &format!("{path}.jsonPath"),
                ErrorType::Invalid,
                "must be a simple json path starting with .",
            ));
        }
        if column.get("priority").and_then(Value::as_i64).is_some_and(|priority| priority < 0) {
            errors.push(error(&format!("{path}.priority"), ErrorType::Invalid, "must be greater than or equal to 0"));
        }
    }
}

/// The structural-schema rules of apiextensions.k8s.io/v1 for one version's `openAPIV3Schema`.
pub fn validate_structural_schema(root: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match root.get("type").and_then(Value::as_str) {
        Some("object") => {}
        None | Some("") => {
            errors.push(error(&format!("{path}.type"), ErrorType::Required, "must not be empty at the root"))
        }
        Some(other) => errors.push(error(
            &format!("{path}.type"),
            ErrorType::Invalid,
            format!("\"{other}\": must be object at the root"),
        )),
    }
    if let Some(metadata) = root.pointer("/properties/metadata") {
        validate_metadata_schema(metadata, &format!("{path}.properties[metadata]"), &mut errors);
    }
    walk(root, path, NodeRole::Root, &mut errors);
    errors
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum NodeRole {
    Root,
    /// A property, additionalProperties or items node: it must carry a type.
    Specified,
}

fn walk(node: &Value, path: &str, role: NodeRole, errors: &mut Vec<FieldError>) {
    let Some(schema) = node.as_object() else {
        errors.push(error(path, ErrorType::Invalid, "must be a schema object"));
        return;
    };
    check_unsupported(schema, path, errors);
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    let preserve_unknown = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let node_type = schema.get("type").and_then(Value::as_str).unwrap_or_default();

    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errors.push(error(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            ErrorType::Invalid,
            "false: must be true or undefined",
        ));
    }
    if role == NodeRole::Specified && node_type.is_empty() && !int_or_string && !preserve_unknown {
        errors.push(error(&format!("{path}.type"), ErrorType::Required, "must not be empty for specified fields"));
    }
    if int_or_string && !node_type.is_empty() {
        errors.push(error(
            &format!("{path}.type"),
            ErrorType::Invalid,
            "must be empty if x-kubernetes-int-or-string is true",
        ));
    }
    if flag(schema, "x-kubernetes-embedded-resource") && node_type != "object" {
        errors.push(error(
            &format!("{path}.type"),
            ErrorType::Invalid,
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    if schema.contains_key("properties") && schema.contains_key("additionalProperties") {
        errors.push(error(
            &format!("{path}.additionalProperties"),
            ErrorType::Forbidden,
            "additionalProperties and properties are mutual exclusive",
        ));
    }

    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            walk(property, &format!("{path}.properties[{name}]"), NodeRole::Specified, errors);
        }
    }
    match schema.get("additionalProperties") {
        Some(Value::Object(additional)) => walk(
            &Value::Object(additional.clone()),
            &format!("{path}.additionalProperties"),
            NodeRole::Specified,
            errors,
        ),
        Some(Value::Bool(false)) => {
            errors.push(error(&format!("{path}.additionalProperties"), ErrorType::Forbidden, "must not be false"))
        }
        _ => {}
    }
    match schema.get("items") {
        Some(items @ Value::Object(_)) => walk(items, &format!("{path}.items"), NodeRole::Specified, errors),
        Some(Value::Array(_)) => errors.push(error(
            &format!("{path}.items"),
            ErrorType::Forbidden,
            "items must be a schema object and not an array",
        )),
        Some(_) => errors.push(error(&format!("{path}.items"), ErrorType::Invalid, "must be a schema object")),
        None if node_type == "array" => {
            errors.push(error(&format!("{path}.items"), ErrorType::Required, "must be specified"))
        }
        None => {}
    }

    for junctor in JUNCTORS {
        for (index, branch) in schema.get(junctor).and_then(Value::as_array).into_iter().flatten().enumerate() {
            walk_value_validation(branch, schema, &format!("{path}.{junctor}[{index}]"), int_or_string, errors);
        }
    }
    if let Some(not) = schema.get("not") {
        walk_value_validation(not, schema, &format!("{path}.not"), int_or_string, errors);
    }
}

/// A schema inside allOf, anyOf, oneOf or not: it may only validate values, over fields the outer schema specifies.
fn walk_value_validation(
    node: &Value,
    outer: &Map<String, Value>,
    path: &str,
    int_or_string: bool,
    errors: &mut Vec<FieldError>,
) {
    let Some(schema) = node.as_object() else {
        errors.push(error(path, ErrorType::Invalid, "must be a schema object"));
        return;
    };
    check_unsupported(schema, path, errors);
    for keyword in FORBIDDEN_IN_JUNCTORS {
        // The int-or-string pattern `anyOf: [{type: integer}, {type: string}]` is the one allowed use of type.
        let int_or_string_type = keyword == "type"
            && int_or_string
            && matches!(schema.get("type").and_then(Value::as_str), Some("integer" | "string"));
        if schema.contains_key(keyword) && !int_or_string_type {
            errors.push(error(&format!("{path}.{keyword}"), ErrorType::Forbidden, "must be empty to be structural"));
        }
    }
    let outer_properties = outer.get("properties").and_then(Value::as_object);
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let property_path = format!("{path}.properties[{name}]");
            match outer_properties.and_then(|outer| outer.get(name)).and_then(Value::as_object) {
                Some(outer_property) => walk_value_validation(property, outer_property, &property_path, false, errors),
                None => errors.push(error(
                    &property_path,
                    ErrorType::Forbidden,
                    "must have a corresponding property outside of value validations",
                )),
            }
        }
    }
    if let Some(items) = schema.get("items") {
        match outer.get("items").and_then(Value::as_object) {
            Some(outer_items) => walk_value_validation(items, outer_items, &format!("{path}.items"), false, errors),
            None => errors.push(error(
                &format!("{path}.items"),
                ErrorType::Forbidden,
                "must have a corresponding items outside of value validations",
            )),
        }
    }
    for junctor in JUNCTORS {
        for (index, branch) in schema.get(junctor).and_then(Value::as_array).into_iter().flatten().enumerate() {
            walk_value_validation(branch, outer, &format!("{path}.{junctor}[{index}]"), int_or_string, errors);
        }
    }
    if let Some(not) = schema.get("not") {
        walk_value_validation(not, outer, &format!("{path}.not"), int_or_string, errors);
    }
}

/// The root `metadata` may say `type: object` and restrict `name` and `generateName`; anything else there (a
/// description, a value validation, another property) is refused with one error, as kube-apiserver's
/// `validateStructuralMetadataInvariants` does. The `name` and `generateName` schemas are checked as any field.
fn validate_metadata_schema(metadata: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let Some(schema) = metadata.as_object() else { return };
    if schema.get("type").and_then(Value::as_str).is_some_and(|kind| kind != "object") {
        errors.push(error(&format!("{path}.type"), ErrorType::Invalid, "must be object"));
    }
    let properties_allowed = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_none_or(|properties| properties.keys().all(|key| key == "name" || key == "generateName"));
    let other_keys = schema.keys().any(|key| !matches!(key.as_str(), "type" | "properties"));
    if other_keys || !properties_allowed {
        errors.push(error(
            path,
            ErrorType::Forbidden,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

fn check_unsupported(schema: &Map<String, Value>, path: &str, errors: &mut Vec<FieldError>) {
    for keyword in UNSUPPORTED {
        if schema.contains_key(keyword) {
            errors.push(error(
                &format!("{path}.{keyword}"),
                ErrorType::Forbidden,
                format!("{keyword} is not supported"),
            ));
        }
    }
    if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
        errors.push(error(
            &format!("{path}.uniqueItems"),
            ErrorType::Forbidden,
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
}

fn flag(schema: &Map<String, Value>, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

/// A DNS-1035 label: lowercase alphanumerics and `-`, starting with a letter, ending with an alphanumeric, ≤ 63.
pub fn is_dns1035_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

#[cfg(test)]
mod tests;
