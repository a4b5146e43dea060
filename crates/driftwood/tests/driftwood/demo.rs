//! `driftwood demo` (preview): the bundled walkthrough manifests are checked and pass.

use super::{driftwood, stdout};

#[test]
fn preview_checks_the_bundled_walkthrough() {
    let output = driftwood(&["demo"], None);
    let text = stdout(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("EC2NodeClass \"latest-current-ami\" (update-nodes-with-drift/latest-current-ami.yaml): ok"), "{text}");
    assert!(
        text.contains(
            "NodePool \"latest-current-ami\" (update-nodes-with-drift/latest-current-ami.yaml): ok"
        ),
        "{text}"
    );
}
