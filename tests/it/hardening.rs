//! Issue 28, point 5 (the service's part) and point 4: every error is a problem, bad
//! configurations are errors rather than panics, one `Authorization` header, principals that
//! are not display names. Each test fails without its fix.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{problem, TestApp, ADMIN};

/// A body over the limit is a 413 problem (RFC 9457) on every endpoint that reads its body
/// raw after checking the caller's role, not actix's text/plain answer.
#[tokio::test]
async fn an_oversized_body_is_a_413_problem_everywhere() {
    let app = TestApp::spawn().await;
    let huge = format!("{{\"x\": \"{}\"}}", "x".repeat(5 * 1024 * 1024));
    for (method, path) in [
        (reqwest::Method::POST, "/v1/tokens"),
        (reqwest::Method::PUT, "/v1/sites/s1"),
        (reqwest::Method::PUT, "/v1/projects/p1"),
        (reqwest::Method::POST, "/v1/sites/s1/holds"),
        (reqwest::Method::POST, "/v1/network/holds"),
        (reqwest::Method::POST, "/v1/plans"),
    ] {
        let r = app
            .client
            .request(method.clone(), format!("{}{path}", app.base))
            .bearer_auth(ADMIN)
            .header("content-type", "application/json")
            .body(huge.clone())
            .send()
            .await
            .unwrap();
        let p = problem(r, StatusCode::PAYLOAD_TOO_LARGE).await;
        assert!(p["detail"].as_str().unwrap().contains("limit"), "{method} {path}: {p}");
    }
}

/// Two `Authorization` headers: 400, whichever comes first (the first used to win).
#[tokio::test]
async fn two_authorization_headers_are_a_400_problem() {
    let app = TestApp::spawn().await;
    let alice = app.token("alice", false).await;
    for (first, second) in [(ADMIN, alice.as_str()), (alice.as_str(), ADMIN), (ADMIN, ADMIN)] {
        let r = app
            .client
            .get(format!("{}/v1/plans", app.base))
            .header("authorization", format!("Bearer {first}"))
            .header("authorization", format!("Bearer {second}"))
            .send()
            .await
            .unwrap();
        let p = problem(r, StatusCode::BAD_REQUEST).await;
        assert!(p["detail"].as_str().unwrap().contains("Authorization"), "{p}");
    }
    assert_eq!(app.get("/v1/plans", &alice).await.status(), StatusCode::OK, "one header is fine");
}

/// Issue 28, point 4: a token for user `admin` (or `" admin"`, once silently trimmed into it)
/// cannot be issued, so no plain token reads or cancels the admin's plans; names are never
/// trimmed; reserved names are refused whatever their case.
#[tokio::test]
async fn reserved_and_untrimmed_principal_names_cannot_be_issued() {
    let app = TestApp::spawn().await;
    let r = app.post("/v1/plans", ADMIN, &crate::support::workflow()).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    for user in ["admin", " admin", "admin ", "ADMIN", "service", "@planners", "@anything", "root"] {
        let r = app.post("/v1/tokens", ADMIN, &json!({"user": user})).await;
        let p = problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
        assert!(p["detail"].as_str().unwrap().contains("user"), "{user:?}: {p}");
    }
    let r = app.post("/v1/tokens", ADMIN, &json!({"user": "alice", "expires_at": "2000-01-01T00:00:00Z"})).await;
    problem(r, StatusCode::UNPROCESSABLE_ENTITY).await;
    // A valid name: its token sees none of the admin's plans.
    let alice = app.token("alice", false).await;
    assert!(app.plans(&alice, "").await.is_empty());
    let who: Value = app.get("/v1/whoami", &alice).await.json().await.unwrap();
    assert_eq!(
        (who["user"].as_str(), who["admin"].as_bool(), who["planner"].as_bool()),
        (Some("alice"), Some(false), Some(false))
    );
    assert!(who["token_id"].is_string(), "{who}");
}

/// `coreserve serve ARGS` (memory store): exit code and stderr. A process still running after
/// 20 s (it accepted the configuration and serves) is killed and reported as exit code -2, so
/// that an accepted bad setting fails the test instead of hanging it.
fn serve_fails(args: &[&str]) -> (i32, String) {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .arg("serve")
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("CORESERVE_ADMIN_TOKEN")
        .env_remove("CORESERVE_WORKERS")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let started = std::time::Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            break -2;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    (code, reader.join().unwrap())
}

