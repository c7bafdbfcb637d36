//! Turning an `Assign` into a validated [`Job`]: the product, the mall, the deadline, the
//! trace context, and the mall's site profile from the latest Welcome. Validation happens
//! once, here, on receive (a `FieldError` names the field). Pure, no I/O.

use std::time::Duration;

use chrono::Utc;
use lps_proto::{
    model::{FieldError, JudgedWith, Lease, MallId, ProductSpec, timestamp_from_pb},
    pb,
};
use tracing::warn;

use crate::{executor::Job, welcome::SiteProfiles};

/// A job whose Assign has no deadline gets this one (the coordinator's default).
const DEFAULT_JOB_DEADLINE: Duration = Duration::from_secs(300);

/// Validates an Assign into a [`Job`] (the lease is checked by the caller).
pub(super) fn job_from_assign(
    assign: pb::Assign,
    profiles: &SiteProfiles,
) -> Result<Job, FieldError> {
    let payload = assign
        .payload
        .ok_or_else(|| FieldError::new("payload", "missing"))?;
    let product = payload
        .product
        .ok_or_else(|| FieldError::new("payload.product", "missing"))?;
    let product = ProductSpec::try_from(&product).map_err(|e| e.under("payload.product"))?;
    let mall = MallId::new(payload.mall).map_err(|e| e.under("payload"))?;
    let deadline = match assign.deadline {
        Some(t) => timestamp_from_pb("deadline", t)?,
        None => {
            warn!(
                job.id = assign.job_id,
                "assign without a deadline; using the default"
            );
            Utc::now()
                + chrono::Duration::from_std(DEFAULT_JOB_DEADLINE)
                    .unwrap_or(chrono::Duration::zero())
        }
    };
    let non_empty = |s: String| Some(s).filter(|s| !s.is_empty());
    Ok(Job {
        lease: Lease {
            job_id: assign.job_id,
            epoch: assign.lease_epoch,
        },
        profile: profiles.get(&mall),
        lexicon: profiles.lexicon(&mall),
        judged_with: JudgedWith::current(profiles.vocabulary_revision(&mall)),
        limits: *profiles.limits(),
        product,
        mall,
        attempt: payload.attempt,
        max_attempts: payload.max_attempts,
        deadline,
        traceparent: non_empty(assign.traceparent),
        tracestate: non_empty(assign.tracestate),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_are_validated() {
        let good = pb::Assign {
            job_id: 3,
            lease_epoch: 2,
            deadline: Some(lps_proto::model::timestamp_to_pb(Utc::now())),
            payload: Some(pb::JobPayload {
                product: Some(pb::Product {
                    code: "SKU-1".into(),
                    name: "삼다수 2L".into(),
                    brand: "제주삼다수".into(),
                    model_code: String::new(),
                    gtin: "8801234567893".into(),
                }),
                mall: "naver".into(),
                attempt: 1,
                max_attempts: 3,
            }),
            traceparent: "00-abc-def-01".into(),
            ..Default::default()
        };
        let profiles = SiteProfiles::new(
            vec![pb::SiteProfile {
                id: "naver".into(),
                ..Default::default()
            }],
            pb::Limits::default(),
            None,
        );
        let job = job_from_assign(good.clone(), &profiles).unwrap();
        assert_eq!(job.product.code(), Some("SKU-1"));
        // The caller's hints reach the job (and so the judge's query).
        assert_eq!(job.product.hints().brand(), Some("제주삼다수"));
        assert_eq!(job.product.hints().gtin(), Some("8801234567893"));
        assert_eq!(job.mall.as_str(), "naver");
        assert!(job.profile.is_some());
        assert_eq!(job.traceparent.as_deref(), Some("00-abc-def-01"));
        assert_eq!(job.tracestate, None);

        let mut no_payload = good.clone();
        no_payload.payload = None;
        assert_eq!(
            job_from_assign(no_payload, &profiles).unwrap_err().field,
            "payload"
        );
        let mut bad_mall = good.clone();
        bad_mall.payload.as_mut().unwrap().mall = "Naver!".into();
        assert_eq!(
            job_from_assign(bad_mall, &profiles).unwrap_err().field,
            "payload.mall"
        );
        // A product field the wire model refuses names its place in the Assign.
        let refused = |edit: fn(&mut pb::Product)| {
            let mut assign = good.clone();
            if let Some(product) = assign.payload.as_mut().and_then(|p| p.product.as_mut()) {
                edit(product);
            }
            job_from_assign(assign, &profiles).unwrap_err().field
        };
        assert_eq!(
            refused(|p| p.gtin = "8801234567894".into()),
            "payload.product.gtin"
        );
        assert_eq!(refused(|p| p.name = " ".into()), "payload.product.name");
    }
}
