//! The two hashes OLM v0 puts into names and label keys, reproduced bit for bit because tools and existing clusters
//! hold the names they made: `base62(sha224(text))` (Go's `big.Int.Text(62)` of the digest) for the OperatorGroup
//! ClusterRoles, and the FNV-1a 64-bit hash in lower-case hex for API label keys.

use std::hash::Hasher;

use sha2::{Digest, Sha224};

/// Go's digits for bases above 36: `0-9`, then `a-z`, then `A-Z`.
const DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// `base62(sha224(text))` as OLM's `hash` computes it: the digest read as a big-endian unsigned number, written in
/// base 62 without leading zeros.
pub fn base62_sha224(text: &str) -> String {
    base62(&Sha224::digest(text.as_bytes()))
}

/// A big-endian unsigned number in base 62, by repeated division (the number is 224 bits: no integer type holds it).
fn base62(bytes: &[u8]) -> String {
    let mut number: Vec<u8> = bytes.iter().copied().skip_while(|byte| *byte == 0).collect();
    let mut digits = Vec::new();
    while !number.is_empty() {
        let mut remainder = 0u32;
        let mut quotient = Vec::with_capacity(number.len());
        for byte in &number {
            let current = (remainder << 8) | u32::from(*byte);
            let digit = current / 62;
            remainder = current % 62;
            if !(quotient.is_empty() && digit == 0) {
                quotient.push(digit as u8);
            }
        }
        digits.push(DIGITS[remainder as usize]);
        number = quotient;
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// FNV-1a 64-bit of `text`, in lower-case hex without leading zeros (Go's `%x` of the sum).
pub fn fnv64a_hex(text: &str) -> String {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(text.as_bytes());
    format!("{:x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base62_writes_numbers_as_go_does() {
        assert_eq!(base62(&[]), "0");
        assert_eq!(base62(&[0, 0]), "0");
        assert_eq!(base62(&[61]), "Z");
        assert_eq!(base62(&[62]), "10");
        assert_eq!(base62(&[36]), "A");
        assert_eq!(base62(&[10]), "a");
        // 0x0100 = 256 = 4*62 + 8
        assert_eq!(base62(&[1, 0]), "48");
        // 2^64 - 1 = 18446744073709551615, in base 62 "lYGhA16ahyf" (Go: new(big.Int).SetUint64(math.MaxUint64).Text(62)).
        assert_eq!(base62(&[0xff; 8]), "lYGhA16ahyf");
    }

    #[test]
    fn base62_sha224_of_an_operator_group_role() {
        // Computed independently: Python's int.from_bytes(sha224(b"ns/og/admin"), "big") in base 62 with Go's digits.
        assert_eq!(base62_sha224("ns/og/admin"), "7hdvs1pJiMS8ikuUkvThunsWUnvSLPNYPbr0ec");
    }

    #[test]
    fn fnv64a_matches_the_reference_values() {
        // Reference vectors of FNV-1a 64 (draft-eastlake-fnv).
        assert_eq!(fnv64a_hex(""), "cbf29ce484222325");
        assert_eq!(fnv64a_hex("a"), "af63dc4c8601ec8c");
        assert_eq!(fnv64a_hex("foobar"), "85944171f73967e8");
    }
}
