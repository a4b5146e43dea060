//! Small conversions shared by the adapters: filters, tags, timestamps.

use aws_sdk_ec2::primitives::DateTime;
use aws_sdk_ec2::types as ec2;
use driftwood_aws::ports::{Filter, Tag, TagSpecification};
use jiff::Timestamp;

/// Port filters as EC2 filters.
pub fn filters(filters: &[Filter]) -> Option<Vec<ec2::Filter>> {
    if filters.is_empty() {
        return None;
    }
    Some(
        filters
            .iter()
            .map(|f| {
                ec2::Filter::builder()
                    .name(&f.name)
                    .set_values(Some(f.values.clone()))
                    .build()
            })
            .collect(),
    )
}

/// Port tags as EC2 tags.
pub fn tags_to_ec2(tags: &[Tag]) -> Vec<ec2::Tag> {
    tags.iter()
        .map(|t| ec2::Tag::builder().key(&t.key).value(&t.value).build())
        .collect()
}

/// EC2 tags as port tags.
pub fn tags_from_ec2(tags: &[ec2::Tag]) -> Vec<Tag> {
    tags.iter()
        .map(|t| Tag::new(t.key().unwrap_or_default(), t.value().unwrap_or_default()))
        .collect()
}

/// Port tag specifications as EC2 tag specifications (empty ones dropped: EC2 rejects them).
pub fn tag_specifications(specs: &[TagSpecification]) -> Option<Vec<ec2::TagSpecification>> {
    let out: Vec<_> = specs
        .iter()
        .filter(|s| !s.tags.is_empty())
        .map(|s| {
            ec2::TagSpecification::builder()
                .resource_type(ec2::ResourceType::from(s.resource_type.as_str()))
                .set_tags(Some(tags_to_ec2(&s.tags)))
                .build()
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

/// An SDK timestamp as a jiff one (the epoch when out of range).
pub fn timestamp(dt: Option<&DateTime>) -> Timestamp {
    dt.and_then(|dt| {
        let nanos = i32::try_from(dt.subsec_nanos()).unwrap_or(0);
        Timestamp::new(dt.secs(), nanos).ok()
    })
    .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A jiff timestamp as an SDK one.
pub fn datetime(ts: Timestamp) -> DateTime {
    DateTime::from_secs(ts.as_second())
}

/// An optional i32 widened.
pub fn wide(v: Option<i32>) -> i64 {
    v.map(i64::from).unwrap_or(0)
}

/// An i64 narrowed for an i32 API field (clamped, never wrapping).
pub fn narrow(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_filters_and_tag_specs_are_left_out() {
        assert!(filters(&[]).is_none());
        assert!(
            tag_specifications(&[TagSpecification {
                resource_type: "instance".into(),
                tags: vec![]
            }])
            .is_none()
        );
        let f = filters(&[Filter::new("tag:karpenter.sh/discovery", ["c"])]).unwrap();
        assert_eq!(f[0].name(), Some("tag:karpenter.sh/discovery"));
        assert_eq!(f[0].values(), ["c"]);
    }

    #[test]
    fn timestamps_round_trip_to_the_second() {
        let ts: Timestamp = "2024-08-17T04:12:33Z".parse().unwrap();
        assert_eq!(timestamp(Some(&datetime(ts))), ts);
        assert_eq!(timestamp(None), Timestamp::UNIX_EPOCH);
        assert_eq!(narrow(i64::MAX), i32::MAX);
        assert_eq!(wide(Some(7)), 7);
    }
}