/// `--workers 0` or `100000` and a one-character admin token are configuration errors (exit
/// code 1, like a bad `--lease-s`), not a panic (exit 101) or a guessable admin token.
#[tokio::test]
async fn bad_workers_and_short_tokens_are_configuration_errors() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    let grid = grid.to_str().unwrap().to_owned();
    let base = ["--grid", grid.as_str(), "--listen", "127.0.0.1:0"];
    let (reference, _) = tokio::task::spawn_blocking({
        let base = base.map(str::to_owned);
        move || serve_fails(&[&base[0], &base[1], &base[2], &base[3], "--lease-s", "0"])
    })
    .await
    .unwrap();
    for (extra, says) in [
        (vec!["--workers", "0"], "--workers"),
        (vec!["--workers", "100000"], "--workers"),
        (vec!["--admin-token", "x"], "at least 16"),
        (vec!["--admin-token", "0123456789abcde"], "at least 16"),
        (vec!["--admin-token", "0123456789abcdef", "--service-token", "short"], "--service-token"),
    ] {
        let args: Vec<String> = base.iter().map(|s| s.to_string()).chain(extra.iter().map(|s| s.to_string())).collect();
        let (code, stderr) = tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            serve_fails(&args)
        })
        .await
        .unwrap();
        assert_eq!(code, reference, "{extra:?}: exit code of a configuration error; stderr: {stderr}");
        assert_ne!(code, 101, "{extra:?} panicked: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{extra:?}: {stderr}");
    }
}

/// Reads `child`'s stderr to its end on a thread of its own (a closed pipe would stop the
/// service) until `serve` says where it listens: the lines still to come, the lines so far and
/// the URL it serves on. Panics if it does not within 20 s.
fn listening(child: &mut std::process::Child) -> (std::sync::mpsc::Receiver<String>, Vec<String>, String) {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    loop {
        let line = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("serve starts");
        let url = line.find(" on http://").map(|i| line[i + 4..].split_whitespace().next().unwrap().to_owned());
        said.push(line);
        if let Some(url) = url {
            return (rx, said, url);
        }
    }
}

/// Issue 29: a generated admin token never goes into the log stream. `serve` without
/// `--admin-token`, JSON logs, stdout and stderr piped (as under systemd): neither stream holds
/// the token; a notice names a file only its owner may read, and the token in it is the admin's.
#[tokio::test]
async fn a_generated_admin_token_is_never_in_the_log() {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .args(["serve", "--log-format", "json", "--grid", grid.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env_remove("DATABASE_URL")
        .env_remove("CORESERVE_ADMIN_TOKEN")
        .env("TMPDIR", dir.path())
        .env("RUST_LOG", "debug")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let (rx, mut said, url) = listening(&mut child);
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("coreserve-admin-token-"))
        .unwrap_or_else(|| panic!("no token file; stderr: {said:?}"));
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert!(token.len() >= 16, "{token:?}");
    assert!(said.iter().any(|l| l.contains(&*file.to_string_lossy())), "a notice names the file: {said:?}");
    coreserve::protocol::http::install_crypto_provider();
    let who: Value = reqwest::Client::new()
        .get(format!("{url}/v1/whoami"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(who["admin"], true, "{who}");
    let _ = child.kill();
    let _ = child.wait();
    said.extend(rx.iter());
    assert!(said.iter().any(|l| l.contains("whoami")), "the access log is read too: {said:?}");
    assert!(!said.iter().any(|l| l.contains(&token)), "the token is in the log: {said:?}");
    assert!(!stdout.join().unwrap().contains(&token), "the token is on (piped) stdout");
}

/// Issue 50: `SIGTERM` stops `serve` whole: the HTTP server stops (the requests in flight
/// finish), then every background task, and the process exits 0, within seconds.
#[tokio::test]
async fn sigterm_stops_the_server_then_every_background_task_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let grid = dir.path().join("grid.json");
    std::fs::write(&grid, serde_json::to_string(&crate::support::grid()).unwrap()).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coreserve"))
        .args(["serve", "--grid", grid.to_str().unwrap(), "--listen", "127.0.0.1:0", "--admin-token", ADMIN])
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (rx, mut said, url) = listening(&mut child);
    coreserve::protocol::http::install_crypto_provider();
    let metrics = reqwest::get(format!("{url}/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("coreserve_background_running{task=\"claim_renewal\"} 1"), "{metrics}");

    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill(2) on our own child, not waited for yet.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("serve did not exit within 20 s of SIGTERM: {said:?}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    said.extend(rx.iter());
    assert!(status.success(), "{status}: {said:?}");
    let stopped = said.iter().position(|l| l.contains("background tasks stopped"));
    let stopped = stopped.unwrap_or_else(|| panic!("the tasks were not stopped: {said:?}"));
    assert!(said[stopped].contains("aborted=0"), "every task ended its round in time: {}", said[stopped]);
}
