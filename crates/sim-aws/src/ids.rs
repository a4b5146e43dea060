//! Deterministic resource IDs (`ami-` + 17 hex, `i-` + 17 hex, `subnet-`, `sg-`, ...) derived
//! from the seed and a name or counter.

use driftwood_aws::fnv::fnv1a64;

/// `count` lowercase hex characters derived from `seed` and `key`.
pub fn hex_id(seed: u64, key: &str, count: usize) -> String {
    let mut out = String::new();
    let mut round = 0u64;
    while out.len() < count {
        let h = fnv1a64(format!("{seed}:{round}:{key}").as_bytes());
        out.push_str(&format!("{h:016x}"));
        round += 1;
    }
    out.truncate(count);
    out
}

/// `prefix-` + 17 hex characters, e.g. `ami-0a1b2c...`.
pub fn resource_id(prefix: &str, seed: u64, key: &str) -> String {
    format!("{prefix}-{}", hex_id(seed, &format!("{prefix}/{key}"), 17))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_look_real_and_are_deterministic() {
        let a = resource_id("ami", 7, "amazon-eks-node-1.29-v20240817");
        assert_eq!(a.len(), 4 + 17);
        assert!(
            a[4..]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(a, resource_id("ami", 7, "amazon-eks-node-1.29-v20240817"));
        assert_ne!(a, resource_id("ami", 8, "amazon-eks-node-1.29-v20240817"));
    }
}
