//! Pod-template hashing: the `pod-template-hash` label that names a Deployment's ReplicaSets.

use k8s_openapi::api::core::v1::PodTemplateSpec;

const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// FNV-1a over the template's canonical JSON (serde_json maps are sorted), rendered in the
/// consonant-and-digit alphabet Kubernetes uses for generated names.
pub fn template_hash(template: &PodTemplateSpec) -> String {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    let canonical = serde_json::to_vec(&template).unwrap_or_default();
    let mut hash: u32 = 0x811c_9dc5;
    for byte in canonical {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let mut value = u64::from(hash);
    let mut text = String::new();
    loop {
        let index = usize::try_from(value % ALPHABET.len() as u64).unwrap_or(0);
        text.push(char::from(ALPHABET[index]));
        value /= ALPHABET.len() as u64;
        if value == 0 {
            break;
        }
    }
    text
}

/// The label carrying the template hash.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": image}]}
        }))
        .unwrap()
    }

    #[test]
    fn hash_is_stable_ignores_its_own_label_and_tracks_changes() {
        let a = template_hash(&template("nginx:1"));
        assert_eq!(a, template_hash(&template("nginx:1")));
        let mut labelled = template("nginx:1");
        labelled
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(POD_TEMPLATE_HASH.into(), a.clone());
        assert_eq!(a, template_hash(&labelled));
        assert_ne!(a, template_hash(&template("nginx:2")));
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)));
    }
}
