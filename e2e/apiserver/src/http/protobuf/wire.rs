//! The protobuf wire format, as far as Kubernetes' proto2 messages use it: varints, 64- and 32-bit fixed values
//! and length-delimited bytes, read into (field number, value) pairs and written back. Errors use the wording of
//! the Go decoders kube-apiserver runs (gogo-protobuf's generated `Unmarshal`), since clients see them.

use super::ProtobufError;

/// One field as read off the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

impl Value<'_> {
    /// The wire type number, for error messages.
    pub fn wire_type(&self) -> u8 {
        match self {
            Self::Varint(_) => 0,
            Self::Fixed64(_) => 1,
            Self::Bytes(_) => 2,
            Self::Fixed32(_) => 5,
        }
    }
}

fn unexpected_eof() -> ProtobufError {
    ProtobufError("unexpected EOF".to_owned())
}

pub fn varint(input: &mut &[u8]) -> Result<u64, ProtobufError> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let (&byte, rest) = input.split_first().ok_or_else(unexpected_eof)?;
        *input = rest;
        if shift == 63 && byte > 1 {
            break;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(ProtobufError("proto: integer overflow".to_owned()))
}

fn take<'a>(input: &mut &'a [u8], length: usize) -> Result<&'a [u8], ProtobufError> {
    if length > input.len() {
        return Err(unexpected_eof());
    }
    let (taken, rest) = input.split_at(length);
    *input = rest;
    Ok(taken)
}

/// The fields of one message, in wire order. `message` names the message in errors.
pub fn fields<'a>(mut input: &'a [u8], message: &str) -> Result<Vec<(u32, Value<'a>)>, ProtobufError> {
    let mut found = Vec::new();
    while !input.is_empty() {
        let key = varint(&mut input)?;
        let wire_type = key & 7;
        let number = u32::try_from(key >> 3).unwrap_or(0);
        if wire_type == 4 {
            return Err(ProtobufError(format!("proto: {message}: wiretype end group for non-group")));
        }
        if number == 0 {
            return Err(ProtobufError(format!("proto: {message}: illegal tag 0 (wire type {wire_type})")));
        }
        let value = match wire_type {
            0 => Value::Varint(varint(&mut input)?),
            1 => {
                let bytes = take(&mut input, 8)?;
                Value::Fixed64(u64::from_le_bytes(bytes.try_into().map_err(|_| unexpected_eof())?))
            }
            2 => {
                let length = varint(&mut input)?;
                let length = usize::try_from(length)
                    .ok()
                    .filter(|l| i64::try_from(*l).is_ok())
                    .ok_or_else(|| ProtobufError("proto: negative length found during unmarshaling".to_owned()))?;
                Value::Bytes(take(&mut input, length)?)
            }
            5 => {
                let bytes = take(&mut input, 4)?;
                Value::Fixed32(u32::from_le_bytes(bytes.try_into().map_err(|_| unexpected_eof())?))
            }
            // Groups (3) are not used by any Kubernetes message.
            other => return Err(ProtobufError(format!("proto: illegal wireType {other}"))),
        };
        found.push((number, value));
    }
    Ok(found)
}

/// Appends a varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(u8::try_from(value & 0x7f).unwrap_or(0) | 0x80);
        value >>= 7;
    }
    out.push(u8::try_from(value).unwrap_or(0));
}

pub fn put_key(out: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire_type));
}

pub fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_key(out, number, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

pub fn put_number(out: &mut Vec<u8>, number: u32, value: u64) {
    put_key(out, number, 0);
    put_varint(out, value);
}

pub fn put_fixed64(out: &mut Vec<u8>, number: u32, value: u64) {
    put_key(out, number, 1);
    out.extend_from_slice(&value.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX, (-5i64) as u64] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut input = out.as_slice();
            assert_eq!(varint(&mut input), Ok(value));
            assert!(input.is_empty());
        }
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert_eq!(fields(&[0x0a, 0x05, b'a'], "M"), Err(unexpected_eof()));
        assert_eq!(fields(&[0x80], "M"), Err(unexpected_eof()));
        assert_eq!(fields(&[0xff; 11], "M"), Err(ProtobufError("proto: integer overflow".to_owned())));
        assert_eq!(fields(&[0x02, 0x00], "M"), Err(ProtobufError("proto: M: illegal tag 0 (wire type 2)".into())));
        assert_eq!(fields(&[0x0c], "M"), Err(ProtobufError("proto: M: wiretype end group for non-group".into())));
        assert_eq!(fields(&[0x0b], "M"), Err(ProtobufError("proto: illegal wireType 3".into())));
        assert_eq!(fields(&[0x09, 1, 2], "M"), Err(unexpected_eof()));
    }

    #[test]
    fn fields_are_read_in_order() {
        let mut out = Vec::new();
        put_bytes(&mut out, 1, b"name");
        put_number(&mut out, 3, 7);
        put_fixed64(&mut out, 2, 1.5f64.to_bits());
        let read = fields(&out, "M").expect("reads");
        assert_eq!(
            read,
            vec![(1, Value::Bytes(b"name")), (3, Value::Varint(7)), (2, Value::Fixed64(1.5f64.to_bits()))]
        );
    }
}
