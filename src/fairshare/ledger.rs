//! [`Ledger`]: the allocations and the committed usage of one planning process, charged
//! atomically per project before a plan is decided, and the usage report of a project.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    check_limit, entitled_rate, linear_usage_index, priority, usage_index, Allocation, AllocationExceeded,
    FairShareConfig, FairShareError, PriorityFunction, Project, Usage, DAY_S,
};
use crate::model::Time;

/// What `GET /v1/projects/{id}/usage` shows: the project's allocation, its paper quantities
/// now, and its bookings in the current period.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UsageReport {
    pub project: String,
    /// Absent: the project has no allocation (not limited; entitled rate 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<Allocation>,
    /// `R_i`: CPUs the project is entitled to at its allocation's pace.
    pub entitled_cpus: f64,
    /// `u_i` (eq. 12); null when infinite (used something with no allocation).
    pub usage_index: Option<f64>,
    /// `p_i` (eq. 11): 0 at or under the planned pace, negative above; null when `u_i` is.
    pub priority: Option<f64>,
    /// The current allocation period (absent without an allocation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_start: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_end: Option<DateTime<Utc>>,
    /// CPU-hours of committed plans inside the current period (without an allocation: inside
    /// the 30 days from the last period boundary of the epoch).
    pub booked_cpu_hours: f64,
    pub booked_gpu_hours: f64,
    /// The allocation's CPU-hours (0 without one).
    pub allocated_cpu_hours: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_gpu_hours: Option<f64>,
}

#[derive(Default)]
struct State {
    projects: BTreeMap<String, Project>,
    /// user -> project, for the members named by projects.
    member_of: HashMap<String, String>,
    /// plan key -> (project, its jobs' usage).
    charged: HashMap<String, (String, Vec<Usage>)>,
}

impl State {
    fn project_of(&self, user: &str) -> String {
        self.member_of.get(user).cloned().unwrap_or_else(|| user.to_owned())
    }

    fn usages<'a>(&'a self, project: &'a str) -> impl Iterator<Item = &'a Usage> + 'a {
        self.charged.values().filter(move |(p, _)| p == project).flat_map(|(_, u)| u.iter())
    }

    /// CPU-hours and GPU-hours of the project inside `[a, b)`.
    fn booked(&self, project: &str, a: Time, b: Time) -> (f64, f64) {
        self.usages(project).fold((0.0, 0.0), |(c, g), u| {
            let (uc, ug) = u.inside(a, b);
            (c + uc / 3600.0, g + ug / 3600.0)
        })
    }

    fn total_pace(&self) -> f64 {
        self.projects.values().map(|p| p.allocation.cpu_hours / p.allocation.period_s as f64).sum()
    }
}

/// The allocations and committed usage of one planning process (see the module docs). All
/// methods take `&self`: it is shared by the planners and the API.
pub struct Ledger {
    cfg: FairShareConfig,
    grid_cpus: u64,
    state: Mutex<State>,
}

