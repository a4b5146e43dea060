//! `driftwood demo`: today a preview that checks the bundled walkthrough manifests; the
//! embedded-cluster rollout lands with the demo issue.

use driftwood_api::manifest::{Document, parse_documents};
use std::process::ExitCode;

/// The walkthrough's manifests, bundled so the demo needs no checkout.
const WALKTHROUGH: &[(&str, &str)] = &[
    (
        "update-nodes-with-drift/latest-current-ami.yaml",
        include_str!("../../../../examples/update-nodes-with-drift/latest-current-ami.yaml"),
    ),
    (
        "update-nodes-with-drift/workload.yaml",
        include_str!("../../../../examples/update-nodes-with-drift/workload.yaml"),
    ),
];

/// Fills the walkthrough's placeholders as its instructions do with sed.
fn fill(text: &str) -> String {
    text.replace("<<CLUSTER_NAME>>", "driftwood-demo")
        .replace(
            "<<KARPENTER_NODE_IAM_ROLE_NAME>>",
            "KarpenterNodeRole-driftwood-demo",
        )
        .replace("<<AMD64PREVAMI>>", "ami-00000000000000129")
        .replace("<<ARM64PREVAMI>>", "ami-10000000000000129")
}

pub fn run() -> anyhow::Result<ExitCode> {
    println!("driftwood demo");
    println!();
    println!(
        "The full demo — the \"update nodes using drift\" walkthrough replayed on an embedded"
    );
    println!("cluster with a simulated EC2 on a virtual clock — is not built yet. For now this");
    println!("checks the walkthrough's manifests (placeholders filled) against driftwood's rules:");
    println!();
    let mut invalid = 0;
    for (name, text) in WALKTHROUGH {
        for document in parse_documents(&fill(text)) {
            match document {
                Ok(Document::Karpenter(object)) => {
                    let report = object.validate();
                    let verdict = if report.is_valid() { "ok" } else { "invalid" };
                    println!("  {} ({name}): {verdict}", report.object);
                    for e in &report.errors {
                        println!("    error: {e}");
                    }
                    for w in &report.warnings {
                        println!("    warning: {w}");
                    }
                    invalid += usize::from(!report.is_valid());
                }
                Ok(Document::Other {
                    kind, name: object, ..
                }) => println!("  {kind} {object:?} ({name}): passed over"),
                Err(e) => {
                    invalid += 1;
                    println!("  {name}: {e}");
                }
            }
        }
    }
    println!();
    println!(
        "Next: `driftwood validate -f <your manifests>`, `driftwood crds | kubectl apply -f -`."
    );
    Ok(if invalid == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
