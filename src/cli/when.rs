//! Times and durations as people type them on the command line: `now`, `now+1h`,
//! `now+1d12h`, an RFC 3339 instant (`2026-11-27T09:00:00Z`, `...+01:00`); durations `3600`
//! (seconds), `90s`, `45m`, `1h30m`, `2d`. A timestamp without a timezone is refused with a
//! message that says so (the service would not know which 09:00 is meant).

use chrono::{DateTime, NaiveDateTime, Utc};

/// An example of every accepted form of a time, for messages.
pub const TIME_FORMS: &str = "`now`, `now+1h`, `now+2d6h`, or RFC 3339 with a timezone such as `2026-11-27T09:00:00Z`";

/// Why a time or duration typed on the command line was refused; the text names the accepted
/// forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhenError {
    /// Not a duration ([`parse_duration`]).
    #[error(
        "`{0}` is not a duration: write seconds (`3600`) or a number with units d, h, m, s (`1h30m`, `2d`, `90s`)"
    )]
    NotADuration(String),
    /// Not a time ([`parse_time_at`]).
    #[error("`{0}` is not a time: write {TIME_FORMS}")]
    NotATime(String),
    /// A date and time without a timezone (the service would not know which 09:00 is meant).
    #[error("`{0}` is a naive timestamp (no timezone): add `Z` for UTC or an offset, e.g. `{0}Z` or `{0}+01:00`")]
    Naive(String),
    /// `now±DURATION` beyond the representable range.
    #[error("`{0}` is out of range")]
    OutOfRange(String),
}

/// Seconds of a duration: a plain number of seconds, or numbers with units `d`, `h`, `m`, `s`
/// (`1h30m`, `2d`, `90s`).
///
/// # Errors
/// [`WhenError::NotADuration`] for anything else, a zero-length unit list, or an overflow.
pub fn parse_duration(s: &str) -> Result<i64, WhenError> {
    let t = s.trim();
    let bad = || WhenError::NotADuration(s.to_owned());
    if t.is_empty() {
        return Err(bad());
    }
    if let Ok(n) = t.parse::<i64>() {
        return Ok(n);
    }
    let (mut total, mut num) = (0i64, String::new());
    for c in t.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        let n: i64 = num.parse().map_err(|_| bad())?;
        total = n.checked_mul(unit).and_then(|x| total.checked_add(x)).ok_or_else(bad)?;
        num.clear();
    }
    if !num.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

/// An instant: `now`, `now+DURATION`, `now-DURATION` (see [`parse_duration`]) counted from
/// `now`, or RFC 3339 with a timezone.
///
/// # Errors
/// [`WhenError::Naive`] for a timestamp without `Z` or an offset, [`WhenError::OutOfRange`],
/// [`WhenError::NotADuration`] after `now±`, else [`WhenError::NotATime`].
pub fn parse_time_at(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, WhenError> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix("now") {
        let rest = rest.trim();
        if rest.is_empty() {
            return Ok(now);
        }
        let (sign, d) = match rest.split_at(1) {
            ("+", d) => (1, d),
            ("-", d) => (-1, d),
            _ => return Err(WhenError::NotATime(s.to_owned())),
        };
        let secs = parse_duration(d)?;
        return chrono::Duration::try_seconds(sign * secs)
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| WhenError::OutOfRange(s.to_owned()));
    }
    if let Ok(x) = DateTime::parse_from_rfc3339(t) {
        return Ok(x.with_timezone(&Utc));
    }
    if naive(t) {
        return Err(WhenError::Naive(t.to_owned()));
    }
    Err(WhenError::NotATime(s.to_owned()))
}

/// [`parse_time_at`] from the current time (a clap value parser).
///
/// # Errors
/// As [`parse_time_at`].
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, WhenError> {
    parse_time_at(s, Utc::now())
}

/// Whether `s` is a date and time without a timezone (`2026-11-27T00:00:00`, with `T` or a
/// space, seconds and fractions optional).
pub fn naive(s: &str) -> bool {
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"]
        .iter()
        .any(|f| NaiveDateTime::parse_from_str(s.trim(), f).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_seconds_or_units() {
        assert_eq!(parse_duration("3600"), Ok(3600));
        assert_eq!(parse_duration("1h30m"), Ok(5400));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        assert_eq!(parse_duration("90s"), Ok(90));
        for bad in ["", "1x", "h", "1h3", "1.5h", "99999999999999999999d"] {
            assert_eq!(parse_duration(bad), Err(WhenError::NotADuration(bad.to_owned())));
            assert!(parse_duration(bad).unwrap_err().to_string().contains("not a duration"), "{bad}");
        }
    }

    #[test]
    fn relative_absolute_and_naive_times() {
        let now = DateTime::parse_from_rfc3339("2026-11-27T09:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(parse_time_at("now", now), Ok(now));
        assert_eq!(parse_time_at("now+1h", now).unwrap().to_rfc3339(), "2026-11-27T10:00:00+00:00");
        assert_eq!(parse_time_at("now+1d2h", now).unwrap().to_rfc3339(), "2026-11-28T11:00:00+00:00");
        assert_eq!(parse_time_at("now-30m", now).unwrap().to_rfc3339(), "2026-11-27T08:30:00+00:00");
        assert_eq!(parse_time_at("2026-11-27T10:00:00+01:00", now), Ok(now));
        let e = parse_time_at("2026-11-27T00:00:00", now).unwrap_err().to_string();
        assert!(e.contains("naive timestamp") && e.contains("2026-11-27T00:00:00Z"), "{e}");
        let e = parse_time_at("tomorrow", now).unwrap_err().to_string();
        assert!(e.contains("now+1h") && e.contains("RFC 3339"), "{e}");
    }
}
