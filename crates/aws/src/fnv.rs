//! The stable hash used for deterministic resource names: driftwood's one FNV-1a helper,
//! re-exported from the api crate.

pub use driftwood_api::hash::fnv1a64;

#[cfg(test)]
mod tests {
    #[test]
    fn known_vectors() {
        assert_eq!(super::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
