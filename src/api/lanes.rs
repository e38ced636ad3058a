//! The background lane of the all-in-one's planning: the plan requests of a user who already
//! has others in flight are planned on threads of the lowest CPU priority, so that one user's
//! flood takes the CPU the others leave, not the CPU they need.
//!
//! All-in-one, planning is CPU-bound (the participants are in process) and a 64-job search
//! takes about a second of it. The fair queue ([`crate::api::fair`]) bounds how many of one
//! user's requests plan at once, but on a machine with few cores those few still compete with
//! another user's small request on equal terms: the small request waited for the searches'
//! time slices on the HTTP worker threads and on the cores (issue 49: another user's p99 rose
//! from 18 ms alone to seconds under one user's 48 connections). So a request is admitted to
//! one of two lanes ([`crate::api::fair::Admission::background`]):
//!
//! - **foreground**: a user's request while none of theirs is in flight plans where it was
//!   received (the HTTP worker, normal priority), as before;
//! - **background**: a request of a user who has others in flight (a batch, a flood) plans on
//!   this lane's threads, which run at `nice` 19: the kernel gives them every cycle no
//!   foreground thread wants, and takes the core back as soon as one does. Nothing is refused
//!   or slowed while the machine has idle cores.
//!
//! A planner process (remote participants) waits on the network, not the CPU: it has no
//! background lane and plans every request in the foreground.

use std::future::Future;

/// The background lane: a tokio runtime whose threads run at the lowest CPU priority.
pub struct BackgroundLane {
    runtime: Option<tokio::runtime::Runtime>,
}

/// The `nice` value of the background lane's threads (the lowest priority).
pub const BACKGROUND_NICE: i32 = 19;

impl BackgroundLane {
    /// A lane of `threads` threads (at least 1) at [`BACKGROUND_NICE`].
    ///
    /// # Errors
    /// The runtime's threads cannot be started.
    pub fn new(threads: usize) -> std::io::Result<BackgroundLane> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("coreserve-background")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()?;
        Ok(BackgroundLane { runtime: Some(runtime) })
    }

    /// Runs `task` on the lane; its result (or its panic) comes back through the handle.
    pub fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime.as_ref().expect("a lane runs until dropped").spawn(task)
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

/// Sets the calling thread's `nice` value to [`BACKGROUND_NICE`] (Linux: per thread). A failure
/// is logged and ignored: the lane then runs at the normal priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and setpriority take plain integers, touch no memory of ours and have
        // no preconditions; with PRIO_PROCESS and a thread id, Linux sets that thread's nice.
        let failed = unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::setpriority(libc::PRIO_PROCESS, tid, BACKGROUND_NICE) != 0
        };
        if failed {
            tracing::warn!(error = %std::io::Error::last_os_error(), "background planning thread: nice not set");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lane_runs_tasks_on_threads_of_the_lowest_priority() {
        let lane = BackgroundLane::new(1).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let nice = rt.block_on(lane.spawn(async {
            // SAFETY: getpriority takes plain integers (0: the calling thread on Linux).
            unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
        }));
        assert_eq!(nice.unwrap(), BACKGROUND_NICE);
        rt.block_on(async move { drop(lane) });
    }
}
