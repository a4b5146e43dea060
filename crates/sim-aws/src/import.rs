//! Seeding the account with another account's resources as they are, ids kept: the subnets,
//! security groups, images and running instances `driftwood preview` copies from a live
//! cluster before it runs a change on the copy.

use driftwood_aws::ports::{Image, Instance, SecurityGroup, Subnet};

use crate::state::{SimAws, SimInstance};

impl SimAws {
    /// Removes every subnet and security group (the account's own default network), so that
    /// only imported ones are discovered.
    pub fn forget_network(&self) {
        let mut st = self.lock();
        st.subnets.clear();
        st.security_groups.clear();
    }

    /// Adds `subnet` as it is (its id kept; replaces one with the same id).
    pub fn import_subnet(&self, subnet: Subnet) {
        self.lock().subnets.insert(subnet.subnet_id.clone(), subnet);
    }

    /// Adds `group` as it is (its id kept).
    pub fn import_security_group(&self, group: SecurityGroup) {
        self.lock()
            .security_groups
            .insert(group.group_id.clone(), group);
    }

    /// Adds `image` as it is (its id kept), running `kubernetes_version` when known.
    pub fn import_image(&self, image: Image, kubernetes_version: Option<String>) {
        let mut st = self.lock();
        st.image_names
            .insert(image.name.clone(), image.image_id.clone());
        st.images.insert(
            image.image_id.clone(),
            crate::images::SimImage {
                image,
                kubernetes_version,
            },
        );
    }

    /// Adds a running instance as it is (id, address, launch time kept), described at once;
    /// its address counts as in use.
    pub fn import_instance(&self, instance: Instance, kubernetes_version: Option<String>) {
        let now = self.now();
        let mut st = self.lock();
        st.ips_in_use.insert(instance.private_ip_address.clone());
        // Launched long enough ago to be running now, whatever its recorded launch time.
        let running_since = now - self.config.launch_delay;
        let mut instance = instance;
        if instance.launch_time > running_since {
            instance.launch_time = running_since;
        }
        st.instances.insert(
            instance.instance_id.clone(),
            SimInstance {
                visible_at: instance.launch_time,
                instance,
                terminated_at: None,
                reclaim_at: None,
                kubernetes_version,
                stuck: false,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MachineSource as _;
    use crate::state::SimConfig;
    use driftwood_aws::ports::{DescribeSubnetsInput, Ec2Api as _, Tag};
    use driftwood_cloud::ManualClock;
    use std::sync::Arc;

    fn account() -> SimAws {
        let clock = Arc::new(ManualClock::new(crate::default_start_time()));
        SimAws::new(SimConfig::new("c", 1).without_realism(), clock)
    }

    #[tokio::test]
    async fn imported_network_replaces_the_default_one() {
        let sim = account();
        assert!(!sim.subnets().is_empty());
        sim.forget_network();
        sim.import_subnet(Subnet {
            subnet_id: "subnet-live".into(),
            availability_zone: "us-west-2b".into(),
            available_ip_address_count: 100,
            tags: vec![Tag::new("team", "a")],
            ..Subnet::default()
        });
        let described = sim
            .describe_subnets(DescribeSubnetsInput::default())
            .await
            .unwrap();
        let ids: Vec<&str> = described.iter().map(|s| s.subnet_id.as_str()).collect();
        assert_eq!(ids, ["subnet-live"]);
        assert!(sim.security_groups().is_empty());
    }

    #[test]
    fn an_imported_instance_is_a_running_machine_with_its_own_id_and_name() {
        let sim = account();
        let launched = sim.now();
        sim.import_instance(
            Instance {
                instance_id: "i-0live".into(),
                instance_type: "m5.large".into(),
                image_id: "ami-live".into(),
                availability_zone: "us-west-2a".into(),
                private_ip_address: "10.9.8.7".into(),
                private_dns_name: "ip-10-9-8-7.us-west-2.compute.internal".into(),
                state: "running".into(),
                launch_time: launched,
                ..Instance::default()
            },
            Some("1.29".into()),
        );
        let machines = sim.running_machines();
        assert_eq!(machines.len(), 1);
        assert_eq!(machines[0].instance_id, "i-0live");
        assert_eq!(
            machines[0].private_dns_name,
            "ip-10-9-8-7.us-west-2.compute.internal"
        );
    }
}
