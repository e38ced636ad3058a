//! The integration tests, in one binary (`it`): one module per area, sharing [`support`].
//!
//! One binary links once, where one binary per file linked a dozen times. Run one area with a
//! filter on its module path, e.g. `.ci/test --test it api::` or `.ci/test --test it store::`.

mod allocations;
mod api;
mod budget;
mod crash;
mod dataplane;
mod engine;
mod events;
mod faults;
mod hardening;
mod identity;
mod journal_props;
mod metrics;
mod modification;
mod planner_props;
mod real_data;
mod retention;
mod roles;
mod service_times;
mod slurm;
mod store;
mod support;
mod ui;
mod webhooks;
mod workflows;
