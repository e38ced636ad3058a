//! `coreserve webhooks ...`: add, list, deliveries, rm.

use anyhow::Result;
use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Value};

use super::render::{print_json, print_list, text};
use super::{problem_exit, Client, Connection, Output};

/// `coreserve webhooks ...`
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Register URL: every event of your plans from now on is POSTed to it, signed with the
    /// secret printed (HMAC-SHA256, header Coreserve-Signature); keep the secret.
    Add {
        /// An http or https URL.
        url: String,
        /// Your own secret (16-256 characters); default: a generated one.
        #[arg(long)]
        secret: Option<String>,
        #[command(flatten)]
        conn: Connection,
    },
    /// Your webhooks (an admin's: everyone's), with where their deliveries stand.
    #[command(visible_alias = "ls")]
    List {
        #[command(flatten)]
        conn: Connection,
    },
    /// One webhook's newest delivery attempts.
    Deliveries {
        /// The webhook's id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
    /// Delete a webhook: nothing more is sent to it.
    #[command(visible_alias = "remove")]
    Rm {
        /// The webhook's id.
        id: String,
        #[command(flatten)]
        conn: Connection,
    },
}

/// `coreserve webhooks ...`
pub async fn webhooks(cmd: WebhooksCommand) -> Result<()> {
    let opt =
        |v: &Value| v.as_str().map_or_else(|| v.as_i64().map_or_else(String::new, |n| n.to_string()), str::to_owned);
    match cmd {
        WebhooksCommand::Add { url, secret, conn } => {
            let c = Client::new(&conn)?;
            let mut body = json!({ "url": url });
            if let Some(s) = secret {
                body["secret"] = json!(s);
            }
            let a = c.send(Method::POST, &["v1", "webhooks"], &[], Some(&body), None).await?;
            if !a.status.is_success() {
                return Err(problem_exit(&a).into());
            }
            match conn.out() {
                Output::Json => print_json(&a.body),
                Output::Ids => outln!("{}", text(&a.body["id"])),
                Output::Table => {
                    outln!("webhook {} -> {}", text(&a.body["id"]), text(&a.body["url"]));
                    outln!(
                        "secret {} (shown once: verify each delivery's Coreserve-Signature with it)",
                        text(&a.body["secret"])
                    );
                }
            }
            Ok(())
        }
        WebhooksCommand::List { conn } => {
            let v = Client::new(&conn)?.call(Method::GET, &["v1", "webhooks"], &[]).await?;
            let header = ["webhook", "user", "url", "enabled", "delivered through", "failures", "last error"];
            let row = |w: &Value| {
                vec![
                    text(&w["id"]),
                    text(&w["user"]),
                    text(&w["url"]),
                    if w["enabled"] == true { "yes".into() } else { "DISABLED".into() },
                    opt(&w["delivered_through"]),
                    opt(&w["failures"]),
                    opt(&w["last_error"]),
                ]
            };
            print_list(&conn, &v, |w| text(&w["id"]), &header, row);
            Ok(())
        }
        WebhooksCommand::Deliveries { id, conn } => {
            let v = Client::new(&conn)?.call(Method::GET, &["v1", "webhooks", &id, "deliveries"], &[]).await?;
            let header = ["at (UTC)", "event", "attempt", "status", "error"];
            let row = |d: &Value| ["at", "event_id", "attempt", "status_code", "error"].map(|k| opt(&d[k])).to_vec();
            print_list(&conn, &v, |d| opt(&d["event_id"]), &header, row);
            Ok(())
        }
        WebhooksCommand::Rm { id, conn } => {
            let c = Client::new(&conn)?;
            c.call(Method::DELETE, &["v1", "webhooks", &id], &[]).await?;
            if conn.out() == Output::Table {
                outln!("webhook {id} deleted");
            }
            Ok(())
        }
    }
}
