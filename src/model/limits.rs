//! Bounds every amount and price of the model stays within (what keeps the calendars compact
//! and every plan cost finite).

/// Largest capacity of one resource, in its own units (2^30: 1 Pbit/s in Mbit/s, or 10^9
/// CPUs). The calendars' compact layout relies on it.
pub const MAX_AMOUNT: u64 = 1 << 30;

/// Largest accepted price (of one CPU-hour or of one Gbit/s-hour): 10^6. With
/// [`MAX_AMOUNT`] and the request bounds of [`crate::model::MAX_DURATION_S`] this keeps every
/// plan cost a finite number (below about 10^24 per request).
pub const MAX_PRICE: f64 = 1e6;

/// Is `p` a valid price: finite and in `0 ..= MAX_PRICE`?
pub fn price_ok(p: f64) -> bool {
    p.is_finite() && (0.0..=MAX_PRICE).contains(&p)
}

/// At most this many jobs in one plan request (a 1,000-task workflow).
pub const MAX_JOBS: usize = 1000;
/// At most this many transfers in one plan request.
pub const MAX_TRANSFERS: usize = 4000;
