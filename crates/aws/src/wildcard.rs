//! EC2 filter wildcard matching: `*` matches any run of characters, `?` exactly one.

/// Whether `text` matches the EC2 wildcard `pattern` (case-sensitive, like EC2 filters).
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    // Greedy matching with backtracking to the last `*`.
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(c) if *c == '?' || Some(c) == text.get(t) => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::wildcard_match;

    #[test]
    fn matches_like_ec2() {
        assert!(wildcard_match("*-1.27-*", "amazon-eks-node-1.27-v20240817"));
        assert!(!wildcard_match(
            "*-1.27-*",
            "amazon-eks-node-1.28-v20240817"
        ));
        assert!(wildcard_match(
            "amazon-eks-node-1.2?-v*",
            "amazon-eks-node-1.29-v1"
        ));
        assert!(wildcard_match("exact", "exact"));
        assert!(!wildcard_match("exact", "exactly"));
        assert!(wildcard_match("*", ""));
        assert!(!wildcard_match("?", ""));
        assert!(wildcard_match("a*b*c", "aXXbYYc"));
        assert!(!wildcard_match("a*b*c", "aXXbYY"));
    }
}
