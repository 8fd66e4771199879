//! Messages to and from the JSON the server keeps, driven by the message table. Decoding follows the Go types a
//! protobuf body is read into and the JSON kube-apiserver would then write: a field Go does not know is skipped
//! (protobuf decoding in Kubernetes is never strict), a wrong wire type is an error, and a zero value of a field
//! that is neither a pointer nor required is left out, as `omitempty` leaves it out. Encoding writes the fields the
//! JSON has, in field-number order, maps sorted by key, as Go's generated marshallers do.

use base64::Engine;
use serde_json::{json, Map, Number, Value};

use super::table::{Field, Label, Message, Scalar, Special, Table, Type};
use super::wire::{self, put_bytes, put_fixed64, put_number};
use super::ProtobufError;

fn error(message: impl Into<String>) -> ProtobufError {
    ProtobufError(message.into())
}

fn wrong_wire_type(field: &Field, value: &wire::Value<'_>) -> ProtobufError {
    error(format!("proto: wrong wireType = {} for field {}", value.wire_type(), field.go_name()))
}

/// Decodes one message into its JSON form.
pub fn decode(table: &Table, message: &Message, bytes: &[u8]) -> Result<Value, ProtobufError> {
    if let Some(special) = message.special {
        return decode_special(table, special, message, bytes);
    }
    let mut object = Map::new();
    for (number, value) in wire::fields(bytes, message.name())? {
        // Kubernetes' protobuf decoding skips fields it does not know, whatever fieldValidation says.
        let Some(field) = message.field(number) else { continue };
        match field.label {
            Label::Optional => {
                let decoded = decode_value(table, field, &field.kind, &value)?;
                let zero = is_zero(&decoded) && !matches!(field.kind, Type::Message(_));
                if zero && !field.pointer && !field.required {
                    object.remove(&field.json);
                } else {
                    object.insert(field.json.clone(), decoded);
                }
            }
            Label::Repeated => {
                let items = object.entry(field.json.clone()).or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(items) = items else { continue };
                match (&field.kind, value) {
                    // A packed list of numbers, which Go's decoders also accept.
                    (
                        Type::Scalar(scalar @ (Scalar::Int32 | Scalar::Int64 | Scalar::Bool)),
                        wire::Value::Bytes(mut packed),
                    ) => {
                        while !packed.is_empty() {
                            let number = wire::varint(&mut packed)?;
                            items.push(scalar_value(*scalar, &wire::Value::Varint(number), field)?);
                        }
                    }
                    (kind, value) => items.push(decode_value(table, field, kind, &value)?),
                }
            }
            Label::Inline => {
                if let Value::Object(inlined) = decode_value(table, field, &field.kind, &value)? {
                    object.extend(inlined);
                }
            }
            Label::Map => {
                let wire::Value::Bytes(entry) = value else { return Err(wrong_wire_type(field, &value)) };
                let (key, entry_value) = decode_entry(table, field, entry)?;
                if let Value::Object(map) = object.entry(field.json.clone()).or_insert_with(|| json!({})) {
                    map.insert(key, entry_value);
                }
            }
        }
    }
    Ok(Value::Object(object))
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(text) => text.is_empty(),
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::Bool(flag) => !flag,
        Value::Null => true,
        _ => false,
    }
}

fn decode_entry(table: &Table, field: &Field, bytes: &[u8]) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = None;
    for (number, item) in wire::fields(bytes, &format!("{}Entry", field.go_name()))? {
        match number {
            1 => {
                let wire::Value::Bytes(text) = item else { return Err(wrong_wire_type(field, &item)) };
                key = String::from_utf8_lossy(text).into_owned();
            }
            2 => value = Some(decode_value(table, field, &field.kind, &item)?),
            _ => {}
        }
    }
    let value = match value {
        Some(value) => value,
        None => match &field.kind {
            Type::Scalar(Scalar::String | Scalar::Bytes) => json!(""),
            Type::Scalar(Scalar::Bool) => json!(false),
            Type::Scalar(_) => json!(0),
            Type::Message(id) => decode(table, lookup(table, id)?, &[])?,
        },
    };
    Ok((key, value))
}

fn lookup<'t>(table: &'t Table, id: &str) -> Result<&'t Message, ProtobufError> {
    table.message(id).ok_or_else(|| error(format!("no message {id}")))
}

