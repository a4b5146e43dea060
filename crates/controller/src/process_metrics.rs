//! The `process_*` metrics every Prometheus client exports (CPU time, memory, file
//! descriptors, start time), read from Linux's /proc at scrape time; elsewhere none.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second of /proc's CPU times (Linux's USER_HZ, 100 on every architecture
/// driftwood is built for).
const TICKS_PER_SECOND: f64 = 100.0;

/// What /proc says of this process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessFigures {
    pub cpu_seconds: f64,
    pub resident_bytes: f64,
    pub virtual_bytes: f64,
    /// Unix seconds.
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

/// User plus system CPU seconds and the start time in ticks after boot, from
/// `/proc/self/stat` (the command name may hold spaces and parentheses: fields are counted
/// after its last `)`).
pub fn parse_stat(stat: &str) -> Option<(f64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 of proc(5) (state) is fields[0]: utime is 14, stime 15, starttime 22.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let start: u64 = fields.get(19)?.parse().ok()?;
    #[allow(clippy::cast_precision_loss)]
    Some(((utime + stime) as f64 / TICKS_PER_SECOND, start))
}

/// A `Key:   N kB` line of `/proc/self/status`, in bytes.
pub fn status_bytes(status: &str, key: &str) -> Option<f64> {
    let line = status.lines().find(|l| {
        l.strip_prefix(key)
            .is_some_and(|rest| rest.starts_with(':'))
    })?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
pub fn max_open_files(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The boot time (`btime`) of `/proc/stat`, unix seconds.
pub fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// Reads this process's figures; `None` where /proc is not there.
pub fn read() -> Option<ProcessFigures> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (cpu_seconds, start_ticks) = parse_stat(&stat)?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| boot_time(&s));
    #[allow(clippy::cast_precision_loss)]
    Some(ProcessFigures {
        cpu_seconds,
        resident_bytes: status_bytes(&status, "VmRSS").unwrap_or_default(),
        virtual_bytes: status_bytes(&status, "VmSize").unwrap_or_default(),
        start_time_seconds: boot.map(|b| b as f64 + start_ticks as f64 / TICKS_PER_SECOND),
        open_fds: std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as f64),
        max_fds: std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| max_open_files(&l)),
    })
}

/// The collector: reads /proc at every scrape.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessCollector;

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> std::fmt::Result {
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(figures) = read() else {
            return Ok(());
        };
        ConstCounter::new(figures.cpu_seconds).encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "User and system CPU time this process has used, in seconds",
            None,
            MetricType::Counter,
        )?)?;
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory of this process, in bytes",
            figures.resident_bytes,
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory of this process, in bytes",
            figures.virtual_bytes,
        )?;
        for (name, help, value) in [
            (
                "process_start_time_seconds",
                "When this process started, in seconds since the Unix epoch",
                figures.start_time_seconds,
            ),
            (
                "process_open_fds",
                "File descriptors this process has open",
                figures.open_fds,
            ),
            (
                "process_max_fds",
                "The most file descriptors this process may open (its soft limit)",
                figures.max_fds,
            ),
        ] {
            if let Some(value) = value {
                gauge(&mut encoder, name, help, value)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis_of_the_command_name() {
        // A command name with a space and a parenthesis, as a thread may be named.
        let stat = "4127 (tokio (rt) x) S 1 4127 4127 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 123456 2000000 3000 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((3.0, 123_456)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn status_limits_and_boot_time_are_read_by_their_keys() {
        let status =
            "Name:\tdriftwood\nVmSize:\t  204800 kB\nVmRSSmax:\t1 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_bytes(status, "VmRSS"), Some(10_485_760.0));
        assert_eq!(status_bytes(status, "VmSize"), Some(209_715_200.0));
        assert_eq!(status_bytes(status, "VmSwap"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1024                 524288               files     \n";
        assert_eq!(max_open_files(limits), Some(1024.0));
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1764115200\nprocesses 9\n"),
            Some(1_764_115_200)
        );
    }

    #[test]
    fn this_process_reads_as_running_with_memory_and_open_files() {
        let figures = read();
        if !cfg!(target_os = "linux") {
            return;
        }
        let figures = figures.expect("/proc is there on Linux");
        assert!(figures.resident_bytes > 0.0 && figures.virtual_bytes >= figures.resident_bytes);
        assert!(figures.open_fds.is_some_and(|n| n >= 3.0));
        let started = figures.start_time_seconds.expect("a start time");
        // Started after 2020 and not in the future of the machine's clock.
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or_default();
        assert!(
            started > 1_577_836_800.0 && started <= wall + 1.0,
            "{started}"
        );
    }
}
