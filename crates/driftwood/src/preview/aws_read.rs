//! What the change selects, resolved through AWS itself with read-only calls: the provider's
//! own resolution of each changed EC2NodeClass's AMI, subnet and security-group terms runs
//! against ports that pass Describe/Get calls through and refuse every other, and what AWS
//! answered (images, subnets, groups, SSM parameters) is put into the copy with its ids.

use driftwood_api::EC2NodeClass;
use driftwood_aws::ami::resolve_amis;
use driftwood_aws::ami_family::AmiFamily;
use driftwood_aws::network::{resolve_security_groups, resolve_subnets};
use driftwood_aws::ports::*;
use driftwood_sim_aws::SimAws;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// What AWS answered while the change was resolved.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    pub images: BTreeMap<String, Image>,
    pub subnets: BTreeMap<String, Subnet>,
    pub security_groups: BTreeMap<String, SecurityGroup>,
    /// SSM parameters read, name → value.
    pub parameters: BTreeMap<String, String>,
    /// Terms that resolved nothing, per class.
    pub unmatched: Vec<String>,
    /// The calls made, by operation.
    pub calls: BTreeMap<String, u64>,
}

/// The error every call but a Describe/Get gets.
pub const REFUSED: &str = "DriftwoodPreviewReadOnly";

/// EC2 and SSM ports that record what they answer and refuse any call that is not a read.
#[derive(Clone)]
pub struct ReadOnly {
    ec2: Arc<dyn Ec2Api>,
    ssm: Arc<dyn SsmApi>,
    answers: Arc<Mutex<Answers>>,
}

impl ReadOnly {
    /// Wraps `ports`.
    pub fn new(ports: &driftwood_aws::AwsPorts) -> Self {
        Self {
            ec2: Arc::clone(&ports.ec2),
            ssm: Arc::clone(&ports.ssm),
            answers: Arc::default(),
        }
    }

    fn record(&self, f: impl FnOnce(&mut Answers)) {
        f(&mut self.answers.lock().unwrap_or_else(PoisonError::into_inner));
    }

    fn count(&self, operation: &str) {
        self.record(|a| *a.calls.entry(operation.to_string()).or_default() += 1);
    }

