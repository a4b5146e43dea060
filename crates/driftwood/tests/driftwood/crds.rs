//! `driftwood crds`: output parses as CRDs and matches the checked-in deploy/crds.

use super::{driftwood, repo_root, stdout};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

#[test]
fn prints_three_crds_that_parse() {
    let output = driftwood(&["crds"], None);
    assert!(output.status.success());
    let text = stdout(&output);
    let crds: Vec<CustomResourceDefinition> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("a CRD"))
        .collect();
    let kinds: Vec<_> = crds.iter().map(|c| c.spec.names.kind.clone()).collect();
    assert_eq!(kinds, ["EC2NodeClass", "NodeClaim", "NodePool"]);
}

#[test]
fn checked_in_crds_match_generated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf-8 path");
    assert!(
        driftwood(&["crds", "--out-dir", out], None)
            .status
            .success()
    );
    let deploy = repo_root().join("deploy/crds");
    let mut generated: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    generated.sort();
    assert_eq!(generated.len(), 3);
    for name in generated {
        let fresh = std::fs::read_to_string(dir.path().join(&name)).unwrap();
        let checked_in = std::fs::read_to_string(deploy.join(&name)).unwrap_or_else(|_| {
            panic!(
                "deploy/crds/{} is missing: run `driftwood crds --out-dir deploy/crds`",
                name.to_string_lossy()
            )
        });
        assert!(
            fresh == checked_in,
            "deploy/crds/{} is stale: run `cargo run -p driftwood -- crds --out-dir deploy/crds`",
            name.to_string_lossy()
        );
    }
}
