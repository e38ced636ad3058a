//! Retention (`--retention-days`) on PostgreSQL, run by the service itself: what finished
//! before the horizon goes (cancelled, rejected and completed plans with their keys, journal
//! rows and decisions; events every webhook has; old delivery log entries; released charges),
//! what is newer stays, and a plan that still holds reservations keeps everything.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection, Row};
use uuid::Uuid;

use crate::support::{in_hours, TestApp};

/// One 1-CPU job of an hour, as `id`.
fn small(id: &str) -> Value {
    json!({
        "id": id,
        "deadline": in_hours(24),
        "jobs": [{"name": "A", "os": "linux", "cpus": 1, "offset_s": 0, "duration_s": 3600}]
    })
}

/// A request no plan can meet (its deadline falls before the W interval plus the job).
fn too_tight(id: &str) -> Value {
    let mut body = small(id);
    body["deadline"] = json!((chrono::Utc::now() + chrono::Duration::seconds(3630)).to_rfc3339());
    body
}

/// Plans `body` as alice (with `key` as Idempotency-Key when given): its id.
async fn plan(app: &TestApp, alice: &str, body: Value, key: Option<&str>, status: &str) -> Uuid {
    let mut req = app.client.post(format!("{}/v1/plans", app.base)).bearer_auth(alice).json(&body);
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], status, "{v}");
    v["id"].as_str().unwrap().parse().unwrap()
}

async fn count(conn: &mut PgConnection, sql: &str, plan: Uuid) -> i64 {
    sqlx::query(sql).bind(plan).fetch_one(conn).await.unwrap().get(0)
}

