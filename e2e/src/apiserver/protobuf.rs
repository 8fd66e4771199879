//! The Kubernetes protobuf encoding, for the request bodies kubectl sends in it: the `k8s\0` envelope around a
//! `runtime.Unknown`, and the review kinds behind `kubectl auth can-i` and `kubectl auth whoami`, decoded into the
//! JSON the rest of the server reads. Other kinds in protobuf are answered 415 (see the README).

use serde_json::{json, Map, Value};

const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ProtobufError(pub String);

fn error(what: &str) -> ProtobufError {
    ProtobufError(what.to_owned())
}

/// One field of a protobuf message: a number (read and not needed here), or the bytes of a length-delimited value.
enum Field<'a> {
    Number,
    Bytes(&'a [u8]),
}

fn varint(input: &mut &[u8]) -> Result<u64, ProtobufError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first().ok_or_else(|| error("truncated varint"))?;
        *input = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(error("varint too long"))
}

fn fields(mut input: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ProtobufError> {
    let mut found = Vec::new();
    while !input.is_empty() {
        let key = varint(&mut input)?;
        let (number, wire_type) = (key >> 3, key & 7);
        let field = match wire_type {
            0 => {
                varint(&mut input)?;
                Field::Number
            }
            2 => {
                let length = usize::try_from(varint(&mut input)?).map_err(|_| error("length overflow"))?;
                if length > input.len() {
                    return Err(error("truncated field"));
                }
                let (bytes, rest) = input.split_at(length);
                input = rest;
                Field::Bytes(bytes)
            }
            1 => {
                input = input.get(8..).ok_or_else(|| error("truncated fixed64"))?;
                continue;
            }
            5 => {
                input = input.get(4..).ok_or_else(|| error("truncated fixed32"))?;
                continue;
            }
            other => return Err(ProtobufError(format!("unsupported wire type {other}"))),
        };
        found.push((number, field));
    }
    Ok(found)
}

fn text(bytes: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| error("invalid UTF-8 in a string field"))
}

/// Decodes a message whose fields are strings (and repeated strings), naming them per `names`.
fn strings_message(bytes: &[u8], names: &[(u64, &str)], repeated: &[u64]) -> Result<Value, ProtobufError> {
    let mut object = Map::new();
    for (number, field) in fields(bytes)? {
        let (Some((_, name)), Field::Bytes(bytes)) = (names.iter().find(|(n, _)| *n == number), field) else {
            continue;
        };
        let value = text(bytes)?;
        if repeated.contains(&number) {
            if let Some(list) = object.entry(*name).or_insert_with(|| Value::Array(Vec::new())).as_array_mut() {
                list.push(json!(value));
            }
        } else {
            object.insert((*name).to_owned(), json!(value));
        }
    }
    Ok(Value::Object(object))
}

const RESOURCE_ATTRIBUTES: [(u64, &str); 7] =
    [(1, "namespace"), (2, "verb"), (3, "group"), (4, "version"), (5, "resource"), (6, "subresource"), (7, "name")];
const NON_RESOURCE_ATTRIBUTES: [(u64, &str); 2] = [(1, "path"), (2, "verb")];

/// The spec of an access review: resource or non-resource attributes, and for SubjectAccessReview the subject.
fn access_review_spec(bytes: &[u8]) -> Result<Value, ProtobufError> {
    let mut spec = Map::new();
    for (number, field) in fields(bytes)? {
        let Field::Bytes(bytes) = field else { continue };
        match number {
            1 => {
                spec.insert("resourceAttributes".into(), strings_message(bytes, &RESOURCE_ATTRIBUTES, &[])?);
            }
            2 => {
                spec.insert("nonResourceAttributes".into(), strings_message(bytes, &NON_RESOURCE_ATTRIBUTES, &[])?);
            }
            3 => {
                spec.insert("user".into(), json!(text(bytes)?));
            }
            4 => {
                if let Some(groups) = spec.entry("groups").or_insert_with(|| json!([])).as_array_mut() {
                    groups.push(json!(text(bytes)?));
                }
            }
            6 => {
                spec.insert("uid".into(), json!(text(bytes)?));
            }
            _ => {}
        }
    }
    Ok(Value::Object(spec))
}

/// Decodes a protobuf request body into JSON, for the kinds this server reads in protobuf.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| error("missing the k8s protobuf prefix"))?;
    let mut type_meta = json!({});
    let mut raw: &[u8] = &[];
    for (number, field) in fields(envelope)? {
        match (number, field) {
            (1, Field::Bytes(bytes)) => type_meta = strings_message(bytes, &[(1, "apiVersion"), (2, "kind")], &[])?,
            (2, Field::Bytes(bytes)) => raw = bytes,
            _ => {}
        }
    }
    let kind = type_meta["kind"].as_str().unwrap_or_default().to_owned();
    let api_version = type_meta["apiVersion"].as_str().unwrap_or_default().to_owned();
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {}});
    for (number, field) in fields(raw)? {
        let (2, Field::Bytes(bytes)) = (number, field) else { continue };
        object["spec"] = match kind.as_str() {
            "SelfSubjectAccessReview" | "SubjectAccessReview" | "LocalSubjectAccessReview" => {
                access_review_spec(bytes)?
            }
            "SelfSubjectRulesReview" => strings_message(bytes, &[(1, "namespace")], &[])?,
            "SelfSubjectReview" => json!({}),
            other => return Err(ProtobufError(format!("{other} is not accepted in protobuf by this server"))),
        };
    }
    if !matches!(
        kind.as_str(),
        "SelfSubjectAccessReview"
            | "SubjectAccessReview"
            | "LocalSubjectAccessReview"
            | "SelfSubjectRulesReview"
            | "SelfSubjectReview"
    ) {
        return Err(ProtobufError(format!("{kind} is not accepted in protobuf by this server")));
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![u8::try_from((number << 3) | 2).expect("small field number")];
        out.push(u8::try_from(bytes.len()).expect("short"));
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn a_self_subject_access_review_decodes() {
        let attributes = [field(1, b"default"), field(2, b"list"), field(5, b"configmaps")].concat();
        let spec = field(1, &attributes);
        let raw = [field(1, &[]), field(2, &spec)].concat();
        let type_meta = [field(1, b"authorization.k8s.io/v1"), field(2, b"SelfSubjectAccessReview")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let decoded = decode(&body).expect("decodes");
        assert_eq!(decoded["kind"], "SelfSubjectAccessReview");
        assert_eq!(
            decoded["spec"]["resourceAttributes"],
            json!({"namespace": "default", "verb": "list", "resource": "configmaps"})
        );
    }

    #[test]
    fn other_kinds_and_garbage_are_refused() {
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &field(2, b"x"))].concat();
        assert!(decode(&body).is_err());
        assert!(decode(b"k8s\0\xff\xff").is_err());
        assert!(decode(b"{}").is_err());
    }
}
