//! The built-in kinds the server serves, as k8s-openapi types: one table, visited by what needs
//! the type (the OpenAPI schemas, decoding a write as kube-apiserver decodes it).

use k8s_openapi::api::{apps, authorization, coordination, core, events, policy, rbac, storage};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

/// Something done with the Rust type of a built-in kind.
pub trait KindVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the kind's type.
    fn visit<T: JsonSchema + DeserializeOwned>(&mut self) -> Self::Output;
}

/// Visits the type of the built-in `kind` of `group` (None for kinds not in the table).
pub fn visit<V: KindVisitor>(group: &str, kind: &str, visitor: &mut V) -> Option<V::Output> {
    macro_rules! kinds {
        ($(($group:literal, $kind:literal, $ty:ty)),* $(,)?) => {
            match (group, kind) {
                $(($group, $kind) => Some(visitor.visit::<$ty>()),)*
                _ => None,
            }
        };
    }
    kinds![
        ("", "Pod", core::v1::Pod),
        ("", "Node", core::v1::Node),
        ("", "Namespace", core::v1::Namespace),
        ("", "Service", core::v1::Service),
        ("", "ServiceAccount", core::v1::ServiceAccount),
        ("", "ConfigMap", core::v1::ConfigMap),
        ("", "Secret", core::v1::Secret),
        ("", "Event", core::v1::Event),
        ("", "PersistentVolume", core::v1::PersistentVolume),
        ("", "PersistentVolumeClaim", core::v1::PersistentVolumeClaim),
        ("apps", "Deployment", apps::v1::Deployment),
        ("apps", "ReplicaSet", apps::v1::ReplicaSet),
        ("apps", "StatefulSet", apps::v1::StatefulSet),
        ("apps", "DaemonSet", apps::v1::DaemonSet),
        (
            "policy",
            "PodDisruptionBudget",
            policy::v1::PodDisruptionBudget
        ),
        ("events.k8s.io", "Event", events::v1::Event),
        ("coordination.k8s.io", "Lease", coordination::v1::Lease),
        (
            "storage.k8s.io",
            "VolumeAttachment",
            storage::v1::VolumeAttachment
        ),
        ("rbac.authorization.k8s.io", "Role", rbac::v1::Role),
        (
            "rbac.authorization.k8s.io",
            "RoleBinding",
            rbac::v1::RoleBinding
        ),
        (
            "rbac.authorization.k8s.io",
            "ClusterRole",
            rbac::v1::ClusterRole
        ),
        (
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            rbac::v1::ClusterRoleBinding
        ),
        (
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            authorization::v1::SelfSubjectAccessReview
        ),
        (
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            apiextensions::v1::CustomResourceDefinition
        ),
    ]
}
