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
    let mut out = String::with_capacity(openmetrics.len());
    let mut writer = PrometheusText::new(&mut out);
    writer.push(openmetrics);
    writer.finish();
    out
}

/// Writes an OpenMetrics exposition as Prometheus text 0.0.4 while it is being encoded
/// ([`openmetrics_to_prometheus`]'s rewrite, line by line): a scrape is written once, instead
/// of encoded whole and then copied whole (at 5,000 nodes the exposition is about 90 MiB).
/// A family's `# HELP` line is held until its `# TYPE` line names the type it is renamed by.
pub struct PrometheusText<'o> {
    out: &'o mut String,
    /// The line being written, up to its newline.
    line: String,
    /// A `# HELP` line whose family's type is not known yet: (name, help).
    held_help: Option<(String, String)>,
    /// The type of every family described so far.
    types: std::collections::HashMap<String, String>,
}

impl<'o> PrometheusText<'o> {
    /// A writer appending to `out`.
    pub fn new(out: &'o mut String) -> Self {
        Self {
            out,
            line: String::new(),
            held_help: None,
            types: std::collections::HashMap::new(),
        }
    }

    /// Takes more of the OpenMetrics text.
    pub fn push(&mut self, text: &str) {
        let mut rest = text;
        while let Some(end) = rest.find('\n') {
            self.line.push_str(&rest[..end]);
            let line = std::mem::take(&mut self.line);
            self.rewrite(&line);
            self.line = line;
            self.line.clear();
            rest = &rest[end + 1..];
        }
        self.line.push_str(rest);
    }

    /// Writes what is left: a last line without its newline, a held `# HELP` line.
    pub fn finish(mut self) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.rewrite(&line);
        }
        self.release_help();
    }

    /// Forgets everything not written yet (the encoder failed part way).
    pub fn discard(&mut self) {
        self.line.clear();
        self.held_help = None;
    }

    fn renamed(&self, name: &str) -> String {
        match self.types.get(name).map(String::as_str) {
            Some("counter") if !name.ends_with("_total") => format!("{name}_total"),
            Some("info") => format!("{name}_info"),
            _ => name.to_string(),
        }
    }

    fn write_help(&mut self, name: &str, help: &str) {
        let renamed = self.renamed(name);
        self.out.push_str("# HELP ");
        self.out.push_str(&renamed);
        self.out.push(' ');
        self.out.push_str(help);
        self.out.push('\n');
    }

    fn release_help(&mut self) {
        if let Some((name, help)) = self.held_help.take() {
            self.write_help(&name, &help);
        }
    }

    fn rewrite(&mut self, line: &str) {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            return;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            self.release_help();
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            if self.types.contains_key(name) {
                self.write_help(name, help);
            } else {
                self.held_help = Some((name.to_string(), help.to_string()));
            }
            return;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let kind = kind.trim();
            self.types.insert(name.to_string(), kind.to_string());
            self.release_help();
            let kind = match kind {
                "info" => "gauge",
                "unknown" => "untyped",
                other => other,
            };
            let renamed = self.renamed(name);
            self.out.push_str("# TYPE ");
            self.out.push_str(&renamed);
            self.out.push(' ');
            self.out.push_str(kind);
            self.out.push('\n');
            return;
        }
        self.release_help();
        self.out.push_str(line);
        self.out.push('\n');
    }
}

impl std::fmt::Write for PrometheusText<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push(s);
        Ok(())
    }
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

    /// Written piece by piece, as an encoder writes, the text is the same as rewritten whole;
    /// a HELP line after its family's TYPE line is renamed too, and a HELP line with no TYPE
    /// line after it is written as it is.
    #[test]
    fn written_in_pieces_the_rewrite_is_the_same() {
        let open = "# HELP c Calls.\n# TYPE c counter\nc_total 2\n# TYPE i info\n\
                    # HELP i Build.\ni_info{v=\"1\"} 1\n# HELP lonely No type.\nx 1\n# HELP last End.\n# EOF\n";
        let whole = openmetrics_to_prometheus(open);
        assert_eq!(
            whole,
            "# HELP c_total Calls.\n# TYPE c_total counter\nc_total 2\n# TYPE i_info gauge\n\
             # HELP i_info Build.\ni_info{v=\"1\"} 1\n# HELP lonely No type.\nx 1\n# HELP last End.\n"
        );
        for size in 1..8 {
            let mut out = String::new();
            let mut writer = PrometheusText::new(&mut out);
            let chars: Vec<char> = open.chars().collect();
            for piece in chars.chunks(size) {
                std::fmt::Write::write_str(&mut writer, &piece.iter().collect::<String>()).unwrap();
            }
            writer.finish();
            assert_eq!(out, whole, "pieces of {size}");
        }
        // A last line without its newline is written with one.
        assert_eq!(openmetrics_to_prometheus("g 1"), "g 1\n");
    }
}
