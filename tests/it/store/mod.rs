//! The stores. [`contract`] is what every [`coreserve::store::Store`] keeps, written once; each
//! of its functions runs here against the memory store (`store::memory::NAME`) and PostgreSQL
//! (`store::postgresql::NAME`, on a fresh database of `#[sqlx::test]`). What only PostgreSQL
//! has (several processes on one database, migrations, the tables themselves) is in
//! [`postgres`].
//!
//! `#[sqlx::test]` creates its databases on the server of `DATABASE_URL` (`.ci/test` sets it)
//! and fails without one: these tests are never skipped.

mod contract;
mod postgres;

/// For each contract function `NAME`: `memory::NAME` and `postgresql::NAME`.
macro_rules! both_stores {
    ($($name:ident),* $(,)?) => {
        mod memory {
            use coreserve::store::{MemoryStore, Store};
            $(
                #[tokio::test]
                async fn $name() {
                    let store = MemoryStore::new();
                    assert_eq!(store.kind(), "memory");
                    super::contract::$name(&store).await;
                }
            )*
        }

        mod postgresql {
            use coreserve::store::{PgStore, Store};
            use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
            use sqlx::ConnectOptions;
            $(
                // A fresh, empty database: the store migrates it as a server's first start does.
                #[sqlx::test(migrations = false)]
                async fn $name(_: PgPoolOptions, db: PgConnectOptions) {
                    let store = PgStore::connect(db.to_url_lossy().as_str()).await.unwrap();
                    assert_eq!(store.kind(), "postgres");
                    super::contract::$name(&store).await;
                    // Closed before #[sqlx::test] drops the database.
                    store.pool().close().await;
                }
            )*
        }
    };
}

both_stores!(
    plans_are_stored_listed_in_order_filtered_and_cancelled_once,
    tokens_are_stored_by_hash_and_replaced,
    a_key_is_claimed_by_one_request_at_a_time,
    a_decided_transaction_is_settled_by_one_claim_at_a_time,
    plan_states_follow_the_clock_and_each_change_is_one_event,
    each_job_and_transfer_start_and_end_is_one_event,
    a_modification_that_ends_broken_leaves_its_plan_broken_in_one_write,
    finished_plans_are_pruned_after_the_horizon_and_booked_ones_never,
    a_journal_entry_is_legal_only_from_the_states_it_may_follow,
);
