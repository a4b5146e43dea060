//! The simulated EC2 API: describe calls with filters, launch templates, CreateFleet (instant,
//! cheapest override first, refusing offerings without capacity), instances (described only
//! once visible: eventual consistency) and tags. Every call goes through the gate (counters,
//! latency, faults, rate limits) first.

use async_trait::async_trait;
use driftwood_aws::ports::{
    AwsError, CreateFleetError, CreateFleetInput, CreateFleetInstance, CreateFleetOutput,
    CreateLaunchTemplateInput, CreateTagsInput, DescribeImagesInput, DescribeInstanceStatusInput,
    DescribeInstanceTypeOfferingsInput, DescribeInstanceTypesInput, DescribeInstancesInput,
    DescribeLaunchTemplatesInput, DescribeSecurityGroupsInput, DescribeSpotPriceHistoryInput,
    DescribeSubnetsInput, Ec2Api, Filter, FleetOverrideRef, GroupIdentifier, Image, Instance,
    InstanceStateChange, InstanceStatus, InstanceStatusEvent, InstanceTypeDescription,
    InstanceTypeOffering, LaunchTemplate, SecurityGroup, SpotPrice, StatusCheck, StatusCheckDetail,
    Subnet, Tag, codes,
};
use driftwood_cloud::OfferingKey;
use jiff::Timestamp;

use crate::filter::{filters_match, tag_values};
use crate::gate::Call;
use crate::ids::resource_id;
use crate::instance_catalog::spot_price;
use crate::state::{SimAws, SimInstance};

fn one(v: &str) -> Option<Vec<String>> {
    Some(vec![v.to_string()])
}

fn image_values(img: &Image, name: &str) -> Option<Vec<String>> {
    match name {
        "image-id" => one(&img.image_id),
        "name" => one(&img.name),
        "owner-id" => one(&img.owner_id),
        "owner-alias" => img
            .image_owner_alias
            .as_deref()
            .map(|a| vec![a.to_string()])
            .or(Some(Vec::new())),
        "architecture" => one(&img.architecture),
        "state" => one(&img.state),
        "description" => one(&img.description),
        other => tag_values(&img.tags, other),
    }
}

fn subnet_values(s: &Subnet, name: &str) -> Option<Vec<String>> {
    match name {
        "subnet-id" => one(&s.subnet_id),
        "vpc-id" => one(&s.vpc_id),
        "availability-zone" => one(&s.availability_zone),
        "availability-zone-id" => one(&s.availability_zone_id),
        "cidr-block" => one(&s.cidr_block),
        other => tag_values(&s.tags, other),
    }
}

fn group_values(g: &SecurityGroup, name: &str) -> Option<Vec<String>> {
    match name {
        "group-id" => one(&g.group_id),
        "group-name" => one(&g.group_name),
        "vpc-id" => one(&g.vpc_id),
        other => tag_values(&g.tags, other),
    }
}

fn instance_values(i: &Instance, name: &str) -> Option<Vec<String>> {
    match name {
        "instance-id" => one(&i.instance_id),
        "instance-type" => one(&i.instance_type),
        "instance-state-name" => one(&i.state),
        "availability-zone" => one(&i.availability_zone),
        "subnet-id" => one(&i.subnet_id),
        "image-id" => one(&i.image_id),
        "instance-lifecycle" => Some(i.instance_lifecycle.iter().cloned().collect()),
        other => tag_values(&i.tags, other),
    }
}

/// The instance ids an `instance-id` filter names, when every value is an id (no wildcard):
/// only those instances can match.
fn named_by_filter(filters: &[Filter]) -> Option<Vec<&String>> {
    let filter = filters.iter().find(|f| f.name == "instance-id")?;
    filter
        .values
        .iter()
        .all(|v| !v.contains(['*', '?']))
        .then(|| filter.values.iter().collect())
}