impl Ledger {
    /// No projects yet, on a grid of `grid_cpus` CPUs.
    pub fn new(cfg: FairShareConfig, grid_cpus: u64) -> Self {
        Ledger { cfg, grid_cpus, state: Mutex::new(State::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fair-share ledger")
    }

    /// The settings.
    pub fn config(&self) -> FairShareConfig {
        self.cfg
    }

    /// Creates or replaces a project (its members leave their previous project).
    ///
    /// # Errors
    /// [`FairShareError::Invalid`]: nothing changed.
    pub fn set_project(&self, p: Project) -> Result<(), FairShareError> {
        p.validate()?;
        let mut st = self.state();
        st.member_of.retain(|_, proj| *proj != p.id);
        for m in &p.members {
            st.member_of.insert(m.clone(), p.id.clone());
        }
        // A member moved here leaves the member list of its previous project.
        for other in st.projects.values_mut().filter(|o| o.id != p.id) {
            other.members.retain(|m| !p.members.contains(m));
        }
        st.projects.insert(p.id.clone(), p);
        Ok(())
    }

    /// The project named `id`, if it has an allocation.
    pub fn project(&self, id: &str) -> Option<Project> {
        self.state().projects.get(id).cloned()
    }

    /// Every project with an allocation, by id.
    pub fn projects(&self) -> Vec<Project> {
        self.state().projects.values().cloned().collect()
    }

    /// The project `user`'s plans count against.
    pub fn project_of(&self, user: &str) -> String {
        self.state().project_of(user)
    }

    /// Records a committed plan's usage for `user` under `key` (unique per plan; recording a
    /// key again replaces it). No limit is checked: restoring what is already booked.
    pub fn record(&self, key: &str, user: &str, usage: Vec<Usage>) {
        let mut st = self.state();
        let project = st.project_of(user);
        st.charged.insert(key.to_owned(), (project, usage));
    }

    /// Replaces every recorded usage by `charges` (plan key, project, usage): the store's live
    /// charges, which every planning process writes (the ledger is their cache).
    pub fn replace_charges(&self, charges: impl IntoIterator<Item = (String, String, Vec<Usage>)>) {
        self.state().charged = charges.into_iter().map(|(k, p, u)| (k, (p, u))).collect();
    }

    /// Forgets a plan's usage (cancelled, or not committed after all).
    pub fn forget(&self, key: &str) {
        self.state().charged.remove(key);
    }

    /// Charges a plan: checks the allocation limit of `user`'s project in every period the
    /// plan's jobs run in, and records the usage under `key` if it fits, atomically (two plans
    /// of one project cannot both take its last CPU-hours).
    ///
    /// # Errors
    /// [`AllocationExceeded`] for the first period and resource that would go over; nothing
    /// is recorded.
    pub fn charge(&self, key: &str, user: &str, usage: Vec<Usage>) -> Result<(), AllocationExceeded> {
        let mut st = self.state();
        let project = st.project_of(user);
        if let Some(p) = st.projects.get(&project) {
            let booked: Vec<Usage> = st.usages(&project).copied().collect();
            check_limit(p, &booked, &usage)?;
        }
        st.charged.insert(key.to_owned(), (project, usage));
        Ok(())
    }

    /// `s_i(n - m)` for m = 0, 1, ... (CPU-seconds of jobs started in each interval up to
    /// `now`, the newest first), as long as any usage is left.
    fn per_interval(&self, st: &State, project: &str, now: Time) -> Vec<f64> {
        let dt = self.cfg.interval_s;
        let n = now.div_euclid(dt);
        let mut by_m: BTreeMap<i64, f64> = BTreeMap::new();
        for u in st.usages(project).filter(|u| u.start <= now) {
            let m = n - u.start.div_euclid(dt);
            *by_m.entry(m).or_default() += (u.end - u.start) as f64 * f64::from(u.cpus);
        }
        let len = by_m.keys().next_back().map_or(0, |m| *m as usize + 1);
        let mut out = vec![0.0; len];
        for (m, s) in by_m {
            out[m as usize] = s;
        }
        out
    }

    /// `(R_i, u_i, p_i)` of `project` at `now`.
    fn index(&self, st: &State, project: &str, now: Time) -> (f64, f64, f64) {
        let pace = st.projects.get(project).map_or(0.0, |p| p.allocation.cpu_hours / p.allocation.period_s as f64);
        let rate = entitled_rate(pace, st.total_pace(), self.grid_cpus);
        let per_interval = self.per_interval(st, project, now);
        let dt = self.cfg.interval_s;
        match self.cfg.priority {
            PriorityFunction::PlannedUse => {
                let u = usage_index(rate, dt, self.cfg.decay_per_interval(), &per_interval);
                (rate, u, priority(u))
            }
            PriorityFunction::ExponentialDecay => {
                let u = usage_index(rate, dt, self.cfg.decay_per_interval(), &per_interval);
                (rate, u, -u)
            }
            PriorityFunction::LinearDecay { window_days } => {
                let u = linear_usage_index(rate, dt, window_days * DAY_S as f64, &per_interval);
                (rate, u, -u)
            }
        }
    }

    /// `p_i` of `user`'s project at `now` (`-inf` for a project with no allocation that used
    /// something). 0 for everyone while no project has an allocation: fair share is off and
    /// requests are served as before (without scanning the usage on every admission).
    pub fn priority_of(&self, user: &str, now: Time) -> f64 {
        let st = self.state();
        if st.projects.is_empty() {
            return 0.0;
        }
        let project = st.project_of(user);
        self.index(&st, &project, now).2
    }

    /// The usage report of `project` at `now`.
    pub fn report(&self, project: &str, now: Time) -> UsageReport {
        let st = self.state();
        let (rate, u, p) = self.index(&st, project, now);
        let allocation = st.projects.get(project).map(|p| p.allocation.clone());
        let (ps, pe) =
            allocation.as_ref().map_or_else(|| Allocation::cpu_hours(0.0).period_of(now), |a| a.period_of(now));
        let (booked_c, booked_g) = st.booked(project, ps, pe);
        UsageReport {
            project: project.to_owned(),
            entitled_cpus: rate,
            usage_index: u.is_finite().then_some(u),
            priority: p.is_finite().then_some(p),
            period_start: allocation.as_ref().map(|_| crate::model::from_time(ps)),
            period_end: allocation.as_ref().map(|_| crate::model::from_time(pe)),
            booked_cpu_hours: booked_c,
            booked_gpu_hours: booked_g,
            allocated_cpu_hours: allocation.as_ref().map_or(0.0, |a| a.cpu_hours),
            allocated_gpu_hours: allocation.as_ref().and_then(|a| a.gpu_hours),
            allocation,
        }
    }
}
