//! Instant queries against a Prometheus HTTP API (`--prometheus-url`), for a rollout policy's
//! query gate: `GET /api/v1/query?query=...`, the largest sample of the answer. Blocking, on a
//! socket with its own timeouts: callers run it off the async runtime.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long connecting, sending and reading may each take.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of an answer read.
const MAX_RESPONSE_BYTES: u64 = 4 << 20;

/// Why a query could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("prometheus URL {url:?}: {rule}")]
    Url { url: String, rule: &'static str },
    #[error("prometheus at {address}: {error}")]
    Io { address: String, error: String },
    #[error("prometheus answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("prometheus answer unreadable: {0}")]
    Answer(String),
    #[error("prometheus query {query:?} failed: {error}")]
    Query { query: String, error: String },
}

/// A Prometheus HTTP API endpoint: `http://host[:port][/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prometheus {
    host: String,
    port: u16,
    prefix: String,
}

impl Prometheus {
    /// Reads `url`; only plain `http://` (an in-cluster Service, or a proxy in front of a TLS
    /// endpoint).
    pub fn new(url: &str) -> Result<Self, QueryError> {
        let fail = |rule| QueryError::Url {
            url: url.to_string(),
            rule,
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| fail("must start with http:// (https is not supported; use the in-cluster Service's http port)"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(fail("must name a host (and no credentials)"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => (
                host.to_string(),
                port.parse()
                    .map_err(|_| fail("the port must be a number"))?,
            ),
            _ => (authority.to_string(), 80),
        };
        Ok(Self {
            host,
            port,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }

    /// The largest sample `query` returns now (None: an empty answer).
    pub fn max_sample(&self, query: &str) -> Result<Option<f64>, QueryError> {
        let body = self.get(&format!(
            "{}/api/v1/query?query={}",
            self.prefix,
            percent_encode(query)
        ))?;
        parse_answer(query, &body)
    }

    fn get(&self, path: &str) -> Result<String, QueryError> {
        let address = format!("{}:{}", self.host, self.port);
        let io = |error: std::io::Error| QueryError::Io {
            address: address.clone(),
            error: error.to_string(),
        };
        let target = address
            .to_socket_addrs()
            .map_err(io)?
            .next()
            .ok_or_else(|| QueryError::Io {
                address: address.clone(),
                error: "no address".into(),
            })?;
        let mut stream = TcpStream::connect_timeout(&target, SOCKET_TIMEOUT).map_err(io)?;
        stream.set_read_timeout(Some(SOCKET_TIMEOUT)).map_err(io)?;
        stream.set_write_timeout(Some(SOCKET_TIMEOUT)).map_err(io)?;
        // HTTP/1.0: the answer is the rest of the stream, never chunked.
        let request = format!(
            "GET {path} HTTP/1.0\r\nHost: {}\r\nAccept: application/json\r\nUser-Agent: driftwood\r\n\r\n",
            self.host
        );
        stream.write_all(request.as_bytes()).map_err(io)?;
        let mut raw = Vec::new();
        stream
            .take(MAX_RESPONSE_BYTES)
            .read_to_end(&mut raw)
            .map_err(io)?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| QueryError::Answer("no end of headers".into()))?;
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| QueryError::Answer(format!("no status line in {head:?}")))?;
        if status != 200 {
            return Err(QueryError::Status {
                status,
                body: body.chars().take(200).collect(),
            });
        }
        Ok(body.to_string())
    }
}

/// The largest sample of an instant query's JSON answer (a vector or a scalar).
pub fn parse_answer(query: &str, body: &str) -> Result<Option<f64>, QueryError> {
    let answer: Value =
        serde_json::from_str(body).map_err(|e| QueryError::Answer(e.to_string()))?;
    if answer["status"] != "success" {
        return Err(QueryError::Query {
            query: query.to_string(),
            error: answer["error"]
                .as_str()
                .unwrap_or("no error given")
                .to_string(),
        });
    }
    let sample = |pair: &Value| -> Result<f64, QueryError> {
        pair.get(1)
            .and_then(Value::as_str)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| QueryError::Answer(format!("sample {pair} is not [time, \"number\"]")))
    };
    let data = &answer["data"];
    match data["resultType"].as_str() {
        Some("vector") => {
            let mut max: Option<f64> = None;
            for series in data["result"].as_array().into_iter().flatten() {
                let value = sample(&series["value"])?;
                max = Some(max.map_or(value, |m: f64| m.max(value)));
            }
            Ok(max)
        }
        Some("scalar") => sample(&data["result"]).map(Some),
        other => Err(QueryError::Answer(format!(
            "resultType {other:?}: the gate's query must return a vector or a scalar"
        ))),
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    /// A fake Prometheus: answers each request with the next of `answers` (status, body), and
    /// records the request lines.
    fn fake(answers: Vec<(u16, String)>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/prom", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        std::thread::spawn(move || {
            for ((status, body), stream) in answers.into_iter().zip(listener.incoming()) {
                let mut stream = stream.unwrap();
                let mut line = String::new();
                std::io::BufReader::new(&stream)
                    .read_line(&mut line)
                    .unwrap();
                record.lock().unwrap().push(line.trim().to_string());
                let reply =
                    format!("HTTP/1.0 {status} X\r\nContent-Type: application/json\r\n\r\n{body}");
                stream.write_all(reply.as_bytes()).unwrap();
            }
        });
        (url, seen)
    }

    fn vector(values: &[&str]) -> String {
        let result: Vec<String> = values
            .iter()
            .map(|v| format!(r#"{{"metric":{{"app":"web"}},"value":[1784505600.0,"{v}"]}}"#))
            .collect();
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            result.join(",")
        )
    }

    #[test]
    fn an_instant_query_returns_the_largest_sample_of_the_answer() {
        let (url, seen) = fake(vec![
            (200, vector(&["0.01", "0.2", "0.05"])),
            (200, vector(&[])),
            (
                200,
                r#"{"status":"success","data":{"resultType":"scalar","result":[1,"7"]}}"#.into(),
            ),
        ]);
        let prometheus = Prometheus::new(&url).unwrap();
        let query = r#"sum(rate(http_errors_total{app="web"}[5m])) > 0"#;
        assert_eq!(prometheus.max_sample(query).unwrap(), Some(0.2));
        assert_eq!(prometheus.max_sample("up").unwrap(), None);
        assert_eq!(prometheus.max_sample("vector(7)").unwrap(), Some(7.0));
        let lines = seen.lock().unwrap().clone();
        assert_eq!(
            lines[0],
            "GET /prom/api/v1/query?query=sum%28rate%28http_errors_total%7Bapp%3D%22web%22%7D%5B5m%5D%29%29%20%3E%200 HTTP/1.0"
        );
    }

    #[test]
    fn failures_say_what_failed() {
        let (url, _) = fake(vec![
            (503, "overloaded".into()),
            (
                200,
                r#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#
                    .into(),
            ),
            (200, "<html>".into()),
            (
                200,
                r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#.into(),
            ),
        ]);
        let prometheus = Prometheus::new(&url).unwrap();
        let errors: Vec<String> = (0..4)
            .map(|_| prometheus.max_sample("up[").unwrap_err().to_string())
            .collect();
        assert_eq!(errors[0], "prometheus answered HTTP 503: overloaded");
        assert_eq!(
            errors[1],
            "prometheus query \"up[\" failed: parse error at char 3"
        );
        assert!(
            errors[2].starts_with("prometheus answer unreadable"),
            "{}",
            errors[2]
        );
        assert!(
            errors[3].contains("must return a vector or a scalar"),
            "{}",
            errors[3]
        );
        // Nothing listening.
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let gone = Prometheus::new(&format!("http://{closed}")).unwrap();
        assert!(
            gone.max_sample("up")
                .unwrap_err()
                .to_string()
                .starts_with(&format!("prometheus at {closed}"))
        );
    }

    #[test]
    fn only_plain_http_urls_are_accepted() {
        assert_eq!(
            Prometheus::new("http://prometheus.monitoring.svc:9090/").unwrap(),
            Prometheus {
                host: "prometheus.monitoring.svc".into(),
                port: 9090,
                prefix: String::new()
            }
        );
        assert_eq!(Prometheus::new("http://prom").unwrap().port, 80);
        for bad in [
            "https://prom:9090",
            "prom:9090",
            "http://",
            "http://u:p@prom",
            "http://prom:x",
        ] {
            assert!(Prometheus::new(bad).is_err(), "{bad}");
        }
    }
}
