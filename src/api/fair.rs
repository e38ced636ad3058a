//! Fair admission to planning: a limit per user and the planning permits shared between users.
//!
//! Every `POST /v1/plans` (dry runs too) is admitted here before it plans:
//! - **in flight**: at most `max_in_flight_per_user` requests of one user are admitted at once
//!   (waiting or planning); one more is refused (`429 Too Many Requests` with `Retry-After`,
//!   answered after a pause that costs no CPU, `routes::plans::REFUSAL_PAUSE`, and before its
//!   body is parsed), so a flood costs its sender, not the others;
//! - **planning per user** (the all-in-one: planning is CPU-bound there): at most
//!   `planning_per_user` requests of one user plan at once (the service sets the number of
//!   cores); the rest of its admitted requests wait in the queue, costing no CPU. A user who
//!   keeps its whole in-flight allowance busy thus takes at most that many cores from the
//!   others, instead of running `max_in_flight_per_user` searches beside their one (issue 28:
//!   one flooding user raised another's p99 from 11 ms to 2 s);
//! - **permits**: at most `permits` requests plan at the same time. When they are all busy,
//!   waiting requests queue per user, and a freed permit goes to the waiting user with the fewest
//!   requests planning (ties: the one served longest ago), not to the oldest request: one
//!   user's backlog cannot starve another user's single request. With more permits than the
//!   per-user limit (the defaults: 16 and 8), a newcomer never waits for a permit at all.
//!
//! - **lanes**: a request admitted while its user has another in flight plans in the
//!   background lane (all cores but one, as many in progress at once, [`crate::api::lanes`])
//!   where the process has one (all-in-one), so that one user's many requests take the cores
//!   the others leave.
//!
//! With Planned-Use fair share ([`crate::fairshare`]) the waiting user whose project has the
//! highest priority `p_i` goes first, then the rule above; with an admission window
//! (`--admission-window-ms`), a request waits for the end of its window (windows of that length
//! from the epoch) before it may take a permit, so the arrivals of one window are served by
//! priority, not by arrival.
//!
//! The requests that plan share the CPU: the all-in-one's in-process participants yield
//! once a planning task has used up its cooperative budget ([`crate::protocol::Yielding`]:
//! every hundred-odd messages), so a small request is not stuck behind a long search on its
//! worker thread. The queue is in-process (each planning process
//! shares its own planners fairly).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

/// Why a request was not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{user} already has {in_flight} plan requests in flight (at most {limit})")]
pub struct TooManyInFlight {
    /// The user.
    pub user: String,
    /// Requests of theirs admitted right now.
    pub in_flight: usize,
    /// The limit.
    pub limit: usize,
}

#[derive(Default)]
struct State {
    free: usize,
    /// Per user: admitted requests (waiting or running) and running ones.
    in_flight: HashMap<String, usize>,
    running: HashMap<String, usize>,
    /// Per user: the requests waiting for a permit (and when each may take one), oldest first.
    waiting: HashMap<String, VecDeque<(Instant, oneshot::Sender<PlanningPermit>)>>,
    /// Per user: when it was last given a permit (a counter).
    served: HashMap<String, u64>,
    grants: u64,
}

/// A user's priority now (higher first): their project's `p_i`.
pub type Priority = Arc<dyn Fn(&str) -> f64 + Send + Sync>;

struct Inner {
    max_in_flight_per_user: usize,
    /// At most this many requests of one user plan at once (`usize::MAX`: no cap).
    planning_per_user: usize,
    /// None: every user alike.
    priority: Option<Priority>,
    /// The admission window (zero: none).
    window: Duration,
    state: Mutex<State>,
}

/// The fair admission queue of one planning process (see the module docs).
#[derive(Clone)]
pub struct FairQueue {
    inner: Arc<Inner>,
}

/// An admitted request: counts against its user's in-flight limit until dropped.
pub struct Admission {
    inner: Arc<Inner>,
    user: String,
    background: bool,
}

