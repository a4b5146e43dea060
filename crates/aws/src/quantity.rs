//! The quantities of a NodeClass's settings (kubelet reservations, eviction thresholds, volume
//! sizes): the scheduling model's exact parser, with negative amounts refused.

use driftwood_scheduling::quantity::{QuantityError, parse_quantity_milli};

/// `value` in milli-units; an invalid or negative quantity is an error naming it.
pub fn non_negative_milli(value: &str) -> Result<i64, QuantityError> {
    let milli = parse_quantity_milli(value)?;
    if milli < 0 {
        return Err(QuantityError::Invalid {
            input: value.to_string(),
            rule: "must not be negative",
        });
    }
    Ok(milli)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_non_negative() {
        assert_eq!(non_negative_milli("100m").unwrap(), 100);
        assert_eq!(non_negative_milli("2").unwrap(), 2000);
        assert_eq!(non_negative_milli("512Mi").unwrap(), 536_870_912_000);
        assert!(non_negative_milli("lots").is_err());
        let negative = non_negative_milli("-1").unwrap_err();
        assert!(negative.to_string().contains("must not be negative"));
    }
}
