//! The simulated SSM (GetParameter), IAM (instance profiles) and pricing APIs.

use async_trait::async_trait;
use driftwood_aws::ports::{
    AwsError, CreateInstanceProfileInput, GetParameterInput, IamApi, InstanceProfile,
    OnDemandPrice, Parameter, PricingApi, SsmApi, codes,
};

use crate::gate::Call;
use crate::ids::hex_id;
use crate::state::SimAws;

#[async_trait]
impl SsmApi for SimAws {
    async fn get_parameter(&self, input: GetParameterInput) -> Result<Parameter, AwsError> {
        self.enter(Call::new("GetParameter")).await?;
        self.ssm_get_parameter(&input.name)
    }
}

fn no_such_profile(name: &str) -> AwsError {
    AwsError::new(
        codes::NO_SUCH_ENTITY,
        format!("Instance Profile {name} cannot be found."),
    )
}

#[async_trait]
impl IamApi for SimAws {
    async fn get_instance_profile(&self, name: &str) -> Result<InstanceProfile, AwsError> {
        self.enter(Call::new("GetInstanceProfile")).await?;
        self.lock()
            .instance_profiles
            .get(name)
            .cloned()
            .ok_or_else(|| no_such_profile(name))
    }

    async fn create_instance_profile(
        &self,
        input: CreateInstanceProfileInput,
    ) -> Result<InstanceProfile, AwsError> {
        self.enter(Call::new("CreateInstanceProfile")).await?;
        let mut st = self.lock();
        let name = input.instance_profile_name;
        if st.instance_profiles.contains_key(&name) {
            return Err(AwsError::new(
                codes::ENTITY_ALREADY_EXISTS,
                format!("Instance Profile {name} already exists."),
            ));
        }
        let path = if input.path.is_empty() {
            "/".to_string()
        } else {
            input.path
        };
        let profile = InstanceProfile {
            instance_profile_id: format!(
                "AIPA{}",
                hex_id(self.config.seed, &name, 17).to_uppercase()
            ),
            arn: format!(
                "arn:aws:iam::{}:instance-profile{path}{name}",
                self.config.account_id
            ),
            instance_profile_name: name.clone(),
            path,
            roles: Vec::new(),
            tags: input.tags,
        };
        st.instance_profiles.insert(name, profile.clone());
        Ok(profile)
    }

    async fn add_role_to_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), AwsError> {
        self.enter(Call::new("AddRoleToInstanceProfile")).await?;
        let mut st = self.lock();
        if !st.roles.contains(role) {
            return Err(AwsError::new(
                codes::NO_SUCH_ENTITY,
                format!("The role with name {role} cannot be found."),
            ));
        }
        let p = st
            .instance_profiles
            .get_mut(profile)
            .ok_or_else(|| no_such_profile(profile))?;
        if !p.roles.is_empty() {
            return Err(AwsError::new(
                codes::LIMIT_EXCEEDED,
                "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1",
            ));
        }
        p.roles.push(role.to_string());
        Ok(())
    }

    async fn remove_role_from_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), AwsError> {
        self.enter(Call::new("RemoveRoleFromInstanceProfile"))
            .await?;
        let mut st = self.lock();
        let p = st
            .instance_profiles
            .get_mut(profile)
            .ok_or_else(|| no_such_profile(profile))?;
        let before = p.roles.len();
        p.roles.retain(|r| r != role);
        if p.roles.len() == before {
            return Err(AwsError::new(
                codes::NO_SUCH_ENTITY,
                format!("The role with name {role} cannot be found."),
            ));
        }
        Ok(())
    }

    async fn delete_instance_profile(&self, name: &str) -> Result<(), AwsError> {
        self.enter(Call::new("DeleteInstanceProfile")).await?;
        let mut st = self.lock();
        let p = st
            .instance_profiles
            .get(name)
            .ok_or_else(|| no_such_profile(name))?;
        if !p.roles.is_empty() {
            return Err(AwsError::new(
                "DeleteConflict",
                "Cannot delete entity, must remove roles from instance profile first.",
            ));
        }
        st.instance_profiles.remove(name);
        Ok(())
    }
}

#[async_trait]
impl PricingApi for SimAws {
    async fn on_demand_prices(&self, region: &str) -> Result<Vec<OnDemandPrice>, AwsError> {
        self.enter(Call::new("GetProducts")).await?;
        if region != self.config.region {
            return Ok(Vec::new());
        }
        Ok(self
            .lock()
            .instance_types
            .values()
            .map(|e| OnDemandPrice {
                instance_type: e.description.instance_type.clone(),
                price_per_hour: e.on_demand_price,
            })
            .collect())
    }
}