fn type_values(t: &InstanceTypeDescription, name: &str) -> Option<Vec<String>> {
    match name {
        "instance-type" => one(&t.instance_type),
        "processor-info.supported-architecture" => Some(t.supported_architectures.clone()),
        "current-generation" => one(&t.current_generation.to_string()),
        _ => None,
    }
}

fn not_found(code: &str, what: &str, id: &str) -> AwsError {
    AwsError::new(code, format!("The {what} '{id}' does not exist"))
}

fn merge_tags(tags: &mut Vec<Tag>, new: &[Tag]) {
    for t in new {
        match tags.iter_mut().find(|x| x.key == t.key) {
            Some(x) => x.value = t.value.clone(),
            None => tags.push(t.clone()),
        }
    }
}

impl SimAws {
    fn on_demand_price(&self, instance_type: &str) -> Option<f64> {
        self.lock()
            .instance_types
            .get(instance_type)
            .map(|e| e.on_demand_price)
    }

    fn offered_in(&self, instance_type: &str, zone: &str) -> bool {
        let index = self.config.zones.iter().position(|z| z == zone);
        let st = self.lock();
        let entry = st.instance_types.get(instance_type);
        match (entry, index) {
            (Some(e), Some(i)) => !e.missing_zones.contains(&i),
            _ => false,
        }
    }

    fn price_of(&self, instance_type: &str, zone: &str, capacity_type: &str) -> Option<f64> {
        let od = self.on_demand_price(instance_type)?;
        Some(if capacity_type == "spot" {
            spot_price(self.config.seed, instance_type, zone, od)
        } else {
            od
        })
    }
}

/// Usable addresses of a simulated subnet (a /19 less AWS's five reserved ones).
const SUBNET_ADDRESSES: u64 = 8187;

#[async_trait]
impl Ec2Api for SimAws {
    async fn describe_images(&self, input: DescribeImagesInput) -> Result<Vec<Image>, AwsError> {
        self.enter(Call::new("DescribeImages")).await?;
        self.publish_due_releases();
        let now = self.now();
        let st = self.lock();
        for id in &input.image_ids {
            if !st.images.contains_key(id) {
                return Err(AwsError::new(
                    codes::AMI_ID_NOT_FOUND,
                    format!("The image id '[{id}]' does not exist"),
                ));
            }
        }
        let deprecated = |img: &Image| {
            img.deprecation_time
                .as_deref()
                .and_then(|t| t.parse::<Timestamp>().ok())
                .is_some_and(|t| t <= now)
        };
        Ok(SimAws::image_candidates(&st, &input.filters)
            .into_iter()
            .map(|s| &s.image)
            .filter(|img| input.image_ids.is_empty() || input.image_ids.contains(&img.image_id))
            .filter(|img| {
                input.owners.is_empty() || input.owners.iter().any(|o| self.owner_matches(o, img))
            })
            .filter(|img| {
                input.include_deprecated || !input.image_ids.is_empty() || !deprecated(img)
            })
            .filter(|img| filters_match(&input.filters, |n| image_values(img, n)))
            .cloned()
            .collect())
    }

    async fn describe_subnets(&self, input: DescribeSubnetsInput) -> Result<Vec<Subnet>, AwsError> {
        self.enter(Call::new("DescribeSubnets")).await?;
        let st = self.lock();
        for id in &input.subnet_ids {
            if !st.subnets.contains_key(id) {
                return Err(not_found(codes::SUBNET_ID_NOT_FOUND, "subnet ID", id));
            }
        }
        Ok(st
            .subnets
            .values()
            .filter(|s| input.subnet_ids.is_empty() || input.subnet_ids.contains(&s.subnet_id))
            .filter(|s| filters_match(&input.filters, |n| subnet_values(s, n)))
            .cloned()
            .collect())
    }

