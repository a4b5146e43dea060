//! Evaluates node-selector requirements (In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte)
//! against a set of labels, where a label may have several possible values (an instance type's
//! zones and capacity types).

use std::collections::{BTreeMap, BTreeSet};

use driftwood_api::NodeSelectorRequirementWithMinValues as Requirement;
use driftwood_api::requirement::{
    OP_DOES_NOT_EXIST, OP_EXISTS, OP_GT, OP_GTE, OP_IN, OP_LT, OP_LTE, OP_NOT_IN,
};

/// Label key → the values it may take (one value for ordinary labels).
pub type LabelValues = BTreeMap<String, BTreeSet<String>>;

/// Whether some value of `labels[key]` satisfies the requirement (or, for the negative
/// operators, whether the label is absent or has an allowed value).
pub fn requirement_allows(req: &Requirement, labels: &LabelValues) -> bool {
    let values = labels.get(&req.key);
    let any = |f: &dyn Fn(&str) -> bool| values.is_some_and(|vs| vs.iter().any(|v| f(v)));
    match req.operator.as_str() {
        OP_IN => any(&|v| req.values.iter().any(|r| r == v)),
        OP_NOT_IN => values.is_none() || any(&|v| !req.values.iter().any(|r| r == v)),
        OP_EXISTS => values.is_some(),
        OP_DOES_NOT_EXIST => values.is_none(),
        OP_GT | OP_GTE | OP_LT | OP_LTE => {
            let Some(bound) = req.values.first().and_then(|b| b.parse::<i64>().ok()) else {
                return false;
            };
            any(&|v| {
                v.parse::<i64>().is_ok_and(|n| match req.operator.as_str() {
                    OP_GT => n > bound,
                    OP_GTE => n >= bound,
                    OP_LT => n < bound,
                    _ => n <= bound,
                })
            })
        }
        _ => false,
    }
}

/// Whether every requirement allows `labels`.
pub fn requirements_allow(reqs: &[Requirement], labels: &LabelValues) -> bool {
    reqs.iter().all(|r| requirement_allows(r, labels))
}

/// The values of `key` that every requirement on `key` allows, out of `candidates`.
pub fn allowed_values<'a>(
    reqs: &[Requirement],
    key: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<String> {
    candidates
        .into_iter()
        .filter(|v| {
            let single: LabelValues =
                BTreeMap::from([(key.to_string(), BTreeSet::from([v.to_string()]))]);
            reqs.iter()
                .filter(|r| r.key == key)
                .all(|r| requirement_allows(r, &single))
        })
        .map(str::to_string)
        .collect()
}

/// Turns single-valued labels into [`LabelValues`].
pub fn single_valued(labels: &BTreeMap<String, String>) -> LabelValues {
    labels
        .iter()
        .map(|(k, v)| (k.clone(), BTreeSet::from([v.clone()])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &[&str])]) -> LabelValues {
        pairs
            .iter()
            .map(|(k, vs)| (k.to_string(), vs.iter().map(|v| v.to_string()).collect()))
            .collect()
    }

    #[test]
    fn operators() {
        let l = labels(&[("arch", &["amd64"]), ("cpu", &["8"]), ("zone", &["a", "b"])]);
        assert!(requirement_allows(
            &Requirement::new("arch", OP_IN, &["amd64", "arm64"]),
            &l
        ));
        assert!(!requirement_allows(
            &Requirement::new("arch", OP_IN, &["arm64"]),
            &l
        ));
        assert!(requirement_allows(
            &Requirement::new("zone", OP_IN, &["b"]),
            &l
        ));
        assert!(requirement_allows(
            &Requirement::new("gpu", OP_DOES_NOT_EXIST, &[]),
            &l
        ));
        assert!(!requirement_allows(
            &Requirement::new("gpu", OP_EXISTS, &[]),
            &l
        ));
        assert!(requirement_allows(
            &Requirement::new("cpu", OP_GT, &["4"]),
            &l
        ));
        assert!(!requirement_allows(
            &Requirement::new("cpu", OP_LT, &["8"]),
            &l
        ));
        assert!(requirement_allows(
            &Requirement::new("cpu", OP_LTE, &["8"]),
            &l
        ));
        assert!(requirement_allows(
            &Requirement::new("gpu", OP_NOT_IN, &["x"]),
            &l
        ));
        assert!(!requirement_allows(
            &Requirement::new("arch", OP_NOT_IN, &["amd64"]),
            &l
        ));
        assert!(!requirement_allows(
            &Requirement::new("arch", "Bogus", &[]),
            &l
        ));
    }

    #[test]
    fn allowed_values_intersects() {
        let reqs = vec![
            Requirement::new("zone", OP_IN, &["a", "c"]),
            Requirement::new("zone", OP_NOT_IN, &["c"]),
        ];
        let got = allowed_values(&reqs, "zone", ["a", "b", "c"]);
        assert_eq!(got, BTreeSet::from(["a".to_string()]));
    }
}