/// A planning permit: held while the request plans; freeing it hands it to the next user (and
/// then ends the request's admission).
pub struct PlanningPermit {
    inner: Arc<Inner>,
    user: String,
    /// False for a permit whose hand-over failed (its accounting was undone already).
    armed: bool,
    /// The admission it was granted to (dropped after the permit is freed).
    _admission: Option<Admission>,
}

impl FairQueue {
    /// `permits` requests plan at once (at least 1); a user may have `max_in_flight_per_user`
    /// requests admitted (at least 1).
    pub fn new(permits: usize, max_in_flight_per_user: usize) -> Self {
        let state = State { free: permits.max(1), ..State::default() };
        FairQueue {
            inner: Arc::new(Inner {
                max_in_flight_per_user: max_in_flight_per_user.max(1),
                planning_per_user: usize::MAX,
                priority: None,
                window: Duration::ZERO,
                state: Mutex::new(state),
            }),
        }
    }

    /// This queue serving waiting users by `priority` first, each request after the end of its
    /// admission `window` (see the module docs). Call before any request is admitted.
    pub fn with_priority(self, priority: Priority, window: Duration) -> Self {
        let inner = Arc::try_unwrap(self.inner).unwrap_or_else(|_| panic!("with_priority before any admission"));
        FairQueue { inner: Arc::new(Inner { priority: Some(priority), window, ..inner }) }
    }

    /// This queue letting at most `n` requests of one user plan at once (at least 1); the
    /// others wait for one of theirs to end. Call before any request is admitted.
    pub fn with_planning_per_user(self, n: usize) -> Self {
        let inner =
            Arc::try_unwrap(self.inner).unwrap_or_else(|_| panic!("with_planning_per_user before any admission"));
        FairQueue { inner: Arc::new(Inner { planning_per_user: n.max(1), ..inner }) }
    }

    /// Admits one request of `user`, or refuses it at once.
    ///
    /// # Errors
    /// [`TooManyInFlight`] when `user` is at the limit.
    pub fn admit(&self, user: &str) -> Result<Admission, TooManyInFlight> {
        let mut s = self.inner.state.lock().expect("fair queue");
        let n = s.in_flight.entry(user.to_owned()).or_default();
        if *n >= self.inner.max_in_flight_per_user {
            return Err(TooManyInFlight {
                user: user.to_owned(),
                in_flight: *n,
                limit: self.inner.max_in_flight_per_user,
            });
        }
        let background = *n > 0;
        *n += 1;
        Ok(Admission { inner: self.inner.clone(), user: user.to_owned(), background })
    }

    /// Requests of `user` admitted right now.
    pub fn in_flight(&self, user: &str) -> usize {
        self.inner.state.lock().expect("fair queue").in_flight.get(user).copied().unwrap_or(0)
    }
}

impl Admission {
    /// Was the user's another request in flight when this one was admitted? Such a request
    /// plans in the background lane where there is one ([`crate::api::lanes`]): a user's lone
    /// request keeps the foreground.
    pub fn background(&self) -> bool {
        self.background
    }

    /// Waits for a planning permit, fairly between users; the permit keeps this admission.
    pub async fn into_permit(self) -> PlanningPermit {
        let mut permit = self.wait().await;
        permit._admission = Some(self);
        permit
    }

    async fn wait(&self) -> PlanningPermit {
        let due = self.inner.window_end();
        let rx = {
            let mut s = self.inner.state.lock().expect("fair queue");
            let (tx, rx) = oneshot::channel();
            s.waiting.entry(self.user.clone()).or_default().push_back((due, tx));
            self.inner.dispatch(&mut s);
            rx
        };
        if due > Instant::now() {
            tokio::time::sleep_until(due).await;
            self.inner.dispatch(&mut self.inner.state.lock().expect("fair queue"));
        }
        rx.await.expect("a waiter is only dropped with its permit handed over")
    }
}

