//! End to end against moto: the controllers on the embedded API server launch into moto's EC2
//! through the SDK; sim kubelets join Nodes for moto's running instances; the walkthrough from
//! ../shared/fixtures runs to the replaced node, with the safety invariants checked each step.

use crate::e2e::harness::{Harness, describe, kubelet_version};
use crate::e2e::walkthrough::{initialized_nodes, workload_running_on};
use driftwood::embedded::{Embedded, ExternalCloud, fill};
use driftwood_aws::AwsSettings;
use driftwood_aws::ports::DescribeInstancesInput;
use driftwood_controller::Settings;
use driftwood_controller::state::Snapshot;
use driftwood_sim::SimClusterOptions;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::fleet::MotoFleet;
use super::{Moto, Seed};

const MINUTE: Duration = Duration::from_secs(60);

fn provider_instance(s: &Snapshot, node: &str) -> String {
    let provider_id = s.store.nodes[node]
        .spec
        .as_ref()
        .and_then(|spec| spec.provider_id.clone())
        .unwrap_or_default();
    provider_id
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The embedded cluster on virtual time with its controllers launching into `moto` (provider
/// `settings`) and sim kubelets joining Nodes for moto's running instances, under a harness.
/// Abort the two tasks returned (the pacer, the fleet poller) when done.
pub async fn cluster_on_moto(
    moto: &Moto,
    settings: AwsSettings,
) -> (Harness, [tokio::task::JoinHandle<()>; 2]) {
    // Virtual time jumps ahead whenever everything waits (on moto, too); the pacer holds the
    // thread 50 ms per virtual second so a moto call costs a bounded slice of cluster time.
    let pacer = tokio::spawn(async {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let (fleet, poller) = MotoFleet::start(moto).await;
    let options = SimClusterOptions {
        kubernetes_version: "1.29".to_string(),
        cluster_name: "demo".to_string(),
        // moto stamps launches with wall time: start the virtual clock there.
        start_time: jiff::Timestamp::now(),
        ..SimClusterOptions::default()
    };
    let cloud = ExternalCloud {
        ports: moto.ports().await,
        settings,
    };
    let embedded = Embedded::start_with_cloud(
        options,
        Settings::default(),
        Some(cloud),
        Some(fleet as Arc<dyn driftwood_sim::kubelet::MachineFleet>),
    )
    .await
    .unwrap();
    (Harness::watching(embedded).await, [pacer, poller])
}

/// The walkthrough's placeholders for moto's seed, with the AMIs named `amd` and `arm`.
pub fn walkthrough_values(seed: &Seed, amd: &str, arm: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("<<CLUSTER_NAME>>".to_string(), seed.cluster.clone()),
        (
            "<<KARPENTER_NODE_IAM_ROLE_NAME>>".to_string(),
            seed.role.clone(),
        ),
        ("<<AMD64PREVAMI>>".to_string(), seed.ami(amd)),
        ("<<ARM64PREVAMI>>".to_string(), seed.ami(arm)),
    ])
}

#[tokio::test(start_paused = true)]
async fn walkthrough_on_moto_replaces_the_node_with_the_new_ami() {
    let moto = Moto::start("demo");
    let seed = moto.seed.clone();
    let (mut h, tasks) =
        cluster_on_moto(&moto, AwsSettings::new("demo", &seed.region, "1.29")).await;
    let values = |amd: &str, arm: &str| walkthrough_values(&seed, amd, arm);
    let old = values(
        "amazon-eks-node-1.29-v20240807",
        "amazon-eks-arm64-node-1.29-v20240807",
    );
    h.apply_fixture("update-nodes-with-drift/latest-current-ami.yaml", &old)
        .await;
    h.apply_fixture("update-nodes-with-drift/workload.yaml", &old)
        .await;
    h.wait_until(
        "3 workload pods running on an initialized v1.29 node in moto",
        15 * MINUTE,
        |s| {
            initialized_nodes(s)
                .iter()
                .any(|n| workload_running_on(s, n) == 3)
        },
    )
    .await;
    let s = h.snapshot();
    let old_node = initialized_nodes(&s).remove(0);
    assert!(kubelet_version(&s.store.nodes[&old_node]).starts_with("v1.29."));
    let old_instance = provider_instance(&s, &old_node);
    let ports = moto.ports().await;
    let described = ports
        .ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec![old_instance.clone()],
            filters: vec![],
        })
        .await
        .unwrap();
    assert_eq!(described[0].state, "running", "{}", describe(&s));
    assert_eq!(described[0].image_id, old["<<AMD64PREVAMI>>"]);

    // The walkthrough's upgrade: the next version's AMI ids.
    let new = values(
        "amazon-eks-node-1.30-v20240917",
        "amazon-eks-arm64-node-1.30-v20240917",
    );
    let text = std::fs::read_to_string(
        crate::blueprints().join("update-nodes-with-drift/latest-current-ami.yaml"),
    )
    .unwrap()
    .replace("KubernetesVersion: \"1.31\"", "KubernetesVersion: \"1.32\"");
    h.min_ready.clear();
    h.apply(&fill(&text, &new)).await;
    // The old NodeClaim must be gone too: the kubelets see moto through a poller up to a
    // second stale, so a Node deleted while its instance still read as running can be
    // registered once more until the next poll; the NodeClaim goes only after moto reports
    // the instance terminating.
    h.wait_until(
        "the old node and its NodeClaim gone and 3 pods on a v1.30 node in moto",
        30 * MINUTE,
        |s| {
            s.store.nodeclaims.len() == 1
                && !s.store.nodes.contains_key(&old_node)
                && initialized_nodes(s).iter().any(|n| {
                    kubelet_version(&s.store.nodes[n]).starts_with("v1.30.")
                        && workload_running_on(s, n) == 3
                })
        },
    )
    .await;
    let s = h.snapshot();
    assert_eq!(s.store.nodeclaims.len(), 1, "{}", describe(&s));
    assert_eq!(
        h.min_ready.get("latest-current-ami").copied(),
        Some(2),
        "availability during the rollout"
    );
    // In moto: the old instance terminated, the new one running the 1.30 amd64 AMI.
    let old_state = ports
        .ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec![old_instance],
            filters: vec![],
        })
        .await
        .unwrap();
    assert!(
        ["shutting-down", "terminated"].contains(&old_state[0].state.as_str()),
        "{}",
        old_state[0].state
    );
    let new_node = initialized_nodes(&s).remove(0);
    let new_instance = ports
        .ec2
        .describe_instances(DescribeInstancesInput {
            instance_ids: vec![provider_instance(&s, &new_node)],
            filters: vec![],
        })
        .await
        .unwrap();
    assert_eq!(new_instance[0].image_id, new["<<AMD64PREVAMI>>"]);
    assert_eq!(new_instance[0].state, "running");
    drop(h);
    for task in tasks {
        task.abort();
    }
}
