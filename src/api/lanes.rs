//! The background lane of the all-in-one's planning: the plan requests of a user who already
//! has others in flight are planned on threads of their own, fewer than the cores, and at most
//! as many at once as the lane has threads, so that one user's flood takes the cores the others
//! leave, not the core they need.
//!
//! All-in-one, planning is CPU-bound (the participants are in process) and a 64-job
//! co-allocation books a few thousand messages. The fair queue ([`crate::api::fair`]) bounds
//! how many of one user's requests plan at once, but on a machine with few cores those few
//! still competed with another user's small request on equal terms: the small request waited
//! for the searches' time slices on the HTTP worker threads and on the cores (issue 49: another
//! user's p99 rose from 18 ms alone to seconds under one user's 48 connections). So a request is
//! admitted to one of two lanes ([`crate::api::fair::Admission::background`]):
//!
//! - **foreground**: a user's request while none of theirs is in flight plans where it was
//!   received (the HTTP worker), as before;
//! - **background**: a request of a user who has others in flight (a batch, a flood) plans on
//!   this lane's threads, `cores - 1` of them (at least 1), and holds one of the lane's slots
//!   ([`BackgroundLane::slot`], as many as its threads) from its search to its last database
//!   write: the background requests of every user together keep at most `cores - 1` cores and
//!   as many database connections busy, and the foreground always has a core.
//!
//! The lane's threads run at the process's priority. They ran at `nice 19` first, which let the
//! flood have only idle CPU but inverted priorities: a background search holds a participant's
//! lock (the NIS's, a LIS's) for microseconds at a time, thousands of times per request, and a
//! thread of the lowest priority preempted while holding it left a small request waiting for
//! it until the kernel ran that thread again. On a busy machine that was tens of milliseconds:
//! the small request's own planning time (`planning_ms`) rose from a p99 of 0.7 ms alone to
//! 28-95 ms under a flood, and to 5-13 ms with the lane's threads at the normal priority
//! (`cargo bench --bench fairness`, BENCHMARKS.md).
//!
//! A planner process (remote participants) waits on the network, not the CPU: it has no
//! background lane and plans every request in the foreground.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The background lane: a tokio runtime of its own threads, and as many slots.
pub struct BackgroundLane {
    runtime: Option<tokio::runtime::Runtime>,
    slots: Arc<Semaphore>,
}

impl BackgroundLane {
    /// A lane of `threads` threads (at least 1) and as many slots.
    ///
    /// # Errors
    /// The runtime's threads cannot be started.
    pub fn new(threads: usize) -> std::io::Result<BackgroundLane> {
        let threads = threads.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("coreserve-background")
            .enable_all()
            .build()?;
        Ok(BackgroundLane { runtime: Some(runtime), slots: Arc::new(Semaphore::new(threads)) })
    }

    /// The lane's threads (and slots) on a machine of `cores` cores: all but one, at least 1.
    pub fn threads_for(cores: usize) -> usize {
        cores.saturating_sub(1).max(1)
    }

    /// Runs `task` on the lane; its result (or its panic) comes back through the handle.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime.as_ref().expect("a lane runs until dropped").spawn(task)
    }

    /// Waits for one of the lane's slots (first come, first served): a background request
    /// holds it from its search to its last write, so that at most as many of them as the lane
    /// has threads are in progress at once, also while they wait for the database.
    pub async fn slot(&self) -> OwnedSemaphorePermit {
        self.slots.clone().acquire_owned().await.expect("the lane's semaphore is never closed")
    }
}

impl Drop for BackgroundLane {
    fn drop(&mut self) {
        // Dropped from within another runtime (the service's state goes with its server):
        // shut down without waiting for the lane's tasks.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_lane_leaves_one_core_to_the_foreground() {
        assert_eq!(BackgroundLane::threads_for(1), 1);
        assert_eq!(BackgroundLane::threads_for(2), 1);
        assert_eq!(BackgroundLane::threads_for(16), 15);
    }

    /// Issue 49: the lane's threads run at the process's priority (at `nice 19` a preempted
    /// background search held a participant's lock that foreground requests waited for).
    #[test]
    fn the_lanes_threads_run_at_the_process_priority() {
        let lane = BackgroundLane::new(1).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // SAFETY: getpriority takes plain integers (0: the calling thread on Linux).
        let here = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let there = rt.block_on(lane.spawn(async { unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) } }));
        assert_eq!(there.unwrap(), here);
        rt.block_on(async move { drop(lane) });
    }

    /// Issue 49: at most as many background requests as the lane has slots are in progress at
    /// once, also while they wait (for the database, say) without using their thread.
    #[test]
    fn at_most_as_many_requests_as_slots_are_in_progress_also_across_waits() {
        let lane = Arc::new(BackgroundLane::new(2).unwrap());
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (l, now, most) = (lane.clone(), now.clone(), most.clone());
                lane.spawn(async move {
                    let _slot = l.slot().await;
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        rt.block_on(async {
            for t in tasks {
                t.await.unwrap();
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 2, "two slots: two at once, never more");
        rt.block_on(async move { drop(lane) });
    }
}
