//! The one status of a plan ([`PlanStatus`]): what the planner answers (committed, rejected or,
//! in a dry run, planned), what the store keeps and the API shows (pending, active, completed,
//! cancelled and broken besides).

use serde::{Deserialize, Serialize};

use super::UnknownValue;

/// The life of a plan, from the planner's answer to the stored plan: one type for the
/// planner's outcome, the store and the REST API.
///
/// One spelling, lowercase, for every form: JSON (serde), text (strum: `Display`, `FromStr`,
/// `AsRef<str>`, `&'static str`, the metrics' labels) and the `plans.status` column (sqlx: a
/// TEXT column read with `status as "status: PlanStatus"`; written as `&'static str`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[derive(Serialize, Deserialize, utoipa::ToSchema, sqlx::Type)]
#[derive(strum::Display, strum::EnumString, strum::AsRefStr, strum::IntoStaticStr, strum::VariantArray)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
#[strum(serialize_all = "lowercase", parse_err_ty = UnknownValue, parse_err_fn = unknown_status)]
pub enum PlanStatus {
    /// Only in dry-run answers: nothing was booked and nothing is stored.
    Planned,
    /// The coordinator decided to commit, but phase 2 is not confirmed yet (a participant or
    /// the store did not answer): not reported as booked. A recovery loop settles it as
    /// `committed` or `rejected` within seconds of the participants and the store answering.
    Pending,
    /// Every reservation is booked; its first job has not started yet.
    Committed,
    /// Committed, and its first job's start has come (the service's clock); its last job has
    /// not ended.
    Active,
    /// Committed, and its last job's end has passed: nothing of it is booked any more.
    Completed,
    /// Nothing was booked; the outcome's `reason` says why.
    Rejected,
    /// It was committed, then cancelled: every reservation was released.
    Cancelled,
    /// It was committed, and a participant can no longer honour a reservation of it (e.g. an
    /// administrator deleted its Slurm reservation): the outcome's jobs say which and why
    /// (`broken`). Never reported as committed; it can still be cancelled.
    Broken,
}

/// The error of `PlanStatus::from_str` (the `status` filter of `GET /v1/plans` answers it).
fn unknown_status(other: &str) -> UnknownValue {
    UnknownValue::new("status", other, "pending, committed, active, completed, rejected, cancelled or broken")
}

impl PlanStatus {
    /// Committed, active or broken: the plan still holds reservations, and may be cancelled.
    pub fn holds_reservations(self) -> bool {
        matches!(self, PlanStatus::Committed | PlanStatus::Active | PlanStatus::Broken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_status_is_spelled_alike_in_json_text_and_filters() {
        for s in <PlanStatus as strum::VariantArray>::VARIANTS {
            assert_eq!(serde_json::to_string(s).unwrap(), format!("\"{s}\""));
            assert_eq!(<&str>::from(*s), s.as_ref());
            assert_eq!(s.to_string().parse::<PlanStatus>(), Ok(*s));
        }
        assert_eq!(
            "Committed".parse::<PlanStatus>(),
            Err(UnknownValue::new(
                "status",
                "Committed",
                "pending, committed, active, completed, rejected, cancelled or broken"
            ))
        );
    }
}
