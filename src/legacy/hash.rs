//! The two hashes OLM v0 puts into names and label keys, reproduced bit for bit because tools and existing clusters
//! hold the names they made: `base62(sha224(text))` (Go's `big.Int.Text(62)` of the digest) for the OperatorGroup
//! ClusterRoles, and the FNV-1a 64-bit hash in lower-case hex for API label keys.

use std::hash::Hasher;

use sha2::{Digest, Sha224};

use crate::bundle::gohash::base62;

/// `base62(sha224(text))` as OLM's `hash` computes it: the digest read as a big-endian unsigned number, written in
/// base 62 as Go's `big.Int.Text(62)` does (the conversion is the bundle RBAC names' own, `bundle::gohash`).
pub fn base62_sha224(text: &str) -> String {
    base62(&Sha224::digest(text.as_bytes()))
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
