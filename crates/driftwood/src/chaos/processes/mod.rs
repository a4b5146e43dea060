//! Process chaos: the walkthrough's rollout run by real `driftwood controller` processes (the
//! production binary, its AWS SDK pointed at the simulated account's wire endpoint, its kube
//! client at the API server through a TCP fault proxy), under a seeded schedule of the faults
//! only separate processes meet: SIGKILL of the leader, SIGSTOP of the leader past its lease
//! and SIGCONT, API latency, connection resets, half-open connections, an API server restart —
//! with AWS's request-rate limits and eventual consistency on in the account. The same named
//! invariants as `driftwood chaos`, checked every wall second from a watch of the API server,
//! plus `single-writer`: from the API server's audit of writes, no replica writes while
//! another holds the lease.

pub mod proxy;

use crate::aws_endpoint;
use crate::chaos::invariants::{Invariant, Invariants, Violation, end_state_unmet};
use crate::chaos::workload_readiness;
use crate::embedded::{Embedded, fill};
use anyhow::Context as _;
use driftwood_controller::Settings;
use driftwood_controller::state::{ClusterState, spawn_watchers};
use driftwood_sim::SimClusterOptions;
use driftwood_sim::apiserver::audit::{AuditEntry, AuditLog, read_audit_log};
use k8s_openapi::api::coordination::v1::Lease;
use proxy::{FaultProxy, Mode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The walkthrough's class and pool, and its workload.
const CLASS_AND_POOL: &str =
    include_str!("../../../../../examples/update-nodes-with-drift/latest-current-ami.yaml");
const WORKLOAD: &str =
    include_str!("../../../../../examples/update-nodes-with-drift/workload.yaml");

/// The lease the replicas run with: failovers in seconds (renew deadline 4 s).
const LEASE_SECONDS: u64 = 6;
/// Replicas kept running, as a Deployment of two keeps them.
const REPLICAS: usize = 2;

/// The process-level faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProcessFault {
    /// SIGKILL of the leader (a new replica starts 1–5 s later).
    LeaderKill,
    /// SIGSTOP of the leader for 2–3 leases, then SIGCONT.
    LeaderStop,
    /// Every byte between controllers and API server delayed 0.1–1 s, for 5–20 s.
    ApiLatency,
    /// Every open connection to the API server reset.
    ApiReset,
    /// Connections held open forwarding nothing, for 5–20 s.
    ApiHalfOpen,
    /// The API server's listener stops for 1–5 s and comes back on another port (state kept,
    /// as etcd keeps it); every connection and watch breaks.
    ApiServerRestart,
}

impl ProcessFault {
    pub const ALL: [ProcessFault; 6] = [
        Self::LeaderKill,
        Self::LeaderStop,
        Self::ApiLatency,
        Self::ApiReset,
        Self::ApiHalfOpen,
        Self::ApiServerRestart,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::LeaderKill => "leader-kill",
            Self::LeaderStop => "leader-stop",
            Self::ApiLatency => "api-latency",
            Self::ApiReset => "api-reset",
            Self::ApiHalfOpen => "api-half-open",
            Self::ApiServerRestart => "apiserver-restart",
        }
    }
}

/// One seed's run.
#[derive(Debug, Clone)]
pub struct ProcessChaosConfig {
    /// The `driftwood` binary the replicas run.
    pub binary: PathBuf,
    pub seed: u64,
    /// How long faults are injected after the change is applied.
    pub window: Duration,
    /// How long the rollout may take to complete after the window.
    pub settle: Duration,
    /// Where kubeconfig, audit log and replica logs go.
    pub work_dir: PathBuf,
}

/// What one seed found.
#[derive(Debug, Clone, Default)]
pub struct ProcessSeedOutcome {
    pub seed: u64,
    /// (cluster second, fault, detail).
    pub injected: Vec<(i64, ProcessFault, String)>,
    pub violations: Vec<Violation>,
    /// Replica processes started in all.
    pub replicas_started: usize,
    /// Cluster seconds from the change to the end state.
    pub rollout_seconds: Option<i64>,
}

impl ProcessSeedOutcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// One replica process.
struct Replica {
    identity: String,
    child: Child,
    stopped: bool,
    log: PathBuf,
}

impl Replica {
    fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .context("running kill")?;
        anyhow::ensure!(status.success(), "kill {signal} {}", self.identity);
        Ok(())
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if self.stopped {
            let _cont = self.signal("-CONT");
        }
        if let Err(error) = self.child.kill() {
            tracing::debug!(identity = %self.identity, %error, "replica already gone");
        }
        if let Err(error) = self.child.wait() {
            tracing::debug!(identity = %self.identity, %error, "reaping the replica failed");
        }
    }
}

