//! Kubernetes quantity parsing ("500m", "1.5Gi", "1e3") into exact integer milli-units.

use thiserror::Error;

/// Why a quantity string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    /// The string is empty.
    #[error("quantity is empty")]
    Empty,
    /// The string does not follow the Kubernetes quantity grammar.
    #[error("quantity {input:?} is not valid: {rule}")]
    Invalid {
        /// The rejected text.
        input: String,
        /// The grammar rule it breaks.
        rule: &'static str,
    },
    /// The value does not fit in a signed 64-bit count of milli-units.
    #[error("quantity {input:?} is too large to represent in milli-units")]
    Overflow {
        /// The rejected text.
        input: String,
    },
}

/// Parses a Kubernetes quantity and returns its value in milli-units (1 = 1/1000 of the unit),
/// rounded up like Kubernetes' `MilliValue` does.
///
/// Accepts an optional sign, a decimal number (`1`, `0.5`, `.5`, `1.`), and one optional suffix:
/// decimal SI (`m`, `k`, `M`, `G`, `T`, `P`, `E`), binary SI (`Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`) or
/// a decimal exponent (`e3`, `E-2`).
pub fn parse_quantity_milli(input: &str) -> Result<i64, QuantityError> {
    let text = input.trim();
    if text.is_empty() {
        return Err(QuantityError::Empty);
    }
    let invalid = |rule: &'static str| QuantityError::Invalid {
        input: input.to_string(),
        rule,
    };
    let overflow = || QuantityError::Overflow {
        input: input.to_string(),
    };

    let (negative, rest) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_len = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b'.')
        .count();
    let (number, suffix) = rest.split_at(number_len);
    if number.is_empty() || number == "." {
        return Err(invalid("expected a number before the suffix"));
    }
    if number.bytes().filter(|b| *b == b'.').count() > 1 {
        return Err(invalid("a number may contain at most one decimal point"));
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // mantissa = digits as an integer, scaled down by 10^frac_digits.
    let mut mantissa: i128 = 0;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(b - b'0')))
            .ok_or_else(overflow)?;
    }
    let frac_digits = i32::try_from(frac_part.len()).map_err(|_| overflow())?;

    // value = mantissa * 2^binary_exp * 10^(decimal_exp - frac_digits); milli adds 3 to decimal_exp.
    let (binary_exp, decimal_exp): (u32, i32) = match suffix {
        "" => (0, 0),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        s if s.starts_with('e') || s.starts_with('E') => {
            let exp_text = &s[1..];
            let digits = exp_text.strip_prefix(['+', '-']).unwrap_or(exp_text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid(
                    "a decimal exponent must be e or E followed by an integer",
                ));
            }
            let exp: i32 = exp_text.parse().map_err(|_| overflow())?;
            (0, exp)
        }
        _ => {
            return Err(invalid(
                "unknown suffix (expected m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent)",
            ));
        }
    };
    if mantissa == 0 {
        return Ok(0);
    }
    let scaled = mantissa
        .checked_shl(binary_exp)
        .filter(|v| v >> binary_exp == mantissa)
        .ok_or_else(overflow)?;
    let power = decimal_exp
        .checked_add(3)
        .and_then(|p| p.checked_sub(frac_digits))
        .ok_or_else(overflow)?;
    let milli = if power >= 0 {
        let factor = 10i128
            .checked_pow(u32::try_from(power).map_err(|_| overflow())?)
            .ok_or_else(overflow)?;
        scaled.checked_mul(factor).ok_or_else(overflow)?
    } else {
        let divisor_exp = u32::try_from(-i64::from(power)).map_err(|_| overflow())?;
        match 10i128.checked_pow(divisor_exp) {
            // Round up (towards +infinity for the magnitude, as Kubernetes does).
            Some(divisor) => scaled / divisor + i128::from(scaled % divisor != 0),
            // Dividing by more than 10^38 leaves a positive fraction, which rounds up to 1.
            None => 1,
        }
    };
    let signed = if negative { -milli } else { milli };
    i64::try_from(signed).map_err(|_| overflow())
}

/// Formats milli-units back into a short quantity string (`"1500m"`, `"2"`), for messages.
pub fn format_milli(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{}", milli / 1000)
    } else {
        format!("{milli}m")
    }
}

/// Formats a byte quantity held in milli-units with a binary suffix when exact (`"4Gi"`).
pub fn format_bytes_milli(milli: i64) -> String {
    if milli % 1000 != 0 {
        return format_milli(milli);
    }
    let bytes = milli / 1000;
    for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        let unit = 1i64 << shift;
        if bytes != 0 && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    format!("{bytes}")
}