fn decode_value(table: &Table, field: &Field, kind: &Type, value: &wire::Value<'_>) -> Result<Value, ProtobufError> {
    match kind {
        Type::Scalar(scalar) => scalar_value(*scalar, value, field),
        Type::Message(id) => {
            let wire::Value::Bytes(bytes) = value else { return Err(wrong_wire_type(field, value)) };
            decode(table, lookup(table, id)?, bytes)
        }
    }
}

fn scalar_value(scalar: Scalar, value: &wire::Value<'_>, field: &Field) -> Result<Value, ProtobufError> {
    Ok(match (scalar, value) {
        // Go does not check that a proto2 string is UTF-8; its JSON encoder then replaces invalid bytes.
        (Scalar::String, wire::Value::Bytes(bytes)) => json!(String::from_utf8_lossy(bytes)),
        (Scalar::Bytes, wire::Value::Bytes(bytes)) => json!(base64::engine::general_purpose::STANDARD.encode(bytes)),
        (Scalar::Int32, wire::Value::Varint(number)) => json!(*number as i32),
        (Scalar::Int64, wire::Value::Varint(number)) => json!(*number as i64),
        (Scalar::Bool, wire::Value::Varint(number)) => json!(*number != 0),
        (Scalar::Double, wire::Value::Fixed64(bits)) => {
            let number = f64::from_bits(*bits);
            Value::Number(Number::from_f64(number).ok_or_else(|| error(format!("json: unsupported value: {number}")))?)
        }
        _ => return Err(wrong_wire_type(field, value)),
    })
}

/// The fields of a special message, by number.
fn special_fields<'a>(message: &Message, bytes: &'a [u8]) -> Result<Vec<(u32, wire::Value<'a>)>, ProtobufError> {
    wire::fields(bytes, message.name())
}

fn decode_special(table: &Table, special: Special, message: &Message, bytes: &[u8]) -> Result<Value, ProtobufError> {
    let fields = special_fields(message, bytes)?;
    let number = |n: u32| {
        fields.iter().rev().find_map(|(k, v)| match v {
            wire::Value::Varint(value) if *k == n => Some(*value as i64),
            _ => None,
        })
    };
    let bytes_of = |n: u32| {
        fields.iter().rev().find_map(|(k, v)| match v {
            wire::Value::Bytes(value) if *k == n => Some(*value),
            _ => None,
        })
    };
    let all_bytes = |n: u32| -> Vec<&[u8]> {
        fields
            .iter()
            .filter_map(|(k, v)| match v {
                wire::Value::Bytes(value) if *k == n => Some(*value),
                _ => None,
            })
            .collect()
    };
    let schema = |bytes: &[u8]| -> Result<Value, ProtobufError> {
        let id = "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps";
        decode(table, lookup(table, id)?, bytes)
    };
    Ok(match special {
        Special::Time | Special::MicroTime => {
            let (seconds, nanos) = (number(1).unwrap_or(0), number(2).unwrap_or(0));
            if seconds == 0 && nanos == 0 {
                Value::Null
            } else {
                json!(format_time(seconds, i32::try_from(nanos).unwrap_or(0), special == Special::MicroTime)?)
            }
        }
        Special::Duration => json!(format_duration(number(1).unwrap_or(0))),
        Special::RawJson => match bytes_of(1) {
            None | Some([]) => Value::Null,
            Some(raw) => {
                serde_json::from_slice(raw).map_err(|e| error(format!("invalid JSON in {}: {e}", message.name())))?
            }
        },
        Special::IntOrString => match number(1).unwrap_or(0) {
            1 => json!(bytes_of(3).map(String::from_utf8_lossy).unwrap_or_default()),
            _ => json!(number(2).unwrap_or(0) as i32),
        },
        Special::Quantity => json!(bytes_of(1).map(String::from_utf8_lossy).unwrap_or_default()),
        Special::SchemaOrArray => match bytes_of(1) {
            Some(one) => schema(one)?,
            None => Value::Array(all_bytes(2).into_iter().map(schema).collect::<Result<_, _>>()?),
        },
        Special::SchemaOrBool => match bytes_of(2) {
            Some(one) => schema(one)?,
            None => json!(number(1).unwrap_or(0) != 0),
        },
        Special::SchemaOrStringArray => match bytes_of(1) {
            Some(one) => schema(one)?,
            None => {
                json!(all_bytes(2).into_iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>())
            }
        },
        Special::StringList => {
            json!(all_bytes(1).into_iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect::<Vec<_>>())
        }
    })
}