/// What the replicas are started with.
struct Launcher {
    binary: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
    aws_endpoint: String,
    region: String,
    started: usize,
}

impl Launcher {
    fn start(&mut self) -> anyhow::Result<Replica> {
        self.started += 1;
        let identity = format!("driftwood-{}", self.started);
        let log = self.dir.join(format!("{identity}.log"));
        let port = || -> anyhow::Result<u16> {
            Ok(std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port())
        };
        let child = Command::new(&self.binary)
            .args([
                "controller",
                "--lease-duration-seconds",
                &LEASE_SECONDS.to_string(),
            ])
            .env_clear()
            .env("KUBECONFIG", &self.kubeconfig)
            .env("CLUSTER_NAME", "driftwood-demo")
            .env(
                "CLUSTER_ENDPOINT",
                "https://driftwood-demo.example.eks.amazonaws.com",
            )
            .env("CLUSTER_CA_BUNDLE", "Y2E=")
            .env("SYSTEM_NAMESPACE", "kube-system")
            .env("POD_NAME", &identity)
            .env("METRICS_PORT", port()?.to_string())
            .env("HEALTH_PROBE_PORT", port()?.to_string())
            .env("LOG_LEVEL", "info")
            .env("AWS_REGION", &self.region)
            .env("AWS_ENDPOINT_URL", &self.aws_endpoint)
            .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
            .env("AWS_SECRET_ACCESS_KEY", "any")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        Ok(Replica {
            identity,
            child,
            stopped: false,
            log,
        })
    }
}

/// A fault's undo, due at a cluster second.
enum Undo {
    Continue(String),
    StartReplica,
    ProxyPass,
    ServeApi,
}

/// Runs one seed on its own runtime (wall-clock time).
pub fn run_seed(config: &ProcessChaosConfig) -> anyhow::Result<ProcessSeedOutcome> {
    std::fs::create_dir_all(&config.work_dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(config))
}