impl Inner {
    /// When a request arriving now may take a permit: the end of its admission window (now
    /// without one).
    fn window_end(&self) -> Instant {
        let now = Instant::now();
        let w = self.window.as_millis();
        if w == 0 {
            return now;
        }
        let epoch_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        now + Duration::from_millis((w - epoch_ms % w) as u64)
    }

    /// Hands free permits to waiting requests whose window has ended: each to the waiting user
    /// of the highest priority, then with the fewest requests planning, ties to the one
    /// served longest ago.
    fn dispatch(self: &Arc<Self>, s: &mut State) {
        let now = Instant::now();
        while s.free > 0 {
            let priority = |u: &str| self.priority.as_ref().map_or(0.0, |p| p(u));
            let rank =
                |u: &String| (s.running.get(u).copied().unwrap_or(0), s.served.get(u).copied().unwrap_or(0), u.clone());
            let next = s
                .waiting
                .iter()
                .filter(|(_, q)| q.front().is_some_and(|(due, _)| *due <= now))
                .filter(|(u, _)| s.running.get(*u).copied().unwrap_or(0) < self.planning_per_user)
                .map(|(u, _)| (priority(u), u))
                .min_by(|(pa, a), (pb, b)| pb.total_cmp(pa).then_with(|| rank(a).cmp(&rank(b))))
                .map(|(_, u)| u.clone());
            let Some(user) = next else { break };
            let queue = s.waiting.get_mut(&user).expect("a waiting user");
            let (_, tx) = queue.pop_front().expect("a waiting user has a waiter");
            if queue.is_empty() {
                s.waiting.remove(&user);
            }
            s.grants += 1;
            s.served.insert(user.clone(), s.grants);
            s.free -= 1;
            *s.running.entry(user.clone()).or_default() += 1;
            let permit = PlanningPermit { inner: self.clone(), user: user.clone(), armed: true, _admission: None };
            if let Err(mut permit) = tx.send(permit) {
                // The waiter went away: undo, and drop the permit without re-entering.
                permit.armed = false;
                s.free += 1;
                Self::less(&mut s.running, &user);
            }
        }
    }

    fn less(map: &mut HashMap<String, usize>, user: &str) {
        if let Some(n) = map.get_mut(user) {
            *n -= 1;
            if *n == 0 {
                map.remove(user);
            }
        }
    }
}

impl Drop for PlanningPermit {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut s = self.inner.state.lock().expect("fair queue");
        s.free += 1;
        Inner::less(&mut s.running, &self.user);
        self.inner.dispatch(&mut s);
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        let mut s = self.inner.state.lock().expect("fair queue");
        Inner::less(&mut s.in_flight, &self.user);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_beyond_the_limit_is_refused_and_admitted_again_once_one_ends() {
        let q = FairQueue::new(2, 2);
        let a1 = q.admit("a").unwrap();
        let _a2 = q.admit("a").unwrap();
        let e = q.admit("a").err().unwrap();
        assert_eq!((e.in_flight, e.limit), (2, 2));
        assert!(q.admit("b").is_ok(), "the limit is per user");
        drop(a1);
        assert!(q.admit("a").is_ok());
    }

    #[test]
    fn a_users_lone_request_is_foreground_and_the_others_beside_it_background() {
        let q = FairQueue::new(2, 8);
        let a1 = q.admit("a").unwrap();
        assert!(!a1.background(), "alone");
        let a2 = q.admit("a").unwrap();
        assert!(a2.background(), "beside a1");
        assert!(!q.admit("b").unwrap().background(), "per user");
        drop((a1, a2));
        assert!(!q.admit("a").unwrap().background(), "alone again");
    }

    /// The permit, if it is granted within 50 ms.
    async fn granted(rx: &mut tokio::task::JoinHandle<PlanningPermit>) -> Option<PlanningPermit> {
        tokio::time::timeout(Duration::from_millis(50), rx).await.ok().map(Result::unwrap)
    }

