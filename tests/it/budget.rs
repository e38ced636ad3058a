//! Issue 52's guard: the durable PostgreSQL transactions a plan costs, counted on a cluster of
//! the test's own (nothing else writes there, so the transaction ids PostgreSQL hands out are the
//! deployment's), with the load bench's requests and deployments
//! (`coreserve_loadtest::budget`). A count does not depend on the machine's speed, so a change
//! that adds a transaction per plan fails here, not months later in a benchmark nobody re-ran.
//!
//! The budgets: the all-in-one writes the plan, its decision, its events and its reservations
//! in one transaction; the role-separated deployment writes at most 3 per participant a plan
//! touches (each participant's persist and commit, and the planner's decision and end, spread
//! over them).

use std::path::Path;

use coreserve_loadtest::budget::{count_transactions, Counted};
use coreserve_loadtest::deploy::Mode;
use coreserve_loadtest::Paths;

use crate::support::cluster::PgCluster;
use crate::support::machine;

const PLANS: usize = 40;

fn paths() -> Paths {
    Paths {
        coreserve: env!("CARGO_BIN_EXE_coreserve").into(),
        data: Path::new(env!("CARGO_MANIFEST_DIR")).join("data"),
        previous: None,
    }
}

/// The deployment `mode` counted over [`PLANS`] plans on a cluster of this test's own, with
/// autovacuum off; most plans must commit (the grid starts empty).
async fn counted(mode: Mode) -> Counted {
    let _machine = machine::reserve("budget").await;
    let mut cluster = PgCluster::new();
    cluster.restart_with("-c autovacuum=off");
    let url = cluster.url("postgres");
    let c =
        tokio::task::spawn_blocking(move || count_transactions(&paths(), &url, mode, PLANS)).await.unwrap().unwrap();
    eprintln!("{}: {c:?}", mode.name());
    assert!(c.committed > PLANS / 2, "most plans commit on an empty grid: {c:?}");
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn one_durable_transaction_per_plan_all_in_one() {
    let c = counted(Mode::AllInOne).await;
    assert!(c.write_xacts_per_plan <= 1.05, "one durable transaction per plan, counted {c:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn at_most_three_durable_transactions_per_participant_role_separated() {
    let c = counted(Mode::Roles).await;
    let per_participant = c.write_xacts_per_plan / c.participants_per_plan;
    assert!(per_participant <= 3.0, "at most 3 durable transactions per participant touched, counted {c:?}");
}