    /// What was answered so far.
    pub fn answers(&self) -> Answers {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn refused<T>(operation: &str) -> Result<T, AwsError> {
    Err(AwsError::new(
        REFUSED,
        format!("{operation} is not a read: driftwood preview makes no write to the cloud"),
    ))
}

#[async_trait::async_trait]
impl Ec2Api for ReadOnly {
    async fn describe_images(&self, input: DescribeImagesInput) -> Result<Vec<Image>, AwsError> {
        self.count("DescribeImages");
        let images = self.ec2.describe_images(input).await?;
        self.record(|a| {
            for i in &images {
                a.images.insert(i.image_id.clone(), i.clone());
            }
        });
        Ok(images)
    }

    async fn describe_subnets(&self, input: DescribeSubnetsInput) -> Result<Vec<Subnet>, AwsError> {
        self.count("DescribeSubnets");
        let subnets = self.ec2.describe_subnets(input).await?;
        self.record(|a| {
            for s in &subnets {
                a.subnets.insert(s.subnet_id.clone(), s.clone());
            }
        });
        Ok(subnets)
    }

    async fn describe_security_groups(
        &self,
        input: DescribeSecurityGroupsInput,
    ) -> Result<Vec<SecurityGroup>, AwsError> {
        self.count("DescribeSecurityGroups");
        let groups = self.ec2.describe_security_groups(input).await?;
        self.record(|a| {
            for g in &groups {
                a.security_groups.insert(g.group_id.clone(), g.clone());
            }
        });
        Ok(groups)
    }

    async fn describe_instance_types(
        &self,
        input: DescribeInstanceTypesInput,
    ) -> Result<Vec<InstanceTypeDescription>, AwsError> {
        self.count("DescribeInstanceTypes");
        self.ec2.describe_instance_types(input).await
    }

    async fn describe_instance_type_offerings(
        &self,
        input: DescribeInstanceTypeOfferingsInput,
    ) -> Result<Vec<InstanceTypeOffering>, AwsError> {
        self.count("DescribeInstanceTypeOfferings");
        self.ec2.describe_instance_type_offerings(input).await
    }

    async fn describe_spot_price_history(
        &self,
        input: DescribeSpotPriceHistoryInput,
    ) -> Result<Vec<SpotPrice>, AwsError> {
        self.count("DescribeSpotPriceHistory");
        self.ec2.describe_spot_price_history(input).await
    }

    async fn create_launch_template(
        &self,
        _input: CreateLaunchTemplateInput,
    ) -> Result<LaunchTemplate, AwsError> {
        refused("CreateLaunchTemplate")
    }

    async fn describe_launch_templates(
        &self,
        input: DescribeLaunchTemplatesInput,
    ) -> Result<Vec<LaunchTemplate>, AwsError> {
        self.count("DescribeLaunchTemplates");
        self.ec2.describe_launch_templates(input).await
    }

    async fn delete_launch_template(&self, _launch_template_name: &str) -> Result<(), AwsError> {
        refused("DeleteLaunchTemplate")
    }

    async fn create_fleet(&self, _input: CreateFleetInput) -> Result<CreateFleetOutput, AwsError> {
        refused("CreateFleet")
    }

    async fn describe_instances(
        &self,
        input: DescribeInstancesInput,
    ) -> Result<Vec<Instance>, AwsError> {
        self.count("DescribeInstances");
        self.ec2.describe_instances(input).await
    }

    async fn terminate_instances(
        &self,
        _instance_ids: Vec<String>,
    ) -> Result<Vec<InstanceStateChange>, AwsError> {
        refused("TerminateInstances")
    }

    async fn create_tags(&self, _input: CreateTagsInput) -> Result<(), AwsError> {
        refused("CreateTags")
    }

    async fn describe_instance_status(
        &self,
        input: DescribeInstanceStatusInput,
    ) -> Result<Vec<InstanceStatus>, AwsError> {
        self.count("DescribeInstanceStatus");
        self.ec2.describe_instance_status(input).await
    }
}

#[async_trait::async_trait]
impl SsmApi for ReadOnly {
    async fn get_parameter(&self, input: GetParameterInput) -> Result<Parameter, AwsError> {
        self.count("GetParameter");
        let parameter = self.ssm.get_parameter(input).await?;
        self.record(|a| {
            a.parameters
                .insert(parameter.name.clone(), parameter.value.clone());
        });
        Ok(parameter)
    }
}

/// Resolves each changed class's terms through `ports` (read-only) as the provider does.
pub async fn resolve(
    ports: &driftwood_aws::AwsPorts,
    classes: &[EC2NodeClass],
    kubernetes_version: &str,
    now: jiff::Timestamp,
) -> Result<Answers, AwsError> {
    let read = ReadOnly::new(ports);
    let mut unmatched = Vec::new();
    for class in classes {
        let name = class.metadata.name.clone().unwrap_or_default();
        let spec = &class.spec;
        let family = spec.ami_family.as_deref().and_then(AmiFamily::from_spec);
        let amis = resolve_amis(
            &read,
            &read,
            &spec.ami_selector_terms,
            family,
            kubernetes_version,
            now,
        )
        .await?;
        for term in amis.unmatched {
            unmatched.push(format!(
                "EC2NodeClass {name} spec.amiSelectorTerms[{}]: {}",
                term.index, term.detail
            ));
        }
        let subnets = resolve_subnets(&read, &spec.subnet_selector_terms).await?;
        for index in subnets.unmatched {
            unmatched.push(format!(
                "EC2NodeClass {name} spec.subnetSelectorTerms[{index}] matched no subnet"
            ));
        }
        let groups = resolve_security_groups(&read, &spec.security_group_selector_terms).await?;
        for index in groups.unmatched {
            unmatched.push(format!(
                "EC2NodeClass {name} spec.securityGroupSelectorTerms[{index}] matched no security group"
            ));
        }
    }
    let mut answers = read.answers();
    answers.unmatched = unmatched;
    Ok(answers)
}

/// Puts what AWS answered into the copy's account (ids kept); returns what the report says.
pub fn import(aws: &SimAws, answers: &Answers, kubernetes_version: &str) -> Vec<String> {
    for image in answers.images.values() {
        aws.import_image(image.clone(), Some(kubernetes_version.to_string()));
    }
    for subnet in answers.subnets.values() {
        aws.import_subnet(subnet.clone());
    }
    for group in answers.security_groups.values() {
        aws.import_security_group(group.clone());
    }
    for (name, value) in &answers.parameters {
        aws.put_parameter(name, value);
    }
    let calls: Vec<String> = answers
        .calls
        .iter()
        .map(|(op, n)| format!("{op} ×{n}"))
        .collect();
    let mut notes = vec![format!(
        "what the change selects was resolved through AWS (read-only: {}): {} images, {} subnets, {} security groups, {} SSM parameters",
        calls.join(", "),
        answers.images.len(),
        answers.subnets.len(),
        answers.security_groups.len(),
        answers.parameters.len()
    )];
    notes.extend(answers.unmatched.iter().cloned());
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use driftwood_sim_aws::SimConfig;

    fn account() -> Arc<SimAws> {
        let clock = Arc::new(driftwood_cloud::ManualClock::new(
            driftwood_sim_aws::default_start_time(),
        ));
        Arc::new(SimAws::new(
            SimConfig::new("live", 3).without_realism(),
            clock,
        ))
    }

    #[tokio::test]
    async fn writes_are_refused_and_reads_pass_through() {
        let live = account();
        let read = ReadOnly::new(&driftwood_sim_aws::sim_ports(&live));
        let error = read
            .create_fleet(CreateFleetInput::default())
            .await
            .expect_err("refused");
        assert_eq!(error.code, REFUSED);
        assert!(read.terminate_instances(vec!["i-1".into()]).await.is_err());
        assert!(read.create_tags(CreateTagsInput::default()).await.is_err());
        let subnets = read
            .describe_subnets(DescribeSubnetsInput::default())
            .await
            .unwrap();
        assert!(!subnets.is_empty());
        assert_eq!(read.answers().subnets.len(), subnets.len());
        assert_eq!(live.fleet_calls(), 0);
    }

    #[tokio::test]
    async fn an_alias_resolved_through_aws_resolves_the_same_in_the_copy() {
        let live = account();
        let class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "role": "r",
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "live"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "live"}}],
            },
        }))
        .unwrap();
        let now = live.now();
        let answers = resolve(&driftwood_sim_aws::sim_ports(&live), &[class], "1.30", now)
            .await
            .unwrap();
        assert!(answers.unmatched.is_empty(), "{:?}", answers.unmatched);
        assert!(
            answers
                .calls
                .keys()
                .all(|op| op.starts_with("Describe") || op.starts_with("Get"))
        );
        // Another account (another seed: other ids) given what AWS answered.
        let clock = Arc::new(driftwood_cloud::ManualClock::new(now));
        let copy = SimAws::new(SimConfig::new("copy", 99).without_realism(), clock);
        copy.forget_network();
        let notes = import(&copy, &answers, "1.30");
        assert!(notes[0].contains("read-only"), "{notes:?}");
        assert_eq!(
            copy.eks_ami("al2023", "latest", "1.30", "amd64"),
            live.eks_ami("al2023", "latest", "1.30", "amd64")
        );
        assert_eq!(copy.subnets().len(), answers.subnets.len());
    }
}
