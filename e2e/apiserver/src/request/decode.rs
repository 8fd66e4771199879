//! The first step of a write: what was sent, decoded as kube-apiserver's codecs decode it. Type meta and the
//! namespace are checked against the URL; built-in kinds go through their Go types (here k8s-openapi's), custom
//! resources are pruned to their schema, and what was dropped is refused, reported or ignored per `fieldValidation`.

use serde_json::{json, Value};

use super::types::{FieldValidation, Target, WriteOptions};
use crate::crds::schema;
use crate::model::builtin;
use crate::status::ApiError;

/// Decodes what was sent: type meta, namespace and pruning of unknown fields (reported per `fieldValidation`).
pub(super) fn decode(
    target: &Target,
    mut body: Value,
    options: &WriteOptions,
) -> Result<(Value, Vec<String>), ApiError> {
    let resource = &target.resource;
    if !body.is_object() {
        return Err(ApiError::bad_request("the body of the request must be a JSON object"));
    }
    for (field, expected) in [("apiVersion", resource.group_version()), ("kind", resource.kind.clone())] {
        match body[field].as_str() {
            None | Some("") => body[field] = json!(expected),
            Some(sent) if sent != expected => {
                let what = if field == "kind" { "kind" } else { "API version" };
                return Err(ApiError::bad_request(format!(
                    "the {what} in the data ({sent}) does not match the expected {what} ({expected})"
                )));
            }
            Some(_) => {}
        }
    }
    if !body["metadata"].is_object() {
        body["metadata"] = json!({});
    }
    if resource.namespaced {
        match body["metadata"]["namespace"].as_str() {
            None | Some("") => body["metadata"]["namespace"] = json!(target.namespace),
            Some(sent) if sent != target.namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            Some(_) => {}
        }
    } else if let Some(metadata) = body["metadata"].as_object_mut() {
        metadata.remove("namespace");
    }
    let mut unknown = Vec::new();
    let decoded = match &resource.schema {
        Some(schema) => {
            unknown = schema::prune(&mut body, schema);
            body
        }
        None => match builtin::decode(&resource.group, &resource.kind, &body) {
            Some(Ok(decoded)) => {
                builtin::unknown_fields(&body, &decoded, "", &mut unknown);
                decoded
            }
            Some(Err(why)) => {
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: {why}",
                    kind = resource.kind,
                    version = resource.version
                )));
            }
            None => body,
        },
    };
    let mut warnings = Vec::new();
    if !unknown.is_empty() {
        match options.field_validation {
            FieldValidation::Strict => {
                let listed: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                    listed.join(", "),
                    kind = resource.kind,
                    version = resource.version
                )));
            }
            FieldValidation::Warn => warnings.extend(unknown.iter().map(|f| format!("unknown field \"{f}\""))),
            FieldValidation::Ignore => {}
        }
    }
    Ok((decoded, warnings))
}
