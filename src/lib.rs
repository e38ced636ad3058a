//! coreserve: an advance co-reservation broker.
//!
//! It books compute (CPUs at sites) and network bandwidth (links of a topology) together and
//! in advance, so that a multi-job application ends before its deadline. The algorithm is
//! Ando & Aida's ("Evaluation of Scheduling Algorithms for Advance Reservations"):
//! a backtracking search over the request graph with four selection policies and two
//! reservation methods (BBR, BIR). The design documents are in the repository's `docs/`
//! folder (start with `docs/README.md`): the model, the algorithm, the two-phase commit
//! protocol and the simulator, with the papers they cite.
//!
//! Layers (dependencies point one way):
//! `cli -> planner -> participants (gis, lis, nis, protocol) -> calendar -> model`; the service
//! `api -> (planner, local participants, store)`.

pub mod api;
pub mod calendar;
pub mod check;
pub mod cli;
pub mod clock;
pub mod gis;
pub mod grid;
pub mod lis;
pub mod local;
pub mod model;
pub mod nis;
pub mod planner;
pub mod protocol;
pub mod replay;
pub mod store;
pub mod workload;