async fn run(config: &ProcessChaosConfig) -> anyhow::Result<ProcessSeedOutcome> {
    let dir = &config.work_dir;
    let options = SimClusterOptions {
        kubernetes_version: "1.29".to_string(),
        cluster_name: "driftwood-demo".to_string(),
        start_time: jiff::Timestamp::now(),
        machine_launch_delay: Duration::from_secs(3),
        machine_termination_delay: Duration::from_secs(2),
        node_ready_delay: Duration::from_secs(1),
        ..SimClusterOptions::default()
    };
    let mut embedded = Embedded::start(options, Settings::default()).await?;
    embedded.kill_controllers();
    let clock = embedded.cluster.clock();
    let now = || clock.now().as_second();
    let audit_path = dir.join("audit.jsonl");
    let audit = AuditLog::create(&audit_path, clock.clone())?;
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let mut server = Some(
        embedded
            .cluster
            .api_server()
            .serve_http_audited(loopback, audit.clone())
            .await?,
    );
    let aws = aws_endpoint::serve(embedded.cluster.aws(), loopback).await?;
    let proxy = FaultProxy::start(server.as_ref().map_or(loopback, |s| s.address())).await?;
    let kubeconfig = dir.join("kubeconfig");
    driftwood_sim::apiserver::http::write_kubeconfig(&kubeconfig, &proxy.url())?;
    let observer = ClusterState::new();
    let watchers = spawn_watchers(&embedded.cluster.client(), &observer);
    observer.wait_synced().await;

    let mut launcher = Launcher {
        binary: config.binary.clone(),
        dir: dir.clone(),
        kubeconfig,
        aws_endpoint: aws.url(),
        region: embedded.cluster.aws().config().region.clone(),
        started: 0,
    };
    let old = embedded.walkthrough_values("1.29")?;
    embedded
        .apply_yaml(&fill(&format!("{CLASS_AND_POOL}\n---\n{WORKLOAD}"), &old))
        .await?;
    let mut replicas = Vec::new();
    for _ in 0..REPLICAS {
        replicas.push(launcher.start()?);
    }
    let mut outcome = ProcessSeedOutcome {
        seed: config.seed,
        ..Default::default()
    };
    // The workload on its first node, before any fault.
    let ready_by = now() + 180;
    while !workload_ready(&embedded) {
        if now() > ready_by {
            anyhow::bail!(
                "seed {}: the workload never ran before the change (replica logs in {})",
                config.seed,
                dir.display()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // The change, then the faults window, then the settle.
    let new = embedded.walkthrough_values("1.30")?;
    embedded.apply_yaml(&fill(CLASS_AND_POOL, &new)).await?;
    let changed_at = now();
    let window_end = changed_at + secs(config.window);
    let deadline = window_end + secs(config.settle);
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut next_fault = changed_at + rng.random_range(2..8);
    let mut undo: Vec<(i64, Undo)> = Vec::new();
    let mut invariants = Invariants::default();
    let no_pdb_excused = |_: &str| false;
    let none_terminated = BTreeSet::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tick.tick().await;
        let t = now();
        // Undo what is due.
        let (due, later): (Vec<_>, Vec<_>) = undo.into_iter().partition(|(at, _)| *at <= t);
        undo = later;
        for (_, action) in due {
            match action {
                Undo::Continue(identity) => {
                    if let Some(r) = replicas.iter_mut().find(|r| r.identity == identity) {
                        r.signal("-CONT")?;
                        r.stopped = false;
                    }
                }
                Undo::StartReplica => replicas.push(launcher.start()?),
                Undo::ProxyPass => proxy.set_mode(Mode::Pass),
                Undo::ServeApi => {
                    let served = embedded
                        .cluster
                        .api_server()
                        .serve_http_audited(loopback, audit.clone())
                        .await?;
                    proxy.set_upstream(served.address());
                    server = Some(served);
                }
            }
        }
        // A replica that exited on its own (a thawed leader that lost its lease) is replaced,
        // as its pod would be restarted.
        let before = replicas.len();
        replicas.retain_mut(|r| !r.exited());
        for _ in replicas.len()..before {
            undo.push((t + 2, Undo::StartReplica));
        }
        // Inject.
        if t >= next_fault && t < window_end {
            let kind = ProcessFault::ALL[rng.random_range(0..ProcessFault::ALL.len())];
            if let Some(detail) = inject(
                kind,
                t,
                &mut rng,
                &embedded,
                &mut replicas,
                &proxy,
                &mut server,
                &mut undo,
            )
            .await?
            {
                outcome.injected.push((t, kind, detail));
            }
            next_fault = t + rng.random_range(5..12);
        }
        // Safety, every second.
        let snapshot = observer.snapshot();
        let instances = embedded.cluster.aws().instances();
        let faults_stopped = (t >= window_end && undo.is_empty()).then_some(window_end);
        invariants.check_second(
            t,
            &snapshot,
            &instances,
            no_pdb_excused,
            &none_terminated,
            faults_stopped,
        );
        // Liveness, once the faults are over: the rollout done and the end state reached.
        if faults_stopped.is_some() {
            let unmet = end_state_unmet(&snapshot, &instances, &workload_readiness(&embedded));
            let rolled = rolled_out(&snapshot, "v1.30");
            if unmet.is_empty() && rolled {
                outcome.rollout_seconds = Some(t - changed_at);
                break;
            }
            if t > deadline {
                for (invariant, subject, what) in unmet {
                    invariants.record(t, invariant, &subject, what);
                }
                if !rolled {
                    invariants.record(
                        t,
                        Invariant::RolloutCompletes,
                        "rollout",
                        "nodes of the old version remain".to_string(),
                    );
                }
                let dump = dir.join("cluster-at-deadline.txt");
                if let Err(error) = std::fs::write(&dump, describe_cluster(&embedded)) {
                    tracing::warn!(path = %dump.display(), %error, "could not write the cluster's state");
                }
                break;
            }
        }
    }
    for replica in &mut replicas {
        if replica.stopped {
            replica.signal("-CONT")?;
            replica.stopped = false;
        }
        let panicked = std::fs::read_to_string(&replica.log)
            .unwrap_or_default()
            .contains("panicked at");
        if panicked {
            invariants.record(
                now(),
                Invariant::NoPanic,
                &replica.identity,
                format!(
                    "{} panicked (log {})",
                    replica.identity,
                    replica.log.display()
                ),
            );
        }
    }
    drop(replicas);
    for watcher in watchers {
        watcher.abort();
    }
    for found in single_writer(&read_audit_log(&audit_path)?) {
        invariants.record(now(), Invariant::SingleWriter, &found.0, found.1);
    }
    outcome.violations = invariants.violations;
    outcome.replicas_started = launcher.started;
    drop(server);
    Ok(outcome)
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// The cluster as the API server holds it, one line per Node, NodeClaim, ReplicaSet and Pod:
/// what a liveness violation is read against (which pod is not ready, where it is bound, why,
/// and what its ReplicaSet's status says).
fn describe_cluster(embedded: &Embedded) -> String {
    use driftwood_api::nodeclaim::NodeClaim;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::{Node, Pod};
    let api = embedded.cluster.api_server();
    let mut out = String::new();
    for node in api.list::<Node>(None) {
        let spec = node.spec.unwrap_or_default();
        let taints: Vec<String> = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status)
            .unwrap_or_default();
        out.push_str(&format!(
            "node {} ready={ready} deleting={} provider={} unschedulable={} taints={taints:?}",
            node.metadata.name.unwrap_or_default(),
            node.metadata.deletion_timestamp.is_some(),
            spec.provider_id.unwrap_or_default(),
            spec.unschedulable.unwrap_or(false),
        ));
        out.push('\n');
    }
    for claim in api.list::<NodeClaim>(None) {
        let conditions: Vec<String> = claim
            .status
            .as_ref()
            .map(|s| {
                s.conditions
                    .iter()
                    .map(|c| format!("{}={}", c.type_, c.status))
                    .collect()
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "nodeclaim {} deleting={} node={} {conditions:?}",
            claim.metadata.name.clone().unwrap_or_default(),
            claim.metadata.deletion_timestamp.is_some(),
            claim
                .status
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
        ));
        out.push('\n');
    }
    for rs in api.list::<ReplicaSet>(None) {
        let status = rs.status.unwrap_or_default();
        out.push_str(&format!(
            "replicaset {}/{} replicas={} ready={}",
            rs.metadata.namespace.unwrap_or_default(),
            rs.metadata.name.unwrap_or_default(),
            status.replicas,
            status.ready_replicas.unwrap_or(0),
        ));
        out.push('\n');
    }
    for pod in api.list::<Pod>(None) {
        let status = pod.status.unwrap_or_default();
        let conditions: Vec<String> = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .map(|c| format!("{}={}:{}", c.type_, c.status, c.reason.unwrap_or_default()))
            .collect();
        out.push_str(&format!(
            "pod {}/{} node={} phase={} deleting={} created={} {conditions:?}",
            pod.metadata.namespace.unwrap_or_default(),
            pod.metadata.name.unwrap_or_default(),
            pod.spec.and_then(|s| s.node_name).unwrap_or_default(),
            status.phase.unwrap_or_default(),
            pod.metadata.deletion_timestamp.is_some(),
            pod.metadata
                .creation_timestamp
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
        ));
        out.push('\n');
    }
    out
}

fn workload_ready(embedded: &Embedded) -> bool {
    workload_readiness(embedded)
        .values()
        .all(|(ready, desired)| ready >= desired)
        && !workload_readiness(embedded).is_empty()
}

/// Whether every NodePool node runs `kubelet` (e.g. `v1.30`).
fn rolled_out(snapshot: &driftwood_controller::state::Snapshot, kubelet: &str) -> bool {
    let pooled: Vec<_> = snapshot
        .store
        .nodes
        .values()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(driftwood_api::wellknown::LABEL_NODEPOOL))
        })
        .collect();
    !pooled.is_empty()
        && pooled.iter().all(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .is_some_and(|i| i.kubelet_version.starts_with(kubelet))
        })
}

