//! Kubernetes quantity parsing and resource arithmetic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use driftwood_scheduling::quantity::{format_bytes_milli, parse_quantity_milli};
use driftwood_scheduling::{QuantityError, Resources};

#[test]
fn parses_every_suffix() {
    let cases: &[(&str, i64)] = &[
        ("1", 1_000),
        ("500m", 500),
        ("1k", 1_000_000),
        ("1M", 1_000_000_000),
        ("1G", 1_000_000_000_000),
        ("1T", 1_000_000_000_000_000),
        ("2P", 2_000_000_000_000_000_000),
        ("1Ki", 1_024_000),
        ("1Mi", 1_048_576_000),
        ("1Gi", 1_073_741_824_000),
        ("1Ti", 1_099_511_627_776_000),
        ("1Pi", 1_125_899_906_842_624_000),
        ("0.5", 500),
        (".5", 500),
        ("1.", 1_000),
        ("1.5Gi", 1_610_612_736_000),
        ("1e3", 1_000_000),
        ("1E3", 1_000_000),
        ("1e-3", 1),
        ("2.5e+2", 250_000),
        ("+3", 3_000),
        ("-2", -2_000),
        ("0", 0),
        ("0Gi", 0),
        ("100Mi", 104_857_600_000),
    ];
    for (text, want) in cases {
        assert_eq!(parse_quantity_milli(text), Ok(*want), "{text}");
    }
}

#[test]
fn exa_suffixes_parse_when_they_fit_and_overflow_otherwise() {
    // 1E = 10^18 units = 10^21 milli: does not fit in i64.
    assert!(matches!(
        parse_quantity_milli("1E"),
        Err(QuantityError::Overflow { .. })
    ));
    assert!(matches!(
        parse_quantity_milli("1Ei"),
        Err(QuantityError::Overflow { .. })
    ));
    assert_eq!(
        parse_quantity_milli("0.001E"),
        Ok(1_000_000_000_000_000_000)
    );
    assert!(matches!(
        parse_quantity_milli("99999999999999999999999999999999999999999"),
        Err(QuantityError::Overflow { .. })
    ));
}

#[test]
fn rounds_sub_milli_values_up() {
    assert_eq!(parse_quantity_milli("0.0001"), Ok(1));
    assert_eq!(parse_quantity_milli("1.0001"), Ok(1_001));
    assert_eq!(parse_quantity_milli("1e-9"), Ok(1));
    assert_eq!(parse_quantity_milli("1e-80"), Ok(1));
}

#[test]
fn rejects_invalid_strings_with_a_clear_error() {
    for bad in [
        "abc", "1x", "1.2.3", "m", "--1", "1 Gi", "1gi", "1e", "1e+", "1ee3", ".",
    ] {
        let err = parse_quantity_milli(bad).unwrap_err();
        assert!(
            matches!(err, QuantityError::Invalid { .. }),
            "{bad}: {err:?}"
        );
        assert!(err.to_string().contains(bad), "{err}");
    }
    assert_eq!(parse_quantity_milli(""), Err(QuantityError::Empty));
}

#[test]
fn resources_parse_add_sub_and_fit() {
    let node = Resources::parse([
        ("cpu", "4"),
        ("memory", "16Gi"),
        ("pods", "110"),
        ("nvidia.com/gpu", "1"),
    ])
    .unwrap();
    let pod = Resources::parse([("cpu", "1500m"), ("memory", "4Gi"), ("pods", "1")]).unwrap();
    assert!(pod.fits(&node));
    let left = node.sub(&pod).sub(&pod);
    assert_eq!(left.get("cpu"), 1_000);
    assert!(!pod.fits(&left));
    assert_eq!(pod.exceeding(&left), vec!["cpu".to_string()]);
    assert_eq!(left.add(&pod).get("cpu"), 2_500);
    let gpu_pod = Resources::parse([("nvidia.com/gpu", "2")]).unwrap();
    assert!(!gpu_pod.fits(&node));
    assert_eq!(gpu_pod.exceeding(&node), vec!["nvidia.com/gpu".to_string()]);
    assert_eq!(Resources::new().get("cpu"), 0);
    assert!(Resources::new().fits(&Resources::new()));
    let err = Resources::parse([("memory", "lots")]).unwrap_err();
    assert!(err.to_string().contains("memory"), "{err}");
    assert_eq!(pod.to_string(), "cpu=1500m, memory=4Gi, pods=1");
    assert_eq!(format_bytes_milli(1536 * 1024 * 1024 * 1000), "1536Mi");
}

#[test]
fn resource_max_is_per_name() {
    let a = Resources::parse([("cpu", "1"), ("memory", "1Gi")]).unwrap();
    let b = Resources::parse([("cpu", "2"), ("nvidia.com/gpu", "1")]).unwrap();
    let m = a.max(&b);
    assert_eq!(m.get("cpu"), 2_000);
    assert_eq!(m.get("memory"), 1_073_741_824_000);
    assert_eq!(m.get("nvidia.com/gpu"), 1_000);
}

mod properties {
    use driftwood_scheduling::quantity::parse_quantity_milli;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn never_panics(text in "\\PC{0,40}") {
            let _ = parse_quantity_milli(&text);
        }

        #[test]
        fn never_panics_on_quantity_like_text(text in "[+-]?[0-9]{0,45}(\\.[0-9]{0,45})?([eE][+-]?[0-9]{1,6}|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?") {
            let _ = parse_quantity_milli(&text);
        }

        #[test]
        fn milli_values_round_trip(n in 0i64..i64::MAX) {
            prop_assert_eq!(parse_quantity_milli(&format!("{n}m")), Ok(n));
        }

        #[test]
        fn whole_units_scale_by_a_thousand(n in 0i64..9_000_000_000_000_000) {
            prop_assert_eq!(parse_quantity_milli(&n.to_string()), Ok(n * 1000));
            prop_assert_eq!(parse_quantity_milli(&format!("{n}e-3")), Ok(n));
        }

        #[test]
        fn binary_suffixes_are_powers_of_two(n in 0i64..1_000_000) {
            prop_assert_eq!(parse_quantity_milli(&format!("{n}Ki")), Ok(n * 1024 * 1000));
            prop_assert_eq!(parse_quantity_milli(&format!("{n}Mi")), Ok(n * 1024 * 1024 * 1000));
        }
    }
}
