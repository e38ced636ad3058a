//! Who may use the machine at the same time.
//!
//! libtest runs the tests of a binary on as many threads as the machine has cores, and every
//! integration test is now in one binary. When each area was a binary of its own, cargo ran the
//! binaries one after the other: the tests that kill -9 and SIGSTOP real processes and count on
//! leases and timeouts of seconds (`crash`, `faults`, `roles`) shared the machine only with tests
//! of their own area, never with another area's processes nor with the CPU-bound tests (the
//! real-data replays and `coreserve demo`, Chromium). [`reserve`] keeps it so:
//!
//! ```ignore
//! let _machine = machine::reserve("crash").await; // first thing in the test, held to its end
//! ```
//!
//! Tests that reserved the machine for the same area run side by side, as they did in their own
//! binary; tests of another area wait until the last of them has ended. Areas are served in the
//! order they asked (a test waiting for its area is not overtaken by later tests of the running
//! area). Every other test (in-process applications, the stores, the property tests) reserves
//! nothing and runs beside anything. A test that panics gives its reservation back as it unwinds.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// The machine of this test process.
static MACHINE: Machine = Machine::new();

/// Waits until the machine is free or runs tests of `area` only, and no test that asked earlier
/// still waits; then reserves it for this test of `area`.
pub async fn reserve(area: &'static str) -> Reservation<'static> {
    // Wait on a thread of the blocking pool, not on the test's runtime.
    tokio::task::spawn_blocking(move || MACHINE.reserve(area)).await.expect("the reservation thread")
}

/// [`reserve`] for a test without a runtime.
pub fn reserve_blocking(area: &'static str) -> Reservation<'static> {
    MACHINE.reserve(area)
}

/// Who uses a machine: the area whose tests run and how many, and the tests waiting, in the
/// order they asked.
struct Machine {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    running: Option<(&'static str, usize)>,
    waiting: VecDeque<(u64, &'static str)>,
    next_ticket: u64,
}

/// The machine, reserved for one test of `area` until dropped.
#[must_use = "the reservation ends when it is dropped"]
pub struct Reservation<'m> {
    machine: &'m Machine,
    area: &'static str,
}

impl Machine {
    const fn new() -> Machine {
        let state = State { running: None, waiting: VecDeque::new(), next_ticket: 0 };
        Machine { state: Mutex::new(state), changed: Condvar::new() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Only this module locks it, and never panics while it holds it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reserve(&self, area: &'static str) -> Reservation<'_> {
        let mut s = self.state();
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.waiting.push_back((ticket, area));
        loop {
            let first = s.waiting.front().is_some_and(|(t, _)| *t == ticket);
            let free = s.running.is_none_or(|(running, _)| running == area);
            if first && free {
                s.waiting.pop_front();
                let n = s.running.map_or(0, |(_, n)| n);
                s.running = Some((area, n + 1));
                // The next waiter may be of this area too.
                self.changed.notify_all();
                return Reservation { machine: self, area };
            }
            s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut s = self.machine.state();
        let left = match &mut s.running {
            Some((area, n)) => {
                debug_assert_eq!(*area, self.area, "only one area runs at a time");
                *n -= 1;
                *n
            }
            None => 0,
        };
        if left == 0 {
            s.running = None;
        }
        self.machine.changed.notify_all();
    }
}

/// Tests of one area share the machine, another area waits for the last of them, and an area
/// that asked first is not overtaken by later tests of the running area.
#[test]
fn areas_take_turns_in_the_order_they_asked() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    let machine: &'static Machine = Box::leak(Box::new(Machine::new()));
    let a1 = machine.reserve("a");
    let a2 = machine.reserve("a");
    let b_in = Arc::new(AtomicUsize::new(0));
    let b = {
        let b_in = b_in.clone();
        std::thread::spawn(move || {
            let _b = machine.reserve("b");
            b_in.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
            b_in.fetch_sub(1, Ordering::SeqCst);
        })
    };
    // Wait until b has asked; then a later "a" must queue behind it.
    while machine.state().waiting.is_empty() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let a3 = std::thread::spawn(move || {
        let _a = machine.reserve("a");
        b_in.load(Ordering::SeqCst)
    });
    while machine.state().waiting.len() < 2 && !a3.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!a3.is_finished() && !b.is_finished(), "both wait while a1 and a2 run");
    drop(a1);
    std::thread::sleep(Duration::from_millis(50));
    assert!(!b.is_finished(), "b waits for the last test of area a");
    drop(a2);
    b.join().unwrap();
    assert_eq!(a3.join().unwrap(), 0, "the later a ran after b, not beside it");
    assert!(machine.state().running.is_none() && machine.state().waiting.is_empty());
}