/// The lease holder, as the API server has it.
fn leader(embedded: &Embedded) -> Option<String> {
    embedded
        .cluster
        .api_server()
        .get::<Lease>("kube-system", driftwood_controller::leader::LEASE_NAME)
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}

#[allow(clippy::too_many_arguments)]
async fn inject(
    kind: ProcessFault,
    t: i64,
    rng: &mut ChaCha8Rng,
    embedded: &Embedded,
    replicas: &mut [Replica],
    proxy: &FaultProxy,
    server: &mut Option<driftwood_sim::apiserver::http::HttpServer>,
    undo: &mut Vec<(i64, Undo)>,
) -> anyhow::Result<Option<String>> {
    let busy = |undo: &Vec<(i64, Undo)>, f: fn(&Undo) -> bool| undo.iter().any(|(_, u)| f(u));
    let lease = i64::try_from(LEASE_SECONDS).unwrap_or(6);
    Ok(match kind {
        ProcessFault::LeaderKill | ProcessFault::LeaderStop => {
            let Some(holder) = leader(embedded) else {
                return Ok(None);
            };
            let Some(index) = replicas
                .iter()
                .position(|r| r.identity == holder && !r.stopped)
            else {
                return Ok(None);
            };
            if kind == ProcessFault::LeaderKill {
                replicas[index].signal("-KILL")?;
                undo.push((t + rng.random_range(1..=5), Undo::StartReplica));
                Some(format!("SIGKILL {holder}"))
            } else {
                replicas[index].signal("-STOP")?;
                replicas[index].stopped = true;
                let resume = t + rng.random_range(2 * lease..=3 * lease);
                undo.push((resume, Undo::Continue(holder.clone())));
                Some(format!("SIGSTOP {holder} until +{}s", resume - t))
            }
        }
        ProcessFault::ApiLatency | ProcessFault::ApiHalfOpen => {
            if busy(undo, |u| matches!(u, Undo::ProxyPass)) {
                return Ok(None);
            }
            let until = t + rng.random_range(5..=20);
            if kind == ProcessFault::ApiLatency {
                let delay = Duration::from_millis(rng.random_range(100..=1000));
                proxy.set_mode(Mode::Delay(delay));
                undo.push((until, Undo::ProxyPass));
                Some(format!("{delay:?} per chunk for {}s", until - t))
            } else {
                proxy.set_mode(Mode::HalfOpen);
                undo.push((until, Undo::ProxyPass));
                Some(format!("half-open for {}s", until - t))
            }
        }
        ProcessFault::ApiReset => {
            proxy.reset();
            Some("every connection reset".to_string())
        }
        ProcessFault::ApiServerRestart => {
            let Some(running) = server.take() else {
                return Ok(None);
            };
            running.shutdown();
            proxy.reset();
            let back = t + rng.random_range(1..=5);
            undo.push((back, Undo::ServeApi));
            Some(format!("down for {}s", back - t))
        }
    })
}

