//! The capacity check across plans: together, the committed outcomes never hold more CPUs on a
//! site, more GPUs of one of its pools, or more Mbit/s on a link, than it has at any instant.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{Resources, Violation};
use crate::model::{from_time, to_time, Outcome, PlanStatus, Time};

/// One resource's bookings: `(start, end, amount)` per committed placement.
type Usage = Vec<(Time, Time, u64)>;

/// Every interval over which the committed `outcomes` overbook a site or a link, sites first
/// (each in id order), using the placements as reported. Placements on sites or links `res`
/// does not know are left to the per-plan checks.
pub(super) fn overbookings(res: &Resources<'_>, outcomes: &[Outcome]) -> Vec<Violation> {
    let mut site_use: BTreeMap<&str, Usage> = BTreeMap::new();
    let mut gpu_use: BTreeMap<(&str, String), Usage> = BTreeMap::new();
    let mut link_use: BTreeMap<&str, Usage> = BTreeMap::new();
    // A dry run (`Planned`) books nothing: its placements hold no capacity.
    for o in outcomes.iter().filter(|o| matches!(o.status, PlanStatus::Committed)) {
        for j in &o.jobs {
            if res.sites.contains_key(j.site.as_str()) {
                site_use.entry(j.site.as_str()).or_default().push((
                    to_time(&j.start),
                    to_time(&j.end),
                    u64::from(j.cpus),
                ));
                if let Some(g) = &j.gpus {
                    gpu_use.entry((j.site.as_str(), g.model.to_ascii_lowercase())).or_default().push((
                        to_time(&j.start),
                        to_time(&j.end),
                        u64::from(g.count),
                    ));
                }
            }
        }
        for t in &o.transfers {
            for l in &t.path {
                if res.links.contains_key(l.as_str()) {
                    link_use.entry(l.as_str()).or_default().push((
                        to_time(&t.start),
                        to_time(&t.end),
                        t.bandwidth_mbps,
                    ));
                }
            }
        }
    }

    let mut out = Vec::new();
    for (site, spans) in site_use {
        let capacity = u64::from(res.sites[site].cpus);
        out.extend(episodes(spans, capacity).map(|(from, to, peak)| Violation::SiteOverbooked {
            site: site.into(),
            from,
            to,
            peak,
            capacity,
        }));
    }
    for ((site, model), spans) in gpu_use {
        // GPUs of a pool the site lacks are reported by the per-plan checks.
        let Some((_, pool)) = res.sites[site].attributes.gpu_pool(&model) else { continue };
        let capacity = u64::from(pool.count);
        out.extend(episodes(spans, capacity).map(|(from, to, peak)| Violation::GpuOverbooked {
            site: site.into(),
            model: pool.model.clone(),
            from,
            to,
            peak,
            capacity,
        }));
    }
    for (link, spans) in link_use {
        let capacity = res.links[link].capacity_mbps;
        out.extend(episodes(spans, capacity).map(|(from, to, peak)| Violation::LinkOverbooked {
            link: link.into(),
            from,
            to,
            peak,
            capacity,
        }));
    }
    out
}

/// [`overbooked`]'s episodes as `(from, to, peak)` with the interval as timestamps.
fn episodes(spans: Usage, capacity: u64) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>, u64)> {
    overbooked(spans, capacity).into_iter().map(|(from, to, peak)| (from_time(from), from_time(to), peak))
}

/// Maximal intervals `[from, to)` where the summed amount of `spans` (half-open `[start, end)`)
/// exceeds `capacity`, with the peak reached in each. Empty spans (`end <= start`) count for
/// nothing.
pub(super) fn overbooked(spans: Usage, capacity: u64) -> Vec<(Time, Time, u64)> {
    let mut delta: BTreeMap<Time, i128> = BTreeMap::new();
    for (s, e, amount) in spans {
        if s < e {
            *delta.entry(s).or_insert(0) += i128::from(amount);
            *delta.entry(e).or_insert(0) -= i128::from(amount);
        }
    }
    let mut out = Vec::new();
    let mut usage: i128 = 0;
    let mut open: Option<(Time, i128)> = None;
    for (t, d) in delta {
        usage += d;
        if usage > i128::from(capacity) {
            open = Some(open.map_or((t, usage), |(from, peak)| (from, peak.max(usage))));
        } else if let Some((from, peak)) = open.take() {
            out.push((from, t, u64::try_from(peak).unwrap_or(u64::MAX)));
        }
    }
    debug_assert!(open.is_none(), "usage returns to 0 after the last end");
    out
}
