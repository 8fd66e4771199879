//! The Kubernetes protobuf encoding of the built-in kinds, as kube-apiserver reads and writes it: the `k8s\0`
//! prefix and the `runtime.Unknown` envelope (type meta, then the object's message), with the messages converted to
//! and from the JSON the rest of the server keeps (`convert`, driven by the generated message `table`). Custom
//! resources have no protobuf form, in Kubernetes as here.
//!
//! Imports nothing of the emulator.

mod convert;
#[cfg(test)]
mod generate;
pub mod table;
#[cfg(test)]
mod tests;
pub mod wire;

use serde_json::{json, Value};

use wire::{put_bytes, Value as WireValue};

pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ProtobufError(pub String);

/// Why a protobuf body was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A kind with no protobuf form (a custom resource): kube-apiserver's 415.
    Unsupported { kind: String },
    /// A body that is not a valid message of its kind: kube-apiserver's 400, naming the kind when it is known.
    Malformed { api_version: String, kind: String, problem: String },
}

/// Decodes a protobuf request body into the JSON form of its object.
pub fn decode(body: &[u8]) -> Result<Value, DecodeError> {
    let malformed = |api_version: &str, kind: &str, problem: String| DecodeError::Malformed {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        problem,
    };
    let Some(envelope) = body.strip_prefix(MAGIC) else {
        return Err(malformed(
            "",
            "",
            format!("provided data does not appear to be a protobuf message, expected prefix {:?}", MAGIC),
        ));
    };
    let (api_version, kind, raw) = read_envelope(envelope).map_err(|e| malformed("", "", e.0))?;
    let table = table::table().map_err(|e| malformed(&api_version, &kind, e.0))?;
    let Some(message) = table.root(&api_version, &kind) else {
        return Err(DecodeError::Unsupported { kind });
    };
    let mut object = convert::decode(table, message, raw).map_err(|e| malformed(&api_version, &kind, e.0))?;
    if let Value::Object(map) = &mut object {
        // Type meta travels in the envelope; JSON carries it in the object.
        map.insert("apiVersion".to_owned(), json!(api_version));
        map.insert("kind".to_owned(), json!(kind));
    }
    Ok(object)
}

/// The type meta and the raw message of a `runtime.Unknown`.
fn read_envelope(envelope: &[u8]) -> Result<(String, String, &[u8]), ProtobufError> {
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (number, value) in wire::fields(envelope, "Unknown")? {
        match (number, value) {
            (1, WireValue::Bytes(type_meta)) => {
                for (number, value) in wire::fields(type_meta, "TypeMeta")? {
                    match (number, value) {
                        (1, WireValue::Bytes(text)) => api_version = String::from_utf8_lossy(text).into_owned(),
                        (2, WireValue::Bytes(text)) => kind = String::from_utf8_lossy(text).into_owned(),
                        (1 | 2, other) => return Err(wrong(other, if number == 1 { "APIVersion" } else { "Kind" })),
                        _ => {}
                    }
                }
            }
            (2, WireValue::Bytes(bytes)) => raw = bytes,
            (1, other) => return Err(wrong(other, "TypeMeta")),
            (2, other) => return Err(wrong(other, "Raw")),
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}

fn wrong(value: WireValue<'_>, field: &str) -> ProtobufError {
    ProtobufError(format!("proto: wrong wireType = {} for field {field}", value.wire_type()))
}

/// Encodes an object (with its `apiVersion` and `kind`) as kube-apiserver writes it in protobuf; `None` when its
/// kind has no protobuf form.
pub fn encode(object: &Value) -> Option<Result<Vec<u8>, ProtobufError>> {
    let api_version = object["apiVersion"].as_str()?;
    let kind = object["kind"].as_str()?;
    let table = table::table().ok()?;
    let message = table.root(api_version, kind)?;
    Some(convert::encode(table, message, object).map(|raw| {
        let mut type_meta = Vec::new();
        put_bytes(&mut type_meta, 1, api_version.as_bytes());
        put_bytes(&mut type_meta, 2, kind.as_bytes());
        let mut out = MAGIC.to_vec();
        put_bytes(&mut out, 1, &type_meta);
        put_bytes(&mut out, 2, &raw);
        // contentEncoding and contentType, empty, as Go's marshaller writes every non-pointer field.
        put_bytes(&mut out, 3, b"");
        put_bytes(&mut out, 4, b"");
        out
    }))
}

/// Whether a response should be protobuf: the first media type the client accepts that this server writes.
/// Watches (`stream=watch`) and tables (`as=Table`) are answered in JSON.
pub fn preferred(accept: &str) -> bool {
    for entry in accept.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let media_type = parts.next().unwrap_or_default();
        let parameters: Vec<&str> = parts.collect();
        match media_type {
            MEDIA_TYPE => return parameters.iter().all(|p| !p.starts_with("as=") && !p.starts_with("stream=")),
            "application/json" | "application/yaml" | "*/*" | "application/*" => return false,
            _ => {}
        }
    }
    false
}