    async fn describe_security_groups(
        &self,
        input: DescribeSecurityGroupsInput,
    ) -> Result<Vec<SecurityGroup>, AwsError> {
        self.enter(Call::new("DescribeSecurityGroups").unfiltered(input.filters.is_empty()))
            .await?;
        let st = self.lock();
        for id in &input.group_ids {
            if !st.security_groups.contains_key(id) {
                return Err(not_found(codes::GROUP_ID_NOT_FOUND, "security group", id));
            }
        }
        Ok(st
            .security_groups
            .values()
            .filter(|g| input.group_ids.is_empty() || input.group_ids.contains(&g.group_id))
            .filter(|g| filters_match(&input.filters, |n| group_values(g, n)))
            .cloned()
            .collect())
    }

    async fn describe_instance_types(
        &self,
        input: DescribeInstanceTypesInput,
    ) -> Result<Vec<InstanceTypeDescription>, AwsError> {
        self.enter(Call::new("DescribeInstanceTypes")).await?;
        let st = self.lock();
        for name in &input.instance_types {
            if !st.instance_types.contains_key(name) {
                return Err(AwsError::new(
                    codes::INVALID_PARAMETER_VALUE,
                    format!("The following supplied instance types do not exist: [{name}]"),
                ));
            }
        }
        Ok(st
            .instance_types
            .values()
            .map(|e| &e.description)
            .filter(|d| {
                input.instance_types.is_empty() || input.instance_types.contains(&d.instance_type)
            })
            .filter(|d| filters_match(&input.filters, |n| type_values(d, n)))
            .cloned()
            .collect())
    }

