//! Query protocol parameters: `application/x-www-form-urlencoded` decoding, and reading the
//! flattened names the SDKs write (`Filter.1.Name`, `Filter.1.Value.2`, `Tags.member.1.Key`,
//! `LaunchTemplateConfigs.1.Overrides.2.InstanceType`).

use std::collections::BTreeMap;

use super::error::WireError;

/// The decoded parameters of one request, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Params {
    values: BTreeMap<String, String>,
}

impl Params {
    /// Adds the pairs of a form-encoded text (`a=1&b=x%20y`); later pairs win. `+` is a space.
    pub(crate) fn extend_from(&mut self, encoded: &[u8]) -> Result<(), WireError> {
        for pair in encoded.split(|b| *b == b'&') {
            if pair.is_empty() {
                continue;
            }
            let (name, value) = match pair.iter().position(|b| *b == b'=') {
                Some(at) => (&pair[..at], &pair[at + 1..]),
                None => (pair, &[][..]),
            };
            let name = decode(name)?;
            if name.is_empty() {
                continue;
            }
            self.values.insert(name, decode(value)?);
        }
        Ok(())
    }

    /// The whole request as a scope (no prefix).
    pub(crate) fn root(&self) -> Scope<'_> {
        Scope {
            params: self,
            prefix: String::new(),
        }
    }
}

/// Percent-decodes one name or value.
fn decode(bytes: &[u8]) -> Result<String, WireError> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| {
                        WireError::MalformedQueryString(format!("bad percent-encoding at byte {i}"))
                    })?;
                out.push(hex);
                i += 2;
            }
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out)
        .map_err(|_| WireError::MalformedQueryString("a value is not UTF-8".to_string()))
}

/// The parameters under one name prefix (`LaunchTemplateData`, `Filter.1`, ...).
#[derive(Debug, Clone)]
pub(crate) struct Scope<'a> {
    params: &'a Params,
    prefix: String,
}

impl<'a> Scope<'a> {
    /// The full parameter name of `name` in this scope.
    pub(crate) fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    /// The scope of the structure `name` within this one.
    pub(crate) fn sub(&self, name: &str) -> Scope<'a> {
        Scope {
            params: self.params,
            prefix: self.key(name),
        }
    }

    /// The value of `name`, if sent.
    pub(crate) fn get(&self, name: &str) -> Option<&'a str> {
        self.params.values.get(&self.key(name)).map(String::as_str)
    }

    /// The value of `name`, or a MissingParameter error.
    pub(crate) fn required(&self, name: &str) -> Result<&'a str, WireError> {
        self.get(name)
            .ok_or_else(|| WireError::MissingParameter(self.key(name)))
    }

    /// Whether any parameter lies under `name` (`name` itself or `name.…`).
    pub(crate) fn has(&self, name: &str) -> bool {
        let key = self.key(name);
        let nested = format!("{key}.");
        self.params.values.contains_key(&key)
            || self
                .params
                .values
                .range(nested.clone()..)
                .next()
                .is_some_and(|(k, _)| k.starts_with(&nested))
    }

    /// The entries of the flattened list `name` (`name.1`, `name.2`, …), in index order, each
    /// as a scope (`name.N`).
    pub(crate) fn entries(&self, name: &str) -> Vec<Scope<'a>> {
        let key = self.key(name);
        let nested = format!("{key}.");
        let mut indexes: Vec<u32> = self
            .params
            .values
            .range(nested.clone()..)
            .take_while(|(k, _)| k.starts_with(&nested))
            .filter_map(|(k, _)| k[nested.len()..].split('.').next()?.parse::<u32>().ok())
            .collect();
        indexes.sort_unstable();
        indexes.dedup();
        indexes
            .into_iter()
            .map(|i| Scope {
                params: self.params,
                prefix: format!("{key}.{i}"),
            })
            .collect()
    }

    /// The values of the flattened list of strings `name` (`name.1=a&name.2=b`), in order.
    pub(crate) fn strings(&self, name: &str) -> Vec<String> {
        self.entries(name)
            .into_iter()
            .filter_map(|e| self.params.values.get(&e.prefix).cloned())
            .collect()
    }

    /// `name` as a boolean (`true`/`false`), if sent.
    pub(crate) fn bool(&self, name: &str) -> Result<Option<bool>, WireError> {
        self.parsed(name, "a boolean", |v| {
            match v.to_ascii_lowercase().as_str() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            }
        })
    }

    /// `name` as an integer, if sent.
    pub(crate) fn int(&self, name: &str) -> Result<Option<i64>, WireError> {
        self.parsed(name, "an integer", |v| v.parse::<i64>().ok())
    }

    /// `name` as a finite number, if sent.
    pub(crate) fn float(&self, name: &str) -> Result<Option<f64>, WireError> {
        self.parsed(name, "a number", |v| {
            v.parse::<f64>().ok().filter(|f| f.is_finite())
        })
    }

    fn parsed<T>(
        &self,
        name: &str,
        what: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, WireError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => parse(v)
                .map(Some)
                .ok_or_else(|| WireError::invalid(&self.key(name), v, format!("not {what}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(text: &str) -> Params {
        let mut p = Params::default();
        p.extend_from(text.as_bytes()).unwrap();
        p
    }

    #[test]
    fn decodes_percent_and_plus_and_reads_flattened_lists() {
        let p = params(
            "Action=DescribeSubnets&Filter.2.Name=b&Filter.10.Name=c&Filter.1.Name=tag%3Akarpenter.sh%2Fdiscovery\
             &Filter.1.Value.1=a+b&Filter.1.Value.2=c%20d&Empty=&Flag",
        );
        let root = p.root();
        assert_eq!(root.get("Action"), Some("DescribeSubnets"));
        let filters = root.entries("Filter");
        let names: Vec<_> = filters.iter().map(|f| f.get("Name").unwrap()).collect();
        assert_eq!(names, ["tag:karpenter.sh/discovery", "b", "c"]);
        assert_eq!(filters[0].strings("Value"), ["a b", "c d"]);
        assert_eq!(root.get("Empty"), Some(""));
        assert_eq!(root.get("Flag"), Some(""));
        assert!(root.has("Filter") && !root.has("Filte") && !root.has("Other"));
    }

    #[test]
    fn malformed_encodings_and_values_are_errors() {
        let mut p = Params::default();
        assert!(matches!(
            p.extend_from(b"a=%zz"),
            Err(WireError::MalformedQueryString(_))
        ));
        assert!(matches!(
            p.extend_from(b"a=%4"),
            Err(WireError::MalformedQueryString(_))
        ));
        assert!(matches!(
            p.extend_from(b"a=%ff"),
            Err(WireError::MalformedQueryString(_))
        ));
        let p = params("n=x&b=yes&f=1.5&i=7");
        assert!(p.root().int("n").is_err());
        assert!(p.root().bool("b").is_err());
        assert_eq!(p.root().float("f"), Ok(Some(1.5)));
        assert_eq!(p.root().int("i"), Ok(Some(7)));
        assert_eq!(p.root().int("absent"), Ok(None));
        assert_eq!(
            p.root().sub("A").required("B"),
            Err(WireError::MissingParameter("A.B".to_string()))
        );
    }
}
