//! Parses the Kubernetes quantities kubelet settings use (`100m`, `2`, `512Mi`, `1Gi`, `10%`).

/// Why a quantity could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a valid quantity (want e.g. 100m, 2, 512Mi, 1Gi)")]
pub struct QuantityError {
    pub value: String,
}

const SUFFIXES: &[(&str, f64)] = &[
    ("Ki", 1024.0),
    ("Mi", 1_048_576.0),
    ("Gi", 1_073_741_824.0),
    ("Ti", 1_099_511_627_776.0),
    ("m", 0.001),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
];

/// The quantity as a number of base units (cores, bytes).
pub fn parse_quantity(value: &str) -> Result<f64, QuantityError> {
    let v = value.trim();
    let err = || QuantityError {
        value: value.to_string(),
    };
    let (number, factor) = SUFFIXES
        .iter()
        .find_map(|(s, f)| v.strip_suffix(s).map(|n| (n, *f)))
        .unwrap_or((v, 1.0));
    let n: f64 = number.parse().map_err(|_| err())?;
    if !n.is_finite() || n < 0.0 {
        return Err(err());
    }
    Ok(n * factor)
}

/// A percentage like `10%` as a fraction, or `None` when `value` is not a percentage.
pub fn parse_percent(value: &str) -> Option<f64> {
    value
        .trim()
        .strip_suffix('%')
        .and_then(|n| n.trim().parse::<f64>().ok())
        .map(|p| p / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(parse_quantity("100m").unwrap(), 0.1);
        assert_eq!(parse_quantity("2").unwrap(), 2.0);
        assert_eq!(parse_quantity("512Mi").unwrap(), 536_870_912.0);
        assert!(parse_quantity("lots").is_err());
        assert!(parse_quantity("-1").is_err());
        assert_eq!(parse_percent("10%"), Some(0.1));
        assert_eq!(parse_percent("10Mi"), None);
    }
}
