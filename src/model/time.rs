use chrono::{DateTime, TimeZone, Utc};

/// An instant in whole seconds since the Unix epoch (UTC). All calendars and the planner work
/// on this type; JSON carries RFC 3339 strings (see [`to_time`] / [`from_time`]).
pub type Time = i64;

/// Converts an RFC 3339 timestamp to [`Time`] (sub-second part truncated).
pub fn to_time(t: &DateTime<Utc>) -> Time {
    t.timestamp()
}

/// Converts a [`Time`] back to a UTC timestamp. Panics only for instants outside
/// chrono's range (about ±262,000 years), which no validated input can produce.
pub fn from_time(t: Time) -> DateTime<Utc> {
    Utc.timestamp_opt(t, 0).single().expect("time within chrono's range")
}

/// Is a number of seconds 0? (serde's `skip_serializing_if` for the optional `_s` fields
/// whose default is 0.)
pub(crate) fn is_zero_s(x: &i64) -> bool {
    *x == 0
}

/// `t` as RFC 3339 UTC text, whole seconds, `Z` (how messages for people show an instant;
/// never epoch seconds). An instant outside chrono's range is shown as its epoch seconds.
pub fn rfc3339(t: &Time) -> String {
    Utc.timestamp_opt(*t, 0)
        .single()
        .map_or_else(|| format!("{t} s since the epoch"), |d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}
