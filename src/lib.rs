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
//! Layers (dependencies point one way, downwards):
//!
//! ```text
//! api, cli, replay (and sim/)  the edges: REST service, command line, request replay, simulator
//!   planner                    the paper's search (Figs. 2-3) and the 2PC coordinator; it sees
//!                              participants only through protocol (and uses a calendar of its
//!                              own for BBR's overlay)
//!   store                      implements protocol's Journal and keeps the decision log, plans,
//!                              keys and tokens (memory or PostgreSQL; one trait per concern,
//!                              `Store` is all of them)
//!   gis, lis, nis              the participants: implement protocol's traits over calendars
//!   protocol                   Participant and Catalogue traits, the hold book and the
//!                              bookkeeping the LIS and NIS share over it (`bookkeeping`), the
//!                              participant journal, the decision log and its records
//!                              (`decision`), transports
//!   calendar                   capacity calendars, one resource or several on one timeline
//!   model                      validated domain types
//! ```
//!
//! Beside the stack, on `model` only: `clock` (the time source, wall or manual, that protocol's
//! leases, the participants, the planner and the service read), `fairshare` (allocations, usage
//! and priority, read by the planner and the service and persisted by the store), and `grid`,
//! `workload` and `check` (importers, generators, the outcome checker, which also reads
//! fairshare's allocations). `in_process` wires every participant in one process. Below the
//! planner nothing imports it (tests excepted).

pub mod api;
pub mod calendar;
pub mod check;
pub mod cli;
pub mod clock;
pub mod fairshare;
pub mod gis;
pub mod grid;
pub mod in_process;
pub mod lis;
pub mod model;
pub mod nis;
pub mod planner;
pub mod protocol;
pub mod replay;
pub mod store;
pub mod workload;
