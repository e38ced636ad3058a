//! Who may use the machine at the same time.
//!
//! libtest runs the tests of a binary on as many threads as the machine has cores, and every
//! integration test is now in one binary. When each area was a binary of its own, cargo ran them
//! one after the other: the tests that kill -9 and SIGSTOP real processes and count on leases
//! and timeouts of seconds (`crash`, `faults`, `roles`) never ran beside the CPU-bound ones (the
//! real-data replays, `coreserve demo`, Chromium). Two guards on one process-wide lock keep it
//! so:
//!
//! - [`alone`]: a timing-sensitive multi-process test. One at a time, and never while a
//!   CPU-bound test runs;
//! - [`cpu_bound`] (or [`cpu_bound_blocking`] in a test without a runtime): a test that keeps
//!   the cores busy for seconds. Any number at once, but never beside an [`alone`] test.
//!
//! Every other test (in-process applications, the stores) takes neither and runs beside
//! anything. Take the guard first thing in the test and hold it to the end:
//!
//! ```ignore
//! let _machine = machine::alone().await;
//! ```
//!
//! The lock is fair: a test waiting for [`alone`] is served before later [`cpu_bound`] ones. A
//! test that panics drops its guard as it unwinds (tokio's lock is not poisoned).

use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static MACHINE: RwLock<()> = RwLock::const_new(());

/// Waits until no other [`alone`] test and no [`cpu_bound`] test runs; they wait for this one.
pub async fn alone() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().await
}

/// Waits until no [`alone`] test runs; [`alone`] tests wait for this one.
pub async fn cpu_bound() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().await
}

/// [`cpu_bound`] for a test that is not async (it must not be called on a runtime's thread).
pub fn cpu_bound_blocking() -> RwLockReadGuard<'static, ()> {
    MACHINE.blocking_read()
}
