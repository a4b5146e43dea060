//! User data per AMI family: the AL2 bootstrap.sh script, the AL2023 nodeadm NodeConfig, the
//! Bottlerocket TOML settings, the Windows bootstrap, each merged with the class's userData.

use std::collections::BTreeMap;

use super::ami_family::AmiFamily;

/// A taint to register the node with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeTaint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// What the rendered user data needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootstrapInputs {
    pub cluster_name: String,
    pub cluster_endpoint: String,
    pub cluster_ca_bundle: String,
    pub cluster_dns_ip: String,
    pub cluster_cidr: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<NodeTaint>,
    pub max_pods: Option<i64>,
    /// The class's userData, merged in.
    pub custom: Option<String>,
}

const BOUNDARY: &str = "//";

fn labels_arg(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn taints_arg(taints: &[NodeTaint]) -> String {
    taints
        .iter()
        .map(|t| format!("{}={}:{}", t.key, t.value, t.effect))
        .collect::<Vec<_>>()
        .join(",")
}

fn mime(parts: &[(&str, String)]) -> String {
    let mut out =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for (content_type, body) in parts {
        out.push_str(&format!(
            "--{BOUNDARY}\nContent-Type: {content_type}\n\n{body}\n"
        ));
    }
    out.push_str(&format!("--{BOUNDARY}--\n"));
    out
}

/// Extracts the parts of a MIME multipart document (content type, body); a document that is not
/// MIME is one shell-script part.
fn custom_parts(custom: &str) -> Vec<(String, String)> {
    if !custom.starts_with("MIME-Version:") {
        let content_type = if custom.trim_start().starts_with("apiVersion: node.eks.aws/") {
            "application/node.eks.aws"
        } else {
            "text/x-shellscript; charset=\"us-ascii\""
        };
        return vec![(content_type.to_string(), custom.trim_end().to_string())];
    }
    let boundary = custom
        .lines()
        .find_map(|l| l.split("boundary=").nth(1))
        .map(|b| b.trim().trim_matches('"').to_string())
        .unwrap_or_else(|| BOUNDARY.to_string());
    let delimiter = format!("--{boundary}");
    custom
        .split(&delimiter)
        .skip(1)
        .filter(|p| !p.starts_with("--"))
        .filter_map(|p| {
            let p = p.trim_start_matches('\n');
            let (headers, body) = p.split_once("\n\n")?;
            let ct = headers
                .lines()
                .find_map(|l| l.strip_prefix("Content-Type:"))
                .map(|c| c.trim().to_string())
                .unwrap_or_else(|| "text/x-shellscript".to_string());
            Some((ct, body.trim_end().to_string()))
        })
        .collect()
}

fn merged_mime(custom: Option<&str>, ours: (&str, String)) -> String {
    let mut parts: Vec<(String, String)> = custom.map(custom_parts).unwrap_or_default();
    parts.push((ours.0.to_string(), ours.1));
    let borrowed: Vec<(&str, String)> =
        parts.iter().map(|(c, b)| (c.as_str(), b.clone())).collect();
    mime(&borrowed)
}

fn al2(i: &BootstrapInputs) -> String {
    let mut kubelet_args = format!("--node-labels=\"{}\"", labels_arg(&i.labels));
    if !i.taints.is_empty() {
        kubelet_args.push_str(&format!(
            " --register-with-taints=\"{}\"",
            taints_arg(&i.taints)
        ));
    }
    let mut script = format!(
        "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}' --b64-cluster-ca '{}' \\\n--dns-cluster-ip '{}' \\\n",
        i.cluster_name, i.cluster_endpoint, i.cluster_ca_bundle, i.cluster_dns_ip
    );
    if let Some(mp) = i.max_pods {
        script.push_str("--use-max-pods false \\\n");
        kubelet_args.push_str(&format!(" --max-pods={mp}"));
    }
    script.push_str(&format!("--kubelet-extra-args '{kubelet_args}'"));
    merged_mime(
        i.custom.as_deref(),
        ("text/x-shellscript; charset=\"us-ascii\"", script),
    )
}

fn al2023(i: &BootstrapInputs) -> String {
    let mut flags = vec![format!("--node-labels={}", labels_arg(&i.labels))];
    if !i.taints.is_empty() {
        flags.push(format!("--register-with-taints={}", taints_arg(&i.taints)));
    }
    let mut doc = format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: {}\n    apiServerEndpoint: {}\n    certificateAuthority: {}\n    cidr: {}\n  kubelet:\n    config:\n      clusterDNS:\n      - {}\n",
        i.cluster_name, i.cluster_endpoint, i.cluster_ca_bundle, i.cluster_cidr, i.cluster_dns_ip
    );
    if let Some(mp) = i.max_pods {
        doc.push_str(&format!("      maxPods: {mp}\n"));
    }
    doc.push_str("    flags:\n");
    for f in flags {
        doc.push_str(&format!("    - {f:?}\n"));
    }
    merged_mime(
        i.custom.as_deref(),
        ("application/node.eks.aws", doc.trim_end().to_string()),
    )
}

