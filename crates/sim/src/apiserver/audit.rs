//! The API server's audit of writes: one JSON line per write request received over HTTP (time,
//! the client's User-Agent, verb, path, response status), as kube-apiserver's audit log
//! records them. Tests read it to check which process wrote what, and when — e.g. that a
//! controller that lost its lease wrote nothing after a standby took over.

use driftwood_cloud::Clock;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// One audited write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// RFC 3339, on the cluster's clock.
    pub time: String,
    pub user_agent: String,
    pub method: String,
    pub path: String,
    pub status: u16,
}

/// Where audited writes go: a file, one JSON line each. Cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    file: Arc<Mutex<std::fs::File>>,
    clock: Arc<dyn Clock>,
}

impl AuditLog {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path, clock: Arc<dyn Clock>) -> std::io::Result<Self> {
        Ok(Self {
            file: Arc::new(Mutex::new(std::fs::File::create(path)?)),
            clock,
        })
    }

    /// Records one request if it is a write.
    pub fn record(&self, method: &http::Method, path: &str, user_agent: &str, status: u16) {
        if matches!(
            *method,
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
        ) {
            return;
        }
        let entry = AuditEntry {
            time: self.clock.now().to_string(),
            user_agent: user_agent.to_string(),
            method: method.to_string(),
            path: path.to_string(),
            status,
        };
        let Ok(line) = serde_json::to_string(&entry) else {
            return;
        };
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(error) = writeln!(file, "{line}") {
            tracing::warn!(object = %path, %error, "writing the audit log failed");
        }
    }
}

/// Reads an audit log written by [`AuditLog`] (lines that do not parse are skipped).
pub fn read_audit_log(path: &Path) -> std::io::Result<Vec<AuditEntry>> {
    Ok(std::fs::read_to_string(path)?
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_cloud::ManualClock;

    #[test]
    fn writes_are_recorded_and_reads_are_not() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("audit.jsonl");
        let clock = Arc::new(ManualClock::new(
            "2026-01-01T00:00:00Z".parse().expect("time"),
        ));
        let log = AuditLog::create(&path, clock).expect("log");
        log.record(&http::Method::GET, "/api/v1/nodes", "kubectl", 200);
        log.record(
            &http::Method::PATCH,
            "/api/v1/nodes/n1",
            "driftwood-controller/a",
            409,
        );
        let entries = read_audit_log(&path).expect("read");
        assert_eq!(
            entries,
            vec![AuditEntry {
                time: "2026-01-01T00:00:00Z".into(),
                user_agent: "driftwood-controller/a".into(),
                method: "PATCH".into(),
                path: "/api/v1/nodes/n1".into(),
                status: 409,
            }]
        );
    }
}