/// The replica a write came from: `driftwood-controller/VERSION (IDENTITY)`.
fn writer(entry: &AuditEntry) -> Option<&str> {
    entry
        .user_agent
        .strip_prefix("driftwood-controller/")?
        .split_once(" (")?
        .1
        .strip_suffix(')')
}

/// Whether a request path is the leader-election Lease (its creation posts to the
/// collection).
fn is_lease(path: &str) -> bool {
    path.contains("/coordination.k8s.io/")
        && (path.ends_with("/leases") || path.contains("/leases/"))
}

/// `single-writer` from the audit log, in the order the API server answered: every write a
/// replica got through (2xx) is made while the lease's last successful writer is that replica.
/// (subject, detail) per offending replica.
pub fn single_writer(audit: &[AuditEntry]) -> Vec<(String, String)> {
    let mut holder: Option<&str> = None;
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    for entry in audit.iter().filter(|e| e.status < 300) {
        let Some(who) = writer(entry) else {
            continue;
        };
        if is_lease(&entry.path) {
            holder = Some(who);
            continue;
        }
        if holder != Some(who) {
            found.entry(who.to_string()).or_insert_with(|| {
                format!(
                    "{who} wrote {} {} at {} while {} held the lease",
                    entry.method,
                    entry.path,
                    entry.time,
                    holder.unwrap_or("nobody")
                )
            });
        }
    }
    found.into_iter().collect()
}

/// The command that replays a seed, for reports.
pub fn replay_command(seed: u64) -> String {
    format!("driftwood chaos --processes --first-seed {seed} --seeds 1")
}

/// Where a seed's files go under `base`.
pub fn seed_dir(base: &Path, seed: u64) -> PathBuf {
    base.join(format!("seed-{seed}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(agent: &str, path: &str, status: u16, time: &str) -> AuditEntry {
        AuditEntry {
            time: time.into(),
            user_agent: format!("driftwood-controller/0.1.0 ({agent})"),
            method: "PATCH".into(),
            path: path.into(),
            status,
        }
    }

    #[test]
    fn a_write_by_a_replica_that_does_not_hold_the_lease_is_found() {
        let lease =
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpenter-leader-election";
        let node = "/api/v1/nodes/n1";
        let collection = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
        let fine = [
            write("a", collection, 201, "0"),
            write("a", lease, 200, "1"),
            write("a", node, 200, "2"),
            write("b", lease, 409, "3"),
            write("b", lease, 200, "4"),
            write("a", lease, 409, "5"),
            write("a", node, 409, "6"),
            write("b", node, 200, "7"),
        ];
        assert!(single_writer(&fine).is_empty());
        let mut split = fine.to_vec();
        split.push(write("a", node, 200, "8"));
        let found = single_writer(&split);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "a");
        assert!(
            found[0].1.contains("while b held the lease"),
            "{}",
            found[0].1
        );
    }
}