    async fn describe_instance_type_offerings(
        &self,
        input: DescribeInstanceTypeOfferingsInput,
    ) -> Result<Vec<InstanceTypeOffering>, AwsError> {
        self.enter(Call::new("DescribeInstanceTypeOfferings"))
            .await?;
        let location_type = if input.location_type.is_empty() {
            "region"
        } else {
            input.location_type.as_str()
        };
        let st = self.lock();
        let mut out = Vec::new();
        for e in st.instance_types.values() {
            let name = &e.description.instance_type;
            let locations: Vec<String> = match location_type {
                "region" => vec![self.config.region.clone()],
                "availability-zone" => self
                    .config
                    .zones
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !e.missing_zones.contains(i))
                    .map(|(_, z)| z.clone())
                    .collect(),
                "availability-zone-id" => (0..self.config.zones.len())
                    .filter(|i| !e.missing_zones.contains(i))
                    .map(|i| crate::network::zone_id(&self.config.region, i))
                    .collect(),
                other => {
                    return Err(AwsError::new(
                        codes::INVALID_PARAMETER_VALUE,
                        format!(
                            "LocationType {other:?} is not region, availability-zone or availability-zone-id"
                        ),
                    ));
                }
            };
            for location in locations {
                let offering = InstanceTypeOffering {
                    instance_type: name.clone(),
                    location_type: location_type.to_string(),
                    location,
                };
                let values = |n: &str| match n {
                    "instance-type" => one(&offering.instance_type),
                    "location" => one(&offering.location),
                    _ => None,
                };
                if filters_match(&input.filters, values) {
                    out.push(offering);
                }
            }
        }
        Ok(out)
    }

    async fn describe_spot_price_history(
        &self,
        input: DescribeSpotPriceHistoryInput,
    ) -> Result<Vec<SpotPrice>, AwsError> {
        self.enter(Call::new("DescribeSpotPriceHistory")).await?;
        let now = self.now();
        let st = self.lock();
        let mut out = Vec::new();
        for e in st.instance_types.values() {
            let name = &e.description.instance_type;
            if !input.instance_types.is_empty() && !input.instance_types.contains(name) {
                continue;
            }
            for (i, zone) in self.config.zones.iter().enumerate() {
                if e.missing_zones.contains(&i)
                    || input.availability_zone.as_ref().is_some_and(|z| z != zone)
                {
                    continue;
                }
                out.push(SpotPrice {
                    instance_type: name.clone(),
                    availability_zone: zone.clone(),
                    product_description: "Linux/UNIX".to_string(),
                    spot_price: format!(
                        "{:.6}",
                        spot_price(self.config.seed, name, zone, e.on_demand_price)
                    ),
                    timestamp: now,
                });
            }
        }
        Ok(out)
    }

    async fn create_launch_template(
        &self,
        input: CreateLaunchTemplateInput,
    ) -> Result<LaunchTemplate, AwsError> {
        self.enter(Call::new("CreateLaunchTemplate")).await?;
        let now = self.now();
        let mut st = self.lock();
        if st
            .launch_templates
            .contains_key(&input.launch_template_name)
        {
            return Err(AwsError::new(
                codes::LAUNCH_TEMPLATE_NAME_ALREADY_EXISTS,
                format!(
                    "Launch template name already in use: {}",
                    input.launch_template_name
                ),
            ));
        }
        if !st.images.contains_key(&input.launch_template_data.image_id) {
            return Err(AwsError::new(
                codes::AMI_ID_NOT_FOUND,
                format!(
                    "The image id '[{}]' does not exist",
                    input.launch_template_data.image_id
                ),
            ));
        }
        let lt = LaunchTemplate {
            launch_template_id: resource_id("lt", self.config.seed, &input.launch_template_name),
            launch_template_name: input.launch_template_name.clone(),
            create_time: now,
            tags: input
                .tag_specifications
                .iter()
                .flat_map(|t| t.tags.clone())
                .collect(),
            data: input.launch_template_data,
        };
        st.launch_templates
            .insert(lt.launch_template_name.clone(), lt.clone());
        Ok(lt)
    }

    async fn describe_launch_templates(
        &self,
        input: DescribeLaunchTemplatesInput,
    ) -> Result<Vec<LaunchTemplate>, AwsError> {
        self.enter(Call::new("DescribeLaunchTemplates")).await?;
        let st = self.lock();
        for name in &input.launch_template_names {
            if !st.launch_templates.contains_key(name) {
                return Err(AwsError::new(
                    codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND,
                    format!(
                        "At least one of the launch templates specified in the request does not exist. ({name})"
                    ),
                ));
            }
        }
        Ok(st
            .launch_templates
            .values()
            .filter(|lt| {
                input.launch_template_names.is_empty()
                    || input
                        .launch_template_names
                        .contains(&lt.launch_template_name)
            })
            .filter(|lt| {
                filters_match(&input.filters, |n| match n {
                    "launch-template-name" => one(&lt.launch_template_name),
                    other => tag_values(&lt.tags, other),
                })
            })
            .cloned()
            .collect())
    }

    async fn delete_launch_template(&self, launch_template_name: &str) -> Result<(), AwsError> {
        self.enter(Call::new("DeleteLaunchTemplate")).await?;
        match self.lock().launch_templates.remove(launch_template_name) {
            Some(_) => Ok(()),
            None => Err(AwsError::new(
                codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND,
                format!(
                    "The specified launch template, with template name {launch_template_name}, does not exist."
                ),
            )),
        }
    }

    async fn create_fleet(&self, input: CreateFleetInput) -> Result<CreateFleetOutput, AwsError> {
        let requested = usize::try_from(input.total_target_capacity).unwrap_or(0);
        self.enter(Call::new("CreateFleet").resources(requested))
            .await?;
        if input.type_ != "instant" {
            return Err(AwsError::new(
                codes::INVALID_PARAMETER_VALUE,
                "only instant fleets are simulated",
            ));
        }
        let now = self.now();
        let capacity_type = input.default_target_capacity_type.clone();
        self.lock().fleet_calls += 1;
        let mut errors = Vec::new();
        // Candidate overrides, cheapest first (price-capacity-optimized and lowest-price both
        // start from the cheapest pool in the simulation).
        let mut candidates = Vec::new();
        for cfg in &input.launch_template_configs {
            let lt = self
                .lock()
                .launch_templates
                .get(&cfg.launch_template_name)
                .cloned();
            let Some(lt) = lt else {
                for o in &cfg.overrides {
                    errors.push(CreateFleetError {
                        error_code: codes::LAUNCH_TEMPLATE_NAME_NOT_FOUND.to_string(),
                        error_message: format!(
                            "launch template {} does not exist",
                            cfg.launch_template_name
                        ),
                        lifecycle: capacity_type.clone(),
                        launch_template_and_overrides: FleetOverrideRef {
                            instance_type: o.instance_type.clone(),
                            availability_zone: o.availability_zone.clone(),
                            subnet_id: o.subnet_id.clone(),
                        },
                    });
                }
                continue;
            };
            for o in &cfg.overrides {
                let price = self.price_of(&o.instance_type, &o.availability_zone, &capacity_type);
                candidates.push((price.unwrap_or(f64::MAX), o.clone(), lt.clone()));
            }
        }
        candidates.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| a.1.instance_type.cmp(&b.1.instance_type))
                .then_with(|| a.1.availability_zone.cmp(&b.1.availability_zone))
        });
        let mut instances = Vec::new();
        let mut remaining = input.total_target_capacity.max(0);
        // A partial failure (a fault): the cheapest offerings report no capacity this once and
        // the fleet falls through to the next ones.
        let mut refused = {
            let mut st = self.lock();
            let partial = st.faults.partial_fleet_failures > 0;
            st.faults.partial_fleet_failures = st.faults.partial_fleet_failures.saturating_sub(1);
            if partial { candidates.len() / 2 } else { 0 }
        };
        for (_, o, lt) in candidates {
            if remaining == 0 {
                break;
            }
            let override_ref = FleetOverrideRef {
                instance_type: o.instance_type.clone(),
                availability_zone: o.availability_zone.clone(),
                subnet_id: o.subnet_id.clone(),
            };
            let fail = |code: &str, message: String| CreateFleetError {
                error_code: code.to_string(),
                error_message: message,
                lifecycle: capacity_type.clone(),
                launch_template_and_overrides: override_ref.clone(),
            };
            let key = OfferingKey::new(&o.instance_type, &o.availability_zone, &capacity_type);
            let partially_refused = refused > 0;
            refused = refused.saturating_sub(1);
            if partially_refused || self.lock().faults.lacks_capacity(&key) {
                errors.push(fail(
                    codes::INSUFFICIENT_INSTANCE_CAPACITY,
                    format!(
                        "We currently do not have sufficient {} capacity in the Availability Zone you requested ({}).",
                        o.instance_type, o.availability_zone
                    ),
                ));
                continue;
            }
            if !self.offered_in(&o.instance_type, &o.availability_zone) {
                errors.push(fail(
                    "Unsupported",
                    format!(
                        "Your requested instance type ({}) is not supported in {}.",
                        o.instance_type, o.availability_zone
                    ),
                ));
                continue;
            }
            let image_id = o
                .image_id
                .clone()
                .unwrap_or_else(|| lt.data.image_id.clone());
            // The cheapest pool takes as many of the fleet's instances as it can (both
            // allocation strategies prefer it while it has capacity), reported as one entry.
            let mut launched = Vec::new();
            while remaining > 0 {
                match self.launch_instance(
                    &o.instance_type,
                    &o.subnet_id,
                    &image_id,
                    &lt,
                    &input,
                    &capacity_type,
                    now,
                ) {
                    Ok(id) => {
                        remaining -= 1;
                        launched.push(id);
                    }
                    Err(e) => {
                        errors.push(fail(&e.code, e.message));
                        break;
                    }
                }
            }
            if !launched.is_empty() {
                instances.push(CreateFleetInstance {
                    instance_ids: launched,
                    instance_type: o.instance_type.clone(),
                    lifecycle: capacity_type.clone(),
                    launch_template_and_overrides: override_ref,
                });
            }
        }
        let fleet_id = {
            let mut st = self.lock();
            st.counter += 1;
            format!(
                "fleet-{}",
                crate::ids::hex_id(self.config.seed, &format!("fleet/{}", st.counter), 8)
            )
        };
        Ok(CreateFleetOutput {
            fleet_id,
            instances,
            errors,
        })
    }

    async fn describe_instances(
        &self,
        input: DescribeInstancesInput,
    ) -> Result<Vec<Instance>, AwsError> {
        self.enter(Call::new("DescribeInstances").unfiltered(input.filters.is_empty()))
            .await?;
        let now = self.now();
        let st = self.lock();
        // Eventual consistency: an instance launched moments ago is not found yet, by id or by
        // filter, though CreateFleet named it ("Eventual consistency in the Amazon EC2 API").
        for id in &input.instance_ids {
            if st.instances.get(id).is_none_or(|s| !self.described(s, now)) {
                return Err(not_found(codes::INSTANCE_ID_NOT_FOUND, "instance ID", id));
            }
        }
        // Named instances (by id, or by an `instance-id` filter without wildcards) are looked
        // up; anything else is a scan. The filters are matched before an instance is copied.
        let named: Option<Vec<&String>> = if input.instance_ids.is_empty() {
            named_by_filter(&input.filters)
        } else {
            Some(input.instance_ids.iter().collect())
        };
        let candidates: Box<dyn Iterator<Item = &SimInstance>> = match named {
            Some(ids) => Box::new(
                ids.into_iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .filter_map(|id| st.instances.get(id)),
            ),
            None => Box::new(st.instances.values()),
        };
        Ok(candidates
            .filter(|s| self.described(s, now))
            .filter(|s| {
                filters_match(&input.filters, |name| match name {
                    "instance-state-name" => one(self.state_at(s, now)),
                    other => instance_values(&s.instance, other),
                })
            })
            .map(|s| self.observe(s, now))
            .collect())
    }

    async fn terminate_instances(
        &self,
        instance_ids: Vec<String>,
    ) -> Result<Vec<InstanceStateChange>, AwsError> {
        self.enter(Call::new("TerminateInstances").resources(instance_ids.len()))
            .await?;
        let now = self.now();
        let mut st = self.lock();
        for id in &instance_ids {
            if st.instances.get(id).is_none_or(|s| self.vanished(s, now)) {
                return Err(not_found(codes::INSTANCE_ID_NOT_FOUND, "instance ID", id));
            }
        }
        let mut out = Vec::new();
        for id in instance_ids {
            let Some(stored) = st.instances.get(&id).cloned() else {
                continue;
            };
            let previous = self.observe(&stored, now).state;
            if stored.terminated_at.is_none() {
                if let Some(s) = st.instances.get_mut(&id) {
                    s.terminated_at = Some(now);
                }
                st.ips_in_use.remove(&stored.instance.private_ip_address);
                if let Some(subnet) = st.subnets.get_mut(&stored.instance.subnet_id) {
                    subnet.available_ip_address_count += 1;
                }
            }
            let current = st
                .instances
                .get(&id)
                .map(|s| self.observe(s, now).state)
                .unwrap_or_default();
            out.push(InstanceStateChange {
                instance_id: id,
                previous_state: previous,
                current_state: current,
            });
        }
        Ok(out)
    }

    async fn create_tags(&self, input: CreateTagsInput) -> Result<(), AwsError> {
        self.enter(Call::new("CreateTags")).await?;
        let mut st = self.lock();
        for id in &input.resources {
            if let Some(inst) = st.instances.get_mut(id) {
                merge_tags(&mut inst.instance.tags, &input.tags);
            } else if let Some(img) = st.images.get_mut(id) {
                merge_tags(&mut img.image.tags, &input.tags);
            } else if let Some(s) = st.subnets.get_mut(id) {
                merge_tags(&mut s.tags, &input.tags);
            } else if let Some(g) = st.security_groups.get_mut(id) {
                merge_tags(&mut g.tags, &input.tags);
            } else {
                return Err(AwsError::new(
                    "InvalidID",
                    format!("The ID '{id}' is not valid"),
                ));
            }
        }
        Ok(())
    }

    async fn describe_instance_status(
        &self,
        input: DescribeInstanceStatusInput,
    ) -> Result<Vec<InstanceStatus>, AwsError> {
        self.enter(Call::new("DescribeInstanceStatus").unfiltered(input.filters.is_empty()))
            .await?;
        let now = self.now();
        let st = self.lock();
        // Running instances only (IncludeAllInstances is false), as DescribeInstances sees
        // them; an instance with no impairment passes both checks.
        Ok(st
            .instances
            .values()
            .filter(|s| self.described(s, now))
            .map(|s| self.observe(s, now))
            .filter(|i| i.state == "running")
            .map(|i| instance_status(&i, st.faults.impairments.get(&i.instance_id)))
            .filter(|s| filters_match(&input.filters, |n| status_values(s, n)))
            .collect())
    }
}

