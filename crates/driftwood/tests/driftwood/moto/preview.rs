//! `driftwood preview --aws` with moto as AWS: what the change selects is resolved through the
//! real SDK with read-only calls, and the copy of the live (embedded) cluster drifts its nodes
//! onto exactly what AWS answered.

use super::Moto;
use crate::e2e::support::{MINUTE, cluster, deployment, initialized_of, nodepool, ready_pods};
use driftwood::preview::{PreviewOptions, aws_read, change_classes, preview};
use driftwood_controller::Settings;
use std::time::Duration;

#[tokio::test(start_paused = true)]
async fn a_change_resolved_through_aws_drifts_the_nodes_onto_what_aws_answered() {
    let moto = Moto::start("preview-live");
    let mut h = cluster(Settings::default()).await;
    h.apply(&nodepool("fleet", "", "")).await;
    h.apply(&deployment("fleet", 3, "3", "fleet", "")).await;
    h.wait_until("3 nodes and their pods ready", 30 * MINUTE, |s| {
        initialized_of(s, "fleet").len() == 3 && ready_pods(s, "fleet") == 3
    })
    .await;
    let image = moto.seed.ami("amazon-eks-node-1.30-v20240917");
    let change = format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - name: amazon-eks-node-1.30-v20240917
  role: "{role}"
  securityGroupSelectorTerms:
  - tags:
      karpenter.sh/discovery: preview-live
  subnetSelectorTerms:
  - tags:
      karpenter.sh/discovery: preview-live
"#,
        role = h.embedded.walkthrough_values("1.29").unwrap()["<<KARPENTER_NODE_IAM_ROLE_NAME>>"]
    );
    let classes = change_classes(&change).unwrap();
    let answers = aws_read::resolve(
        &moto.ports().await,
        &classes,
        "1.29",
        h.embedded.cluster.clock().now(),
    )
    .await
    .expect("moto answers");
    assert!(answers.unmatched.is_empty(), "{:?}", answers.unmatched);
    assert!(
        answers.images.contains_key(&image),
        "{:?}",
        answers.images.keys()
    );
    assert_eq!(answers.subnets.len(), moto.seed.subnets.len());
    assert!(
        answers
            .security_groups
            .contains_key(&moto.seed.security_group)
    );
    assert!(
        answers
            .calls
            .keys()
            .all(|op| op.starts_with("Describe") || op.starts_with("Get")),
        "{:?}",
        answers.calls
    );

    let predicted = preview(
        &h.embedded.cluster.client(),
        &change,
        &["moto-class.yaml".to_string()],
        &PreviewOptions {
            at: Some(h.embedded.cluster.clock().now()),
            horizon: Duration::from_secs(3600),
            aws_answers: Some(answers),
            ..PreviewOptions::default()
        },
    )
    .await
    .expect("the preview runs");
    let text = predicted.text();
    assert!(predicted.complete, "{text}");
    assert_eq!(predicted.drifted, 3, "{text}");
    assert!(text.contains("resolved through AWS (read-only"), "{text}");
    assert!(text.contains("as AWS answered"), "{text}");
    // The replacements run the image AWS answered, in the subnets it answered.
    assert_eq!(predicted.replacements.values().sum::<usize>(), 3, "{text}");
    for node in &predicted.nodes {
        let message = node.message.as_deref().unwrap_or_default();
        assert!(
            message.contains(&image) || node.reason.as_deref() != Some("AMIDrift"),
            "{text}"
        );
    }
}