fn format_time(seconds: i64, nanos: i32, micro: bool) -> Result<String, ProtobufError> {
    let time = jiff::Timestamp::new(seconds, if micro { nanos } else { 0 })
        .map_err(|e| error(format!("a time out of range: {e}")))?;
    let format = if micro { "%Y-%m-%dT%H:%M:%S%.6fZ" } else { "%Y-%m-%dT%H:%M:%SZ" };
    Ok(time.strftime(format).to_string())
}

fn parse_time(text: &str) -> Result<(i64, i32), ProtobufError> {
    let time: jiff::Timestamp = text.parse().map_err(|e| error(format!("a time that is not RFC 3339: {text}: {e}")))?;
    Ok((time.as_second(), time.subsec_nanosecond()))
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let total = nanos.unsigned_abs();
    let fraction = |value: u64, unit: u64, digits: usize| {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            whole.to_string()
        } else {
            let text = format!("{rest:0digits$}");
            format!("{whole}.{}", text.trim_end_matches('0'))
        }
    };
    if total < 1_000 {
        return format!("{sign}{total}ns");
    }
    if total < 1_000_000 {
        return format!("{sign}{}µs", fraction(total, 1_000, 3));
    }
    if total < 1_000_000_000 {
        return format!("{sign}{}ms", fraction(total, 1_000_000, 6));
    }
    let hours = total / 3_600_000_000_000;
    let minutes = (total / 60_000_000_000) % 60;
    let seconds = fraction(total % 60_000_000_000, 1_000_000_000, 9);
    match (hours, minutes) {
        (0, 0) => format!("{sign}{seconds}s"),
        (0, _) => format!("{sign}{minutes}m{seconds}s"),
        _ => format!("{sign}{hours}h{minutes}m{seconds}s"),
    }
}

fn parse_duration(text: &str) -> Result<i64, ProtobufError> {
    let bad = || error(format!("time: invalid duration \"{text}\""));
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.').ok_or_else(bad)?;
        let value: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        total += value * unit;
        rest = &rest[unit_end..];
    }
    Ok(if negative { -(total as i64) } else { total as i64 })
}

/// Encodes the JSON form of a message.
pub fn encode(table: &Table, message: &Message, value: &Value) -> Result<Vec<u8>, ProtobufError> {
    let mut out = Vec::new();
    if let Some(special) = message.special {
        encode_special(table, special, message, value, &mut out)?;
        return Ok(out);
    }
    let Value::Object(object) = value else {
        return Err(error(format!("{} must be an object, not {value}", message.name())));
    };
    for field in &message.fields {
        if field.label == Label::Inline {
            // Go writes an embedded struct even when it is empty.
            encode_value(table, field, value, &mut out)?;
            continue;
        }
        let Some(item) = object.get(&field.json).filter(|v| !v.is_null()) else { continue };
        match field.label {
            Label::Inline => {}
            Label::Optional => encode_value(table, field, item, &mut out)?,
            Label::Repeated => {
                let Value::Array(items) = item else {
                    return Err(error(format!("{} must be a list, not {item}", field.json)));
                };
                for item in items {
                    encode_value(table, field, item, &mut out)?;
                }
            }
            Label::Map => {
                let Value::Object(entries) = item else {
                    return Err(error(format!("{} must be an object, not {item}", field.json)));
                };
                let mut sorted: Vec<(&String, &Value)> = entries.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(b.0));
                for (key, entry_value) in sorted {
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, key.as_bytes());
                    let value_field = Field { number: 2, ..field.clone() };
                    encode_value(table, &value_field, entry_value, &mut entry)?;
                    put_bytes(&mut out, field.number, &entry);
                }
            }
        }
    }
    Ok(out)
}

