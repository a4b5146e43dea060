//! Interruption handling through the real SDK against moto's SQS: the queue client polls,
//! parses and deletes as Karpenter does; then the controllers on the embedded cluster, launching
//! into moto's EC2, replace a node when EC2's spot interruption warning arrives on the queue.

use crate::e2e::harness::describe;
use crate::e2e::walkthrough::{initialized_nodes, workload_running_on};
use driftwood_aws::AwsSettings;
use driftwood_aws::interruption::events::EventOrigin;
use driftwood_aws::interruption::{InterruptionQueue, Kind};
use driftwood_cloud_aws::aws_sdk_sqs;
use std::time::Duration;

use super::Moto;
use super::walkthrough::{cluster_on_moto, walkthrough_values};

const MINUTE: Duration = Duration::from_secs(60);

async fn sqs(moto: &Moto) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(
        &driftwood_cloud_aws::load_sdk_config(&moto.sdk_options())
            .await
            .unwrap(),
    )
}

/// Creates the queue `name` in moto; returns its URL.
async fn create_queue(client: &aws_sdk_sqs::Client, name: &str) -> String {
    client
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string()
}

/// Messages on the queue, visible or being handled (moto's approximate counts are exact).
async fn depth(client: &aws_sdk_sqs::Client, url: &str) -> usize {
    use aws_sdk_sqs::types::QueueAttributeName;
    let out = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    out.attributes()
        .into_iter()
        .flatten()
        .map(|(_, v)| v.parse::<usize>().unwrap())
        .sum()
}

/// The queue client over aws-sdk-sqs: a missing queue is QueueDoesNotExist (not found); a
/// spot interruption warning sent as EventBridge sends it is received with Karpenter's
/// parameters and parsed; deleting it empties the queue.
#[tokio::test]
async fn the_queue_client_receives_parses_and_deletes_through_the_sdk() {
    let moto = Moto::start("demo");
    let ports = moto.ports().await;
    let missing = InterruptionQueue::new(ports.sqs.clone(), "no-such-queue");
    let error = missing.receive().await.unwrap_err();
    assert!(error.is_not_found(), "{error}");

    let client = sqs(&moto).await;
    let url = create_queue(&client, "demo").await;
    let queue = InterruptionQueue::new(ports.sqs.clone(), "demo");
    assert_eq!(queue.url().await.unwrap(), url);
    let origin = EventOrigin {
        account: "123456789012".into(),
        region: moto.seed.region.clone(),
    };
    let at = jiff::Timestamp::now();
    for body in [
        origin.spot_interruption("i-0123456789abcdef0", at),
        "not an event".to_string(),
    ] {
        client
            .send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let received = queue.receive().await.unwrap();
    assert_eq!(received.len(), 2, "{received:?}");
    let spot = received
        .iter()
        .find_map(|r| r.parsed.as_ref().ok())
        .expect("the warning parses");
    assert_eq!(spot.kind, Kind::SpotInterrupted);
    assert_eq!(spot.instance_ids, ["i-0123456789abcdef0"]);
    assert!(received.iter().any(|r| r.parsed.is_err()));
    // Received: hidden for the visibility timeout, not gone.
    assert_eq!(depth(&client, &url).await, 2);
    for r in &received {
        queue.delete(&r.receipt_handle).await.unwrap();
    }
    assert_eq!(depth(&client, &url).await, 0);
}

/// Issue 30's "done when", through moto: the controllers launch into moto's EC2; EC2's spot
/// interruption warning for the node's instance arrives on moto's SQS queue; driftwood deletes
/// the NodeClaim, launches capacity for its pods, drains it with the workload's PDB honoured
/// and terminates the instance in moto, and deletes the message.
#[tokio::test(start_paused = true)]
async fn a_spot_interruption_on_motos_queue_replaces_the_node_in_moto() {
    let moto = Moto::start("demo");
    let seed = moto.seed.clone();
    let client = sqs(&moto).await;
    let url = create_queue(&client, "demo-interruption").await;
    let mut settings = AwsSettings::new("demo", &seed.region, "1.29");
    settings.interruption_queue = Some("demo-interruption".to_string());
    let (mut h, tasks) = cluster_on_moto(&moto, settings).await;
    let values = walkthrough_values(
        &seed,
        "amazon-eks-node-1.29-v20240807",
        "amazon-eks-arm64-node-1.29-v20240807",
    );
    h.apply_fixture("update-nodes-with-drift/latest-current-ami.yaml", &values)
        .await;
    h.apply_fixture("update-nodes-with-drift/workload.yaml", &values)
        .await;
    h.apply(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: latest-current-ami, namespace: default}\nspec:\n  minAvailable: 2\n  selector: {matchLabels: {app: latest-current-ami}}\n",
    )
    .await;
    h.wait_until(
        "3 workload pods running on an initialized node in moto",
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
    let old_claim = s
        .nodeclaim_of(&s.store.nodes[&old_node])
        .and_then(|c| c.metadata.name.clone())
        .unwrap();
    let instance = s.store.nodes[&old_node]
        .spec
        .as_ref()
        .and_then(|spec| spec.provider_id.as_deref())
        .and_then(|p| p.rsplit('/').next())
        .unwrap()
        .to_string();
    h.min_ready.clear();
    let origin = EventOrigin {
        account: "123456789012".into(),
        region: seed.region.clone(),
    };
    let now = h.embedded.cluster.clock().now();
    client
        .send_message()
        .queue_url(&url)
        .message_body(origin.spot_interruption(&instance, now))
        .send()
        .await
        .unwrap();
    h.wait_until(
        "the interrupted node gone and 3 pods on its replacement in moto",
        30 * MINUTE,
        // One NodeClaim in the end: moto ignores the launch template's security groups (the
        // fleet poller sets them as EC2 would, a poll later), so a new instance can read as
        // drifted for a moment and be replaced once more.
        |s| {
            s.store.nodeclaims.len() == 1
                && !s.store.nodeclaims.contains_key(&old_claim)
                && !s.store.nodes.contains_key(&old_node)
                && initialized_nodes(s)
                    .iter()
                    .any(|n| workload_running_on(s, n) == 3)
        },
    )
    .await;
    let s = h.snapshot();
    assert_eq!(s.store.nodeclaims.len(), 1, "{}", describe(&s));
    assert_eq!(
        h.min_ready.get("latest-current-ami").copied(),
        Some(2),
        "the workload's PDB held during the drain"
    );
    assert_eq!(depth(&client, &url).await, 0, "the message was deleted");
    let metrics = h.embedded.ctx().expect("controllers run").metrics.render();
    assert!(
        metrics.contains(
            "karpenter_interruption_received_messages_total{message_type=\"spot_interrupted\"} 1"
        ),
        "{metrics}"
    );
    drop(h);
    for task in tasks {
        task.abort();
    }
}
