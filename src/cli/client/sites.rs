//! `coreserve sites`, `availability` and `route`: what the broker's sites and network offer.

use anyhow::Result;
use chrono::{DateTime, Utc};
use clap::Args;
use reqwest::Method;
use serde_json::Value;

use super::render::{amount, print_json, print_list, rfc3339, text, time};
use super::{Client, Connection, Exit, Output, EXIT_REJECTED};
use crate::cli::when::{parse_duration, parse_time};

/// `coreserve availability`: the earliest start a site offers.
#[derive(Debug, Args)]
pub struct AvailabilityArgs {
    /// The site.
    pub site: String,
    /// CPUs wanted.
    #[arg(short = 'c', long)]
    pub cpus: u32,
    /// Seconds wanted.
    #[arg(short = 'd', long, alias = "duration", value_parser = parse_duration)]
    pub duration_s: i64,
    /// Window start (`now+1h`, RFC 3339; default: now). Nothing starts before now + the
    /// broker's w_interval, whatever the window.
    #[arg(long, value_parser = parse_time)]
    pub from: Option<DateTime<Utc>>,
    /// Window end: the job must end by then (`now+2d`, RFC 3339; default: 7 days after the
    /// start).
    #[arg(long, value_parser = parse_time)]
    pub to: Option<DateTime<Utc>>,
    #[command(flatten)]
    pub conn: Connection,
}

/// `coreserve route`: the NIS's path between two sites for a bandwidth over an interval.
#[derive(Debug, Args)]
pub struct RouteArgs {
    /// From this site.
    pub from_site: String,
    /// To this site.
    pub to_site: String,
    /// Bandwidth wanted, Mbit/s.
    #[arg(short = 'b', long)]
    pub bandwidth_mbps: u64,
    /// Interval start (`now+1h`, RFC 3339; default: in one hour).
    #[arg(long, value_parser = parse_time)]
    pub start: Option<DateTime<Utc>>,
    /// Interval end (`now+2h`, RFC 3339; default: one hour after the start).
    #[arg(long, value_parser = parse_time)]
    pub end: Option<DateTime<Utc>>,
    #[command(flatten)]
    pub conn: Connection,
}

/// `coreserve sites`: every site with its CPUs, OS, price and network node.
pub async fn sites(conn: Connection) -> Result<()> {
    let v = Client::new(&conn)?.call(Method::GET, &["v1", "sites"], &[]).await?;
    let row = |s: &Value| {
        vec![text(&s["id"]), text(&s["node"]), text(&s["cpus"]), text(&s["os"]), amount(&s["price_per_cpu_hour"])]
    };
    print_list(&conn, &v, |s| text(&s["id"]), &["site", "node", "cpus", "os", "price_per_cpu_hour"], row);
    Ok(())
}

/// `coreserve availability SITE --cpus N --duration-s S [--from T] [--to T]`.
pub async fn availability(a: AvailabilityArgs) -> Result<()> {
    let from = a.from.unwrap_or_else(Utc::now);
    let to = a.to.unwrap_or(from + chrono::Duration::days(7));
    let q = [
        ("from", rfc3339(from)),
        ("to", rfc3339(to)),
        ("cpus", a.cpus.to_string()),
        ("duration_s", a.duration_s.to_string()),
    ];
    let v = Client::new(&a.conn)?.call(Method::GET, &["v1", "sites", &a.site, "availability"], &q).await?;
    match a.conn.out() {
        Output::Json => print_json(&v),
        Output::Ids => {
            if let Some(t) = v["earliest_start"].as_str() {
                outln!("{t}");
            }
        }
        Output::Table => {
            let start = if v["earliest_start"].is_null() {
                "none in the window".to_string()
            } else {
                format!("{} UTC", time(&v["earliest_start"]))
            };
            outln!(
                "site {}: earliest start of {} CPUs for {} s: {start}; utilisation {:.1} %; {} per CPU-hour",
                text(&v["site"]),
                a.cpus,
                a.duration_s,
                v["utilisation"].as_f64().unwrap_or(0.0) * 100.0,
                amount(&v["price_per_cpu_hour"])
            );
        }
    }
    Ok(())
}

/// `coreserve route FROM TO --bandwidth-mbps B [--start T] [--end T]`.
pub async fn route(a: RouteArgs) -> Result<()> {
    let start = a.start.unwrap_or_else(|| Utc::now() + chrono::Duration::hours(1));
    let end = a.end.unwrap_or(start + chrono::Duration::hours(1));
    let q = [
        ("from_site", a.from_site.clone()),
        ("to_site", a.to_site.clone()),
        ("bandwidth_mbps", a.bandwidth_mbps.to_string()),
        ("start", rfc3339(start)),
        ("end", rfc3339(end)),
    ];
    let v = Client::new(&a.conn)?.call(Method::GET, &["v1", "network", "route"], &q).await?;
    let Some(r) = v.get("route").filter(|r| !r.is_null()) else {
        if a.conn.out() == Output::Json {
            print_json(&v);
        }
        return Err(Exit {
            code: EXIT_REJECTED,
            message: format!(
                "no route from {} to {} with {} Mbit/s free over the interval",
                a.from_site, a.to_site, a.bandwidth_mbps
            ),
        }
        .into());
    };
    let links: Vec<String> = r["links"].as_array().into_iter().flatten().map(text).collect();
    match a.conn.out() {
        Output::Json => print_json(&v),
        Output::Ids => links.iter().for_each(|l| outln!("{l}")),
        Output::Table => outln!(
            "{} -> {}: {} ({} links), {} Mbit/s free, {} per Gbit/s-hour",
            a.from_site,
            a.to_site,
            if links.is_empty() { "same node".to_string() } else { links.join(" ") },
            links.len(),
            text(&r["free_mbps"]),
            amount(&r["price_per_gbps_hour"])
        ),
    }
    Ok(())
}