/// One running instance's status checks and events, given what is wrong with it.
fn instance_status(
    instance: &Instance,
    impairment: Option<&crate::faults::Impairment>,
) -> InstanceStatus {
    let check = |failed_since: Option<Timestamp>| StatusCheck {
        status: if failed_since.is_some() {
            "impaired"
        } else {
            "ok"
        }
        .to_string(),
        details: vec![StatusCheckDetail {
            name: "reachability".to_string(),
            status: if failed_since.is_some() {
                "failed"
            } else {
                "passed"
            }
            .to_string(),
            impaired_since: failed_since,
        }],
    };
    let impairment = impairment.cloned().unwrap_or_default();
    InstanceStatus {
        instance_id: instance.instance_id.clone(),
        availability_zone: instance.availability_zone.clone(),
        state: instance.state.clone(),
        instance_status: Some(check(impairment.instance_check_failed_since)),
        system_status: Some(check(impairment.system_check_failed_since)),
        attached_ebs_status: None,
        events: impairment
            .scheduled_event
            .into_iter()
            .map(|code| InstanceStatusEvent {
                description: format!("The instance is scheduled for {code}"),
                code,
                not_before: None,
            })
            .collect(),
    }
}

/// The values DescribeInstanceStatus's filters see.
fn status_values(s: &InstanceStatus, name: &str) -> Option<Vec<String>> {
    let summary = |c: &Option<StatusCheck>| c.iter().map(|c| c.status.clone()).collect();
    match name {
        "instance-id" => one(&s.instance_id),
        "availability-zone" => one(&s.availability_zone),
        "instance-state-name" => one(&s.state),
        "instance-status.status" => Some(summary(&s.instance_status)),
        "system-status.status" => Some(summary(&s.system_status)),
        "event.code" => Some(s.events.iter().map(|e| e.code.clone()).collect()),
        _ => None,
    }
}

