//! The two formats /metrics speaks: Prometheus text 0.0.4 by default (what Prometheus 2 and 3,
//! the Datadog and OpenTelemetry scrapers and `prometheus_client`'s text parser read) and
//! OpenMetrics 1.0 when the scraper's `Accept` asks for it, each with its `Content-Type`.
//! Prometheus 3 refuses a target that sends no `Content-Type`.

/// A format of the metrics exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics text 1.0.0.
    OpenMetrics,
}

impl Exposition {
    /// The format for a request's `Accept` header: OpenMetrics when it lists
    /// `application/openmetrics-text` with a quality above 0 and above that of `text/plain`
    /// (Prometheus sends both, OpenMetrics first), else Prometheus text.
    pub fn negotiate(accept: Option<&str>) -> Self {
        let Some(accept) = accept else {
            return Self::Prometheus;
        };
        let quality = |wanted: &str| -> Option<f64> {
            accept
                .split(',')
                .filter_map(|range| {
                    let mut parts = range.split(';').map(str::trim);
                    let media = parts.next()?;
                    if !media.eq_ignore_ascii_case(wanted) {
                        return None;
                    }
                    let q = parts
                        .filter_map(|p| p.strip_prefix("q="))
                        .find_map(|q| q.parse::<f64>().ok())
                        .unwrap_or(1.0);
                    Some(q)
                })
                .reduce(f64::max)
        };
        match (
            quality("application/openmetrics-text"),
            quality("text/plain"),
        ) {
            (Some(open), text) if open > 0.0 && open >= text.unwrap_or(0.0) => Self::OpenMetrics,
            _ => Self::Prometheus,
        }
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Rewrites an OpenMetrics exposition as Prometheus text 0.0.4: a counter family `x` is
/// described as `x_total` (its samples' name), an info family `x` as the gauge `x_info`,
/// `unknown` as `untyped`; `# UNIT` and `# EOF` lines are dropped. Samples are unchanged.
pub fn openmetrics_to_prometheus(openmetrics: &str) -> String {
    let mut types: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ")
            && let Some((name, kind)) = rest.split_once(' ')
        {
            types.insert(name, kind.trim());
        }
    }
    let renamed = |name: &str| -> String {
        match types.get(name).copied() {
            Some("counter") if !name.ends_with("_total") => format!("{name}_total"),
            Some("info") => format!("{name}_info"),
            _ => name.to_string(),
        }
    };
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push_str("# HELP ");
            out.push_str(&renamed(name));
            out.push(' ');
            out.push_str(help);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let kind = match kind.trim() {
                "info" => "gauge",
                "unknown" => "untyped",
                other => other,
            };
            out.push_str("# TYPE ");
            out.push_str(&renamed(name));
            out.push(' ');
            out.push_str(kind);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prometheus 3's default Accept lists OpenMetrics first; curl's `*/*` and a missing header
    /// get Prometheus text, as do scrapers that prefer it.
    #[test]
    fn the_accept_header_picks_the_format() {
        let prometheus3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,\
                           application/openmetrics-text;version=0.0.1;q=0.5,\
                           text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,\
                           text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(
            Exposition::negotiate(Some(prometheus3)),
            Exposition::OpenMetrics
        );
        assert_eq!(Exposition::negotiate(None), Exposition::Prometheus);
        assert_eq!(Exposition::negotiate(Some("*/*")), Exposition::Prometheus);
        assert_eq!(
            Exposition::negotiate(Some(
                "text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.5"
            )),
            Exposition::Prometheus
        );
        assert_eq!(
            Exposition::negotiate(Some("application/openmetrics-text; q=0")),
            Exposition::Prometheus
        );
        assert!(
            Exposition::Prometheus
                .content_type()
                .starts_with("text/plain; version=0.0.4")
        );
        assert!(
            Exposition::OpenMetrics
                .content_type()
                .starts_with("application/openmetrics-text; version=1.0.0")
        );
    }

    #[test]
    fn counters_and_infos_are_described_by_their_sample_names() {
        let open = "# HELP karpenter_nodeclaims_created NodeClaims created.\n\
                    # TYPE karpenter_nodeclaims_created counter\n\
                    karpenter_nodeclaims_created_total{nodepool=\"a\"} 2\n\
                    # HELP karpenter_build Build.\n\
                    # TYPE karpenter_build info\n\
                    karpenter_build_info{version=\"1\"} 1\n\
                    # HELP d Duration.\n\
                    # TYPE d histogram\n\
                    # UNIT d seconds\n\
                    d_bucket{le=\"+Inf\"} 1\n\
                    d_sum 0.5\n\
                    d_count 1\n\
                    # TYPE g gauge\n\
                    g 3\n\
                    # EOF\n";
        assert_eq!(
            openmetrics_to_prometheus(open),
            "# HELP karpenter_nodeclaims_created_total NodeClaims created.\n\
             # TYPE karpenter_nodeclaims_created_total counter\n\
             karpenter_nodeclaims_created_total{nodepool=\"a\"} 2\n\
             # HELP karpenter_build_info Build.\n\
             # TYPE karpenter_build_info gauge\n\
             karpenter_build_info{version=\"1\"} 1\n\
             # HELP d Duration.\n\
             # TYPE d histogram\n\
             d_bucket{le=\"+Inf\"} 1\n\
             d_sum 0.5\n\
             d_count 1\n\
             # TYPE g gauge\n\
             g 3\n"
        );
    }
}