async fn scalar(conn: &mut PgConnection, sql: &str) -> i64 {
    sqlx::query(sql).fetch_one(conn).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_prunes_what_finished_before_the_horizon_and_never_a_booked_plan() {
    let app = TestApp::spawn_with(|c| {
        c.retention_days = 30;
        c.retention_every_s = 1;
    })
    .await;
    let alice = app.token("alice", false).await;
    // Booked, kept: committed (made "long ago"), and broken with a journal and a decision in
    // the past.
    let committed = plan(&app, &alice, small("committed"), None, "committed").await;
    let broken = plan(&app, &alice, small("broken"), None, "committed").await;
    // Finished before the horizon: pruned.
    let old_cancelled = plan(&app, &alice, small("old-cancelled"), Some("old-key"), "committed").await;
    let old_rejected = plan(&app, &alice, too_tight("old-rejected"), None, "rejected").await;
    let old_completed = plan(&app, &alice, small("old-completed"), None, "committed").await;
    // Finished within the horizon: kept.
    let new_cancelled = plan(&app, &alice, small("new-cancelled"), Some("new-key"), "committed").await;
    let new_rejected = plan(&app, &alice, too_tight("new-rejected"), None, "rejected").await;
    let new_completed = plan(&app, &alice, small("new-completed"), None, "committed").await;
    for id in [old_cancelled, new_cancelled] {
        assert_eq!(app.delete(&format!("/v1/plans/{id}"), &alice).await.status(), StatusCode::OK);
    }

    let mut db = PgConnection::connect(app.db_url()).await.unwrap();
    let journal = "SELECT count(*) FROM reservations WHERE plan_id = $1";
    let decisions = "SELECT count(*) FROM transactions WHERE plan_id = $1";
    for id in [committed, broken, old_cancelled, old_completed, new_cancelled, new_completed] {
        assert!(count(&mut db, journal, id).await >= 1, "{id} has journal rows");
        assert!(count(&mut db, decisions, id).await >= 1, "{id} has a decision");
    }
    let booked_rows = (count(&mut db, journal, committed).await, count(&mut db, journal, broken).await);

    // Age the rows, in one transaction (the service prunes every second meanwhile).
    let mut tx = db.begin().await.unwrap();
    let old = "now() - interval '40 days'";
    let recent = "now() - interval '1 day'";
    for sql in [
        format!("UPDATE plans SET created_at = {old} WHERE id IN ($1, $2)"),
        format!("UPDATE transactions SET finished_at = {old} WHERE plan_id IN ($1, $2)"),
    ] {
        sqlx::query(&sql).bind(committed).bind(broken).execute(&mut *tx).await.unwrap();
    }
    let statements: Vec<(String, Uuid)> = vec![
        ("UPDATE plans SET status = 'broken' WHERE id = $1".to_owned(), broken),
        (
            format!("UPDATE reservations SET start_at = {old} - interval '1 hour', end_at = {old} WHERE plan_id = $1"),
            broken,
        ),
        (format!("UPDATE plans SET cancelled_at = {old} WHERE id = $1"), old_cancelled),
        (format!("UPDATE reservations SET updated_at = {old} WHERE plan_id = $1"), old_cancelled),
        (format!("UPDATE transactions SET finished_at = {old} WHERE plan_id = $1"), old_cancelled),
        (format!("UPDATE plans SET created_at = {old} WHERE id = $1"), old_rejected),
        (format!("UPDATE plans SET status = 'completed', last_end = {old} WHERE id = $1"), old_completed),
        (format!("UPDATE reservations SET end_at = {old} WHERE plan_id = $1"), old_completed),
        (format!("UPDATE transactions SET finished_at = {old} WHERE plan_id = $1"), old_completed),
        (format!("UPDATE plans SET cancelled_at = {recent} WHERE id = $1"), new_cancelled),
        (format!("UPDATE reservations SET updated_at = {recent} WHERE plan_id = $1"), new_cancelled),
        (format!("UPDATE plans SET created_at = {recent} WHERE id = $1"), new_rejected),
        (format!("UPDATE plans SET status = 'completed', last_end = {recent} WHERE id = $1"), new_completed),
        (format!("UPDATE reservations SET end_at = {recent} WHERE plan_id = $1"), new_completed),
    ];
    for (sql, id) in &statements {
        sqlx::query(sql).bind(id).execute(&mut *tx).await.unwrap();
    }
    // Every event is old; one webhook has acknowledged the first half of them: only those go.
    sqlx::query(&format!("UPDATE plan_events SET at = {old}")).execute(&mut *tx).await.unwrap();
    // Ids grow but are not dense (migrations/0024_event_ids_without_lock.sql): the cursor is
    // the id of the middle event, `acked` the events up to it.
    let events: i64 = sqlx::query("SELECT count(*) FROM plan_events").fetch_one(&mut *tx).await.unwrap().get(0);
    let cursor: i64 = sqlx::query("SELECT id FROM plan_events ORDER BY id OFFSET $1 LIMIT 1")
        .bind(events / 2 - 1)
        .fetch_one(&mut *tx)
        .await
        .unwrap()
        .get(0);
    let acked = events / 2;
    let webhook = Uuid::new_v4();
    let owner: Uuid =
        sqlx::query("SELECT owner FROM plans WHERE id = $1").bind(committed).fetch_one(&mut *tx).await.unwrap().get(0);
    sqlx::query(
        r#"INSERT INTO webhooks (id, owner, "user", admin, url, secret, created_at, enabled, cursor, attempts, next_attempt_at)
           VALUES ($1, $2, 'alice', false, 'http://127.0.0.1:9/hook', 'secret', now(), true, $3, 0, now() + interval '1 day')"#,
    )
    .bind(webhook)
    .bind(owner)
    .bind(cursor)
    .execute(&mut *tx)
    .await
    .unwrap();
    for at in [old, recent] {
        sqlx::query(&format!(
            "INSERT INTO webhook_deliveries (webhook_id, event_id, at, attempt, duration_ms) VALUES ($1, 1, {at}, 1, 1.0)"
        ))
        .bind(webhook)
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    sqlx::query(&format!("UPDATE allocation_charges SET released_at = {old} WHERE plan_id = $1"))
        .bind(old_cancelled)
        .execute(&mut *tx)
        .await
        .unwrap();
    let released_old =
        scalar(&mut tx, "SELECT count(*) FROM allocation_charges WHERE released_at < now() - interval '30 days'").await;
    let charges_before = scalar(&mut tx, "SELECT count(*) FROM allocation_charges").await;
    tx.commit().await.unwrap();

    // The service's next round (every second) prunes it all.
    let started = Instant::now();
    loop {
        if app.gauge("coreserve_retention_pruned_total{kind=\"plans\"}").await >= 3 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no pruning within 30 s:\n{}", app.metrics().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let left: BTreeSet<Uuid> =
        sqlx::query("SELECT id FROM plans").fetch_all(&mut db).await.unwrap().iter().map(|r| r.get(0)).collect();
    let kept: BTreeSet<Uuid> = [committed, broken, new_cancelled, new_rejected, new_completed].into();
    assert_eq!(left, kept, "the finished plans older than 30 days went, no other");
    for id in [old_cancelled, old_rejected, old_completed] {
        assert_eq!(count(&mut db, journal, id).await, 0, "{id}'s journal rows went");
        assert_eq!(count(&mut db, decisions, id).await, 0, "{id}'s decision went");
        assert_eq!(app.get(&format!("/v1/plans/{id}"), &alice).await.status(), StatusCode::NOT_FOUND);
    }
    assert_eq!((count(&mut db, journal, committed).await, count(&mut db, journal, broken).await), booked_rows);
    for id in [committed, broken] {
        assert_eq!(count(&mut db, decisions, id).await, 1, "a booked plan's decision stays, however old");
    }
    for id in [new_cancelled, new_completed] {
        assert!(count(&mut db, journal, id).await >= 1, "{id}'s recent journal rows stay");
    }
    let plan_view = app.json(&format!("/v1/plans/{broken}"), &alice).await;
    assert_eq!(plan_view["status"], "broken");
    let keys: BTreeSet<String> = sqlx::query("SELECT key FROM idempotency_keys")
        .fetch_all(&mut db)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(keys, ["new-key".to_owned()].into(), "the key of the pruned plan went");
    assert_eq!(scalar(&mut db, &format!("SELECT count(*) FROM plan_events WHERE id <= {cursor}")).await, 0);
    let newer = scalar(&mut db, &format!("SELECT count(*) FROM plan_events WHERE id > {cursor}")).await;
    assert!(newer >= events - acked, "events the webhook has not had stay: {newer}");
    assert_eq!(scalar(&mut db, "SELECT count(*) FROM webhook_deliveries").await, 1, "the recent delivery stays");
    assert_eq!(scalar(&mut db, "SELECT count(*) FROM allocation_charges").await, charges_before - released_old);

    let text = app.metrics().await;
    let pruned = |kind: &str| app_metric(&text, &format!("coreserve_retention_pruned_total{{kind=\"{kind}\"}}"));
    assert_eq!(pruned("plans"), 3);
    assert_eq!(pruned("idempotency_keys"), 1);
    assert_eq!(pruned("events"), acked as u64);
    assert_eq!(pruned("deliveries"), 1);
    assert!(pruned("journal") >= 2 && pruned("decisions") >= 2);
    eprintln!(
        "retention: pruned {} plans, {} keys, {} journal rows, {} decisions, {} events, {} deliveries, {} charges",
        pruned("plans"),
        pruned("idempotency_keys"),
        pruned("journal"),
        pruned("decisions"),
        pruned("events"),
        pruned("deliveries"),
        pruned("charges")
    );
}

/// The value of sample `series` in `text`.
fn app_metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

/// Off by default: a service without `retention_days` prunes nothing, however old.
#[tokio::test]
async fn retention_is_off_by_default() {
    let app = TestApp::spawn().await;
    assert_eq!(app.state.config.retention_days, 0);
    let alice = app.token("alice", false).await;
    let id = plan(&app, &alice, too_tight("old"), None, "rejected").await;
    let mut db = PgConnection::connect(app.db_url()).await.unwrap();
    sqlx::query("UPDATE plans SET created_at = now() - interval '10 years' WHERE id = $1")
        .bind(id)
        .execute(&mut db)
        .await
        .unwrap();
    let pruned = coreserve::api::supervisor::prune_store(&app.state).await.unwrap();
    assert_eq!(pruned.total(), 0);
    assert_eq!(app.get(&format!("/v1/plans/{id}"), &alice).await.status(), StatusCode::OK);
}
