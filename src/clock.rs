//! The one clock abstraction. The service reads the wall clock, `coreserve plan` replays each
//! request's submission time, and the simulator runs on virtual time; lease expiry and `st`
//! always come from here, never from `SystemTime` directly.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::model::Time;

/// A source of "now" in whole seconds since the Unix epoch.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Time;
}

/// The wall clock (UTC).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Time {
        chrono::Utc::now().timestamp()
    }
}

/// A clock that only moves when told to: request replay and tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock reading `t`.
    pub fn new(t: Time) -> Self {
        ManualClock(AtomicI64::new(t))
    }
    /// Sets the time; never moves it backwards (a replay may deliver equal times).
    pub fn advance_to(&self, t: Time) {
        self.0.fetch_max(t, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Time {
        self.0.load(Ordering::SeqCst)
    }
}