impl SimAws {
    /// Creates one instance (state pending) from a launch template and fleet override.
    #[allow(clippy::too_many_arguments)]
    fn launch_instance(
        &self,
        instance_type: &str,
        subnet_id: &str,
        image_id: &str,
        lt: &LaunchTemplate,
        input: &CreateFleetInput,
        capacity_type: &str,
        now: Timestamp,
    ) -> Result<String, AwsError> {
        let mut st = self.lock();
        let image = st.images.get(image_id).cloned().ok_or_else(|| {
            AwsError::new(
                codes::AMI_ID_NOT_FOUND,
                format!("The image id '[{image_id}]' does not exist"),
            )
        })?;
        let subnet = st
            .subnets
            .get(subnet_id)
            .cloned()
            .ok_or_else(|| not_found(codes::SUBNET_ID_NOT_FOUND, "subnet ID", subnet_id))?;
        if subnet.available_ip_address_count <= 0 {
            return Err(AwsError::new(
                codes::INSUFFICIENT_FREE_ADDRESSES_IN_SUBNET,
                format!(
                    "There are not enough free addresses in subnet '{subnet_id}' to satisfy the requested number of instances."
                ),
            ));
        }
        let mut groups = Vec::new();
        for gid in &lt.data.security_group_ids {
            let g = st
                .security_groups
                .get(gid)
                .ok_or_else(|| not_found(codes::GROUP_ID_NOT_FOUND, "security group", gid))?;
            groups.push(GroupIdentifier {
                group_id: g.group_id.clone(),
                group_name: g.group_name.clone(),
            });
        }
        // A fresh id, never one the account holds (imported instances keep another account's
        // ids, which this seed may also generate).
        let id = loop {
            st.counter += 1;
            let id = resource_id("i", self.config.seed, &format!("instance/{}", st.counter));
            if !st.instances.contains_key(&id) {
                break id;
            }
        };
        // The subnet's next free address (its /19 holds 8,187 usable ones); an address is free
        // again once its instance is terminated.
        let base = subnet
            .cidr_block
            .split('.')
            .nth(2)
            .and_then(|o| o.parse::<u64>().ok())
            .unwrap_or(0);
        let mut cursor = st.ip_cursor.get(subnet_id).copied().unwrap_or(0);
        let mut ip = String::new();
        for _ in 0..SUBNET_ADDRESSES {
            let offset = cursor % SUBNET_ADDRESSES + 4;
            cursor += 1;
            let candidate = format!("10.0.{}.{}", (base + offset / 256) % 256, offset % 256);
            if !st.ips_in_use.contains(&candidate) {
                ip = candidate;
                break;
            }
        }
        st.ip_cursor.insert(subnet_id.to_string(), cursor);
        if ip.is_empty() {
            return Err(AwsError::new(
                codes::INSUFFICIENT_FREE_ADDRESSES_IN_SUBNET,
                format!(
                    "There are not enough free addresses in subnet '{subnet_id}' to satisfy the requested number of instances."
                ),
            ));
        }
        st.ips_in_use.insert(ip.clone());
        let mut tags = Vec::new();
        for spec in input
            .tag_specifications
            .iter()
            .filter(|t| t.resource_type == "instance")
        {
            merge_tags(&mut tags, &spec.tags);
        }
        let instance = Instance {
            instance_id: id.clone(),
            instance_type: instance_type.to_string(),
            image_id: image_id.to_string(),
            availability_zone: subnet.availability_zone.clone(),
            subnet_id: subnet_id.to_string(),
            vpc_id: subnet.vpc_id.clone(),
            private_dns_name: format!(
                "ip-{}.{}.compute.internal",
                ip.replace('.', "-"),
                self.config.region
            ),
            private_ip_address: ip,
            state: "pending".to_string(),
            security_groups: groups,
            tags,
            launch_time: now,
            instance_lifecycle: (capacity_type == "spot").then(|| "spot".to_string()),
            architecture: image.image.architecture.clone(),
            iam_instance_profile: Some(lt.data.iam_instance_profile_name.clone())
                .filter(|p| !p.is_empty()),
            // EC2 reports `windows` for instances of a Windows image, nothing for Linux.
            platform: image
                .image
                .platform_details
                .starts_with("Windows")
                .then(|| "windows".to_string()),
        };
        if let Some(s) = st.subnets.get_mut(subnet_id) {
            s.available_ip_address_count -= 1;
        }
        let stuck = st.faults.stuck_launches > 0;
        st.faults.stuck_launches = st.faults.stuck_launches.saturating_sub(1);
        let visible_at = now
            + self
                .config
                .realism
                .visibility_delay_of(self.config.seed, &id);
        st.instances.insert(
            id.clone(),
            SimInstance {
                instance,
                terminated_at: None,
                reclaim_at: None,
                kubernetes_version: image.kubernetes_version.clone(),
                stuck,
                visible_at,
            },
        );
        Ok(id)
    }
}
