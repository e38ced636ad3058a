//! [`ServiceTimes`]: how long a participant takes to answer each message of the protocol, as
//! uniform ranges in seconds (Ando & Aida, *Evaluation of Scheduling Algorithms for Advance
//! Reservations*, Table 2). The simulator makes every message wait such a time on its virtual
//! clock; a participant process started with `serve --service-times FILE` waits it on the
//! wall clock before it handles a message of the participant protocol, so that the running
//! service can be put in the paper's regime of slow messages (sim/VALIDATION.md).

use serde::{Deserialize, Serialize};

use super::{Message, ParticipantKind};

/// Uniform service-time ranges `(lo, hi)` in seconds, per message type. The TOML table
/// `[service_times]` of a simulator scenario, and the file of `serve --service-times`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceTimes {
    /// NIS availability check.
    pub availability: (f64, f64),
    /// LIS free-slot search.
    pub free_slot: (f64, f64),
    /// Tentative reservation (prepare).
    pub hold: (f64, f64),
    pub commit: (f64, f64),
    /// Abort of a hold or release of a reservation.
    pub cancel: (f64, f64),
}

impl Default for ServiceTimes {
    /// Table 2 of Ando & Aida.
    fn default() -> Self {
        ServiceTimes {
            availability: (1.0, 2.0),
            free_slot: (2.0, 3.0),
            hold: (1.0, 2.0),
            commit: (1.0, 2.0),
            cancel: (1.0, 2.0),
        }
    }
}

impl ServiceTimes {
    /// Every range by its TOML name.
    pub fn named(&self) -> [(&'static str, (f64, f64)); 5] {
        [
            ("availability", self.availability),
            ("free_slot", self.free_slot),
            ("hold", self.hold),
            ("commit", self.commit),
            ("cancel", self.cancel),
        ]
    }

    /// Checks every range is finite with `0 <= lo <= hi`.
    ///
    /// # Errors
    /// The first [`BadServiceTime`] range.
    pub fn validate(&self) -> Result<(), BadServiceTime> {
        for (name, (lo, hi)) in self.named() {
            if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo <= hi) {
                return Err(BadServiceTime { name, lo, hi });
            }
        }
        Ok(())
    }

    /// The range of `message` to a participant of `kind`; `None` for the messages Table 2 has
    /// no time for (extend, persist), which cost nothing here.
    pub fn of(&self, kind: ParticipantKind, message: Message) -> Option<(f64, f64)> {
        match message {
            Message::Query => Some(match kind {
                ParticipantKind::Compute => self.free_slot,
                ParticipantKind::Network => self.availability,
            }),
            Message::Prepare => Some(self.hold),
            Message::Commit => Some(self.commit),
            Message::Abort | Message::Release => Some(self.cancel),
            Message::Extend | Message::Persist => None,
        }
    }

    /// A draw from `(lo, hi)` with `rng` (`lo` when the range is empty), as a duration.
    pub fn draw(rng: &mut impl rand::Rng, (lo, hi): (f64, f64)) -> std::time::Duration {
        std::time::Duration::from_secs_f64(if hi > lo { rng.gen_range(lo..hi) } else { lo })
    }
}

/// A service-time range that is not finite with `0 <= lo <= hi` (seconds).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("service_times.{name} = ({lo}, {hi}) must satisfy 0 <= lo <= hi")]
pub struct BadServiceTime {
    /// The message kind, e.g. `free_slot`.
    pub name: &'static str,
    /// The range's lower bound, in seconds.
    pub lo: f64,
    /// The range's upper bound, in seconds.
    pub hi: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_has_its_table_2_range() {
        let t = ServiceTimes::default();
        assert_eq!(t.of(ParticipantKind::Compute, Message::Query), Some((2.0, 3.0)));
        assert_eq!(t.of(ParticipantKind::Network, Message::Query), Some((1.0, 2.0)));
        assert_eq!(t.of(ParticipantKind::Network, Message::Release), Some(t.cancel));
        assert_eq!(t.of(ParticipantKind::Compute, Message::Persist), None);
        let bad = ServiceTimes { hold: (2.0, 1.0), ..t };
        assert_eq!(bad.validate().unwrap_err().name, "hold");
        let mut rng = rand::thread_rng();
        for _ in 0..100 {
            let d = ServiceTimes::draw(&mut rng, (0.5, 0.75)).as_secs_f64();
            assert!((0.5..0.75).contains(&d), "{d}");
        }
        assert_eq!(ServiceTimes::draw(&mut rng, (0.25, 0.25)).as_secs_f64(), 0.25);
    }
}