fn encode_value(table: &Table, field: &Field, value: &Value, out: &mut Vec<u8>) -> Result<(), ProtobufError> {
    let mismatch = || error(format!("{}: cannot encode {value} as {:?}", field.json, field.kind));
    match &field.kind {
        Type::Message(id) => {
            let bytes = encode(table, lookup(table, id)?, value)?;
            put_bytes(out, field.number, &bytes);
        }
        Type::Scalar(Scalar::String) => put_bytes(out, field.number, value.as_str().ok_or_else(mismatch)?.as_bytes()),
        Type::Scalar(Scalar::Bytes) => {
            let text = value.as_str().ok_or_else(mismatch)?;
            let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(|_| mismatch())?;
            put_bytes(out, field.number, &bytes);
        }
        Type::Scalar(Scalar::Int32 | Scalar::Int64) => {
            put_number(out, field.number, value.as_i64().ok_or_else(mismatch)? as u64)
        }
        Type::Scalar(Scalar::Bool) => put_number(out, field.number, u64::from(value.as_bool().ok_or_else(mismatch)?)),
        Type::Scalar(Scalar::Double) => put_fixed64(out, field.number, value.as_f64().ok_or_else(mismatch)?.to_bits()),
    }
    Ok(())
}

fn encode_special(
    table: &Table,
    special: Special,
    message: &Message,
    value: &Value,
    out: &mut Vec<u8>,
) -> Result<(), ProtobufError> {
    let mismatch = || error(format!("cannot encode {value} as a {}", message.name()));
    let schema_id = "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps";
    let schema = |value: &Value| encode(table, lookup(table, schema_id)?, value);
    match special {
        Special::Time | Special::MicroTime => {
            let (seconds, nanos) = parse_time(value.as_str().ok_or_else(mismatch)?)?;
            put_number(out, 1, seconds as u64);
            let nanos = if special == Special::MicroTime { nanos - nanos % 1_000 } else { 0 };
            put_number(out, 2, i64::from(nanos) as u64);
        }
        Special::Duration => put_number(out, 1, parse_duration(value.as_str().ok_or_else(mismatch)?)? as u64),
        Special::RawJson => put_bytes(out, 1, &serde_json::to_vec(value).map_err(|_| mismatch())?),
        Special::IntOrString => match value {
            Value::String(text) => {
                put_number(out, 1, 1);
                put_number(out, 2, 0);
                put_bytes(out, 3, text.as_bytes());
            }
            other => {
                put_number(out, 1, 0);
                put_number(out, 2, other.as_i64().ok_or_else(mismatch)? as u64);
                put_bytes(out, 3, b"");
            }
        },
        Special::Quantity => match value {
            Value::String(text) => put_bytes(out, 1, text.as_bytes()),
            Value::Number(number) => put_bytes(out, 1, number.to_string().as_bytes()),
            _ => return Err(mismatch()),
        },
        Special::SchemaOrArray => match value {
            Value::Array(items) => {
                for item in items {
                    put_bytes(out, 2, &schema(item)?);
                }
            }
            other => put_bytes(out, 1, &schema(other)?),
        },
        Special::SchemaOrBool => match value {
            Value::Bool(allows) => put_number(out, 1, u64::from(*allows)),
            other => {
                put_number(out, 1, 1);
                put_bytes(out, 2, &schema(other)?);
            }
        },
        Special::SchemaOrStringArray => match value {
            Value::Array(items) => {
                for item in items {
                    put_bytes(out, 2, item.as_str().ok_or_else(mismatch)?.as_bytes());
                }
            }
            other => put_bytes(out, 1, &schema(other)?),
        },
        Special::StringList => {
            for item in value.as_array().ok_or_else(mismatch)? {
                put_bytes(out, 1, item.as_str().ok_or_else(mismatch)?.as_bytes());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_print_as_go_does() {
        for (text, nanos) in [
            ("0s", 0),
            ("1h0m0s", 3_600_000_000_000),
            ("1m30s", 90_000_000_000),
            ("1.5s", 1_500_000_000),
            ("500ms", 500_000_000),
            ("-2s", -2_000_000_000),
            ("10ns", 10),
        ] {
            assert_eq!(format_duration(nanos), text);
            assert_eq!(parse_duration(text), Ok(nanos), "{text}");
        }
        assert!(parse_duration("ten").is_err());
    }

    #[test]
    fn times_print_as_kubernetes_does() {
        assert_eq!(format_time(1_700_000_000, 123_456_789, false).as_deref(), Ok("2023-11-14T22:13:20Z"));
        assert_eq!(format_time(1_700_000_000, 123_456_789, true).as_deref(), Ok("2023-11-14T22:13:20.123456Z"));
        assert_eq!(parse_time("2023-11-14T22:13:20Z"), Ok((1_700_000_000, 0)));
        assert!(parse_time("yesterday").is_err());
    }
}