fn toml_str(s: &str) -> String {
    format!("{s:?}")
}

fn bottlerocket(i: &BootstrapInputs) -> String {
    let mut out = String::new();
    if let Some(custom) = i.custom.as_deref().filter(|c| !c.trim().is_empty()) {
        out.push_str(custom.trim_end());
        out.push_str("\n\n");
    }
    out.push_str(&format!(
        "[settings.kubernetes]\napi-server = {}\ncluster-certificate = {}\ncluster-name = {}\ncluster-dns-ip = {}\n",
        toml_str(&i.cluster_endpoint),
        toml_str(&i.cluster_ca_bundle),
        toml_str(&i.cluster_name),
        toml_str(&i.cluster_dns_ip)
    ));
    if let Some(mp) = i.max_pods {
        out.push_str(&format!("max-pods = {mp}\n"));
    }
    out.push_str("\n[settings.kubernetes.node-labels]\n");
    for (k, v) in &i.labels {
        out.push_str(&format!("{} = {}\n", toml_str(k), toml_str(v)));
    }
    if !i.taints.is_empty() {
        out.push_str("\n[settings.kubernetes.node-taints]\n");
        let mut by_key: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for t in &i.taints {
            by_key
                .entry(&t.key)
                .or_default()
                .push(toml_str(&format!("{}:{}", t.value, t.effect)));
        }
        for (k, vs) in by_key {
            out.push_str(&format!("{} = [{}]\n", toml_str(k), vs.join(", ")));
        }
    }
    out
}

fn windows(i: &BootstrapInputs) -> String {
    let mut kubelet_args = format!("--node-labels=\"{}\"", labels_arg(&i.labels));
    if !i.taints.is_empty() {
        kubelet_args.push_str(&format!(
            " --register-with-taints=\"{}\"",
            taints_arg(&i.taints)
        ));
    }
    let custom = i
        .custom
        .as_deref()
        .map(|c| format!("{}\n", c.trim_end()))
        .unwrap_or_default();
    format!(
        "<powershell>\n{custom}[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n& $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{}' -Base64ClusterCA '{}' -DNSClusterIP '{}' -KubeletExtraArgs '{}'\n</powershell>",
        i.cluster_name, i.cluster_endpoint, i.cluster_ca_bundle, i.cluster_dns_ip, kubelet_args
    )
}

/// The user data for a node of `family`.
pub fn render_user_data(family: AmiFamily, inputs: &BootstrapInputs) -> String {
    match family {
        AmiFamily::Al2 => al2(inputs),
        AmiFamily::Al2023 => al2023(inputs),
        AmiFamily::Bottlerocket => bottlerocket(inputs),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => windows(inputs),
        AmiFamily::Custom => inputs.custom.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> BootstrapInputs {
        BootstrapInputs {
            cluster_name: "demo".to_string(),
            cluster_endpoint: "https://demo.example".to_string(),
            cluster_ca_bundle: "Q0E=".to_string(),
            cluster_dns_ip: "10.100.0.10".to_string(),
            cluster_cidr: "10.100.0.0/16".to_string(),
            labels: BTreeMap::from([("karpenter.sh/nodepool".to_string(), "default".to_string())]),
            taints: vec![NodeTaint {
                key: "karpenter.sh/unregistered".to_string(),
                value: String::new(),
                effect: "NoExecute".to_string(),
            }],
            max_pods: None,
            custom: Some("echo hello".to_string()),
        }
    }

    #[test]
    fn al2_is_mime_with_custom_part_first() {
        let ud = render_user_data(AmiFamily::Al2, &inputs());
        let hello = ud.find("echo hello").unwrap();
        let boot = ud.find("/etc/eks/bootstrap.sh 'demo'").unwrap();
        assert!(hello < boot);
        assert!(ud.contains("--node-labels=\"karpenter.sh/nodepool=default\""));
        assert!(ud.contains("karpenter.sh/unregistered=:NoExecute"));
    }

    #[test]
    fn al2023_nodeconfig_and_custom_mime_parts_merge() {
        let mut i = inputs();
        i.custom = Some(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUND\"\n\n--BOUND\nContent-Type: text/x-shellscript\n\necho custom\n--BOUND--\n"
                .to_string(),
        );
        let ud = render_user_data(AmiFamily::Al2023, &i);
        assert!(ud.contains("kind: NodeConfig"));
        assert!(ud.contains("echo custom"));
        assert!(ud.contains("Content-Type: application/node.eks.aws"));
        assert_eq!(ud.matches("--//\n").count(), 2);
    }

    #[test]
    fn bottlerocket_toml() {
        let ud = render_user_data(AmiFamily::Bottlerocket, &inputs());
        assert!(ud.starts_with("echo hello"));
        assert!(ud.contains(
            "[settings.kubernetes.node-labels]\n\"karpenter.sh/nodepool\" = \"default\""
        ));
        assert!(ud.contains("\"karpenter.sh/unregistered\" = [\":NoExecute\"]"));
    }
}
