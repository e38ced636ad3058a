//! BBR-overlay's view of what the plan itself has placed (docs/algorithm.md): the search
//! adds it to what it asks the participants, so that a plan does not collide with itself.

use std::collections::HashMap;

use crate::calendar::{CapacityCalendar, MultiCalendar, ResourceKey, SpanId};
use crate::model::{LinkId, SiteId, Time, MAX_AMOUNT};

/// What the overlay counts at a site: its CPUs, and its GPUs of all pools together
/// (conservative: a query adds them to the pool it asks about).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Own {
    Cpus,
    Gpus,
}

impl ResourceKey for Own {
    fn position(self) -> usize {
        self as usize
    }
}

/// BBR-overlay's local view of what the plan itself has placed: own usage per site ([`Own`])
/// and per link.
#[derive(Default)]
pub(super) struct Overlay {
    sites: HashMap<SiteId, MultiCalendar<Own>>,
    pub(super) links: HashMap<LinkId, CapacityCalendar>,
}

impl Overlay {
    /// The plan's own peak of `resource` at `site` over `[start, end)`.
    pub(super) fn site_peak(&self, site: &SiteId, resource: Own, start: Time, end: Time) -> u64 {
        self.sites.get(site).map_or(0, |c| c.get(resource).peak_usage(start, end))
    }

    /// Enters a job of `cpus` CPUs and `gpus` GPUs at `site` over `[start, end)`: its CPU span
    /// and, with GPUs, its GPU span.
    pub(super) fn add_job(
        &mut self,
        site: &SiteId,
        start: Time,
        end: Time,
        cpus: u32,
        gpus: u32,
    ) -> (SpanId, Option<SpanId>) {
        let cal = self
            .sites
            .entry(site.clone())
            .or_insert_with(|| MultiCalendar::new([(Own::Cpus, MAX_AMOUNT), (Own::Gpus, MAX_AMOUNT)]));
        let mut demand = vec![(Own::Cpus, u64::from(cpus))];
        if gpus > 0 {
            demand.push((Own::Gpus, u64::from(gpus)));
        }
        let spans = cal.add(start, end, &demand).expect("the overlay has room for any plan");
        (spans[0], spans.get(1).copied())
    }

    /// Takes a job's spans ([`Overlay::add_job`]) out again.
    pub(super) fn remove_job(&mut self, site: &SiteId, (cpus, gpus): (SpanId, Option<SpanId>)) {
        let cal = self.sites.get_mut(site).expect("the job's site is in the overlay");
        cal.get_mut(Own::Cpus).remove(cpus).expect("overlay span is booked");
        if let Some(span) = gpus {
            cal.get_mut(Own::Gpus).remove(span).expect("overlay span is booked");
        }
    }

    /// Enters a transfer's `amount` Mbit/s on `link` over `[start, end)`: its span.
    pub(super) fn add_link(&mut self, link: &str, start: Time, end: Time, amount: u64) -> SpanId {
        let cal = self.links.entry(LinkId::from(link)).or_insert_with(|| CapacityCalendar::new(MAX_AMOUNT));
        cal.add(start, end, amount).expect("the overlay has room for any plan")
    }

    /// Takes a transfer's span on `link` ([`Overlay::add_link`]) out again.
    pub(super) fn remove_link(&mut self, link: &str, span: SpanId) {
        self.links.get_mut(link).and_then(|c| c.remove(span).ok()).expect("overlay span is booked");
    }
}