    #[tokio::test]
    async fn a_freed_permit_goes_to_the_next_user_not_to_the_oldest_request() {
        let q = FairQueue::new(1, 100);
        let first = q.admit("a").unwrap().into_permit().await;
        // a queues three more, then b one.
        let mut a_waiting: Vec<_> = (0..3).map(|_| tokio::spawn(q.admit("a").unwrap().into_permit())).collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut b = tokio::spawn(q.admit("b").unwrap().into_permit());
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(granted(&mut b).await.is_none(), "no permit free yet");
        drop(first);
        let b_permit = tokio::time::timeout(Duration::from_secs(1), &mut b).await.expect("b is next").unwrap();
        assert!(granted(&mut a_waiting[0]).await.is_none(), "a waits behind b");
        drop(b_permit);
        assert!(granted(&mut a_waiting[0]).await.is_some(), "then a again");
    }

    /// Waits until just after a window boundary of `window_ms`, so two arrivals a few
    /// milliseconds apart fall in one window.
    async fn start_of_window(window_ms: u128) {
        loop {
            let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
            if ms % window_ms < window_ms / 10 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Planned-Use fair share: within one admission window the request of the user whose
    /// project is within its pace (priority 0) plans before the earlier request of a user over
    /// it (priority -2); without priorities, the earlier one goes first.
    #[tokio::test]
    async fn within_a_window_the_higher_priority_plans_first() {
        for with_priority in [true, false] {
            let mut q = FairQueue::new(1, 100);
            if with_priority {
                let p: Priority = Arc::new(|u: &str| if u == "flood" { -2.0 } else { 0.0 });
                q = q.with_priority(p, Duration::from_millis(400));
            }
            start_of_window(400).await;
            let mut flood = tokio::spawn(q.admit("flood").unwrap().into_permit());
            tokio::time::sleep(Duration::from_millis(5)).await;
            let mut steady = tokio::spawn(q.admit("steady").unwrap().into_permit());
            let (first, second) = if with_priority { (&mut steady, &mut flood) } else { (&mut flood, &mut steady) };
            let permit = tokio::time::timeout(Duration::from_secs(2), first).await.expect("granted").unwrap();
            assert!(granted(second).await.is_none(), "one permit: the other waits (priority: {with_priority})");
            drop(permit);
            assert!(granted(second).await.is_some());
        }
    }

    /// Issue 28: a user at its planning cap waits although permits are free, while another user
    /// plans at once; when one of its requests ends, its next one plans.
    #[tokio::test]
    async fn a_user_plans_at_most_its_cap_at_once_and_the_rest_waits_without_cpu() {
        let q = FairQueue::new(16, 8).with_planning_per_user(2);
        let mut a: Vec<PlanningPermit> =
            futures::future::join_all((0..2).map(|_| q.admit("a").unwrap().into_permit())).await;
        let mut a3 = tokio::spawn(q.admit("a").unwrap().into_permit());
        assert!(granted(&mut a3).await.is_none(), "a is at its cap: it waits, 14 permits free");
        let mut b = tokio::spawn(q.admit("b").unwrap().into_permit());
        let _b = granted(&mut b).await.expect("b plans at once");
        drop(a.remove(0));
        assert!(granted(&mut a3).await.is_some(), "then a's next");
    }

    #[tokio::test]
    async fn a_permit_goes_to_the_user_with_the_fewest_planning() {
        let q = FairQueue::new(3, 100);
        let mut a: Vec<PlanningPermit> =
            futures::future::join_all((0..3).map(|_| q.admit("a").unwrap().into_permit())).await;
        let mut a4 = tokio::spawn(q.admit("a").unwrap().into_permit());
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut b = tokio::spawn(q.admit("b").unwrap().into_permit());
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(a.remove(0));
        // a queued first, but a still plans 2 and b none: b gets it.
        let _b = granted(&mut b).await.expect("b starts");
        assert!(granted(&mut a4).await.is_none());
    }
}
