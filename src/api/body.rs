//! JSON bodies parsed only after the caller is authorised.
//!
//! actix polls a handler's extractors concurrently, so a `web::Json<T>` next to the
//! [`Caller`](super::auth::Caller) may fail (and answer a schema hint) before the caller's role
//! is checked. Handlers with a role check therefore take the raw body and parse it with
//! [`parse`] once the role is checked, which answers exactly as the JSON extractor would: most
//! do so through [`super::extract::Guarded`] (role, path and `Body<T>` in one extractor), the
//! few whose checks come between (idempotency keys, admission) by hand.
//!
//! [`from_value`] checks a parsed body (an object, no control character in any string or key)
//! and builds the `T`; [`describe`] words a deserialisation failure for the answer.

use actix_web::http::StatusCode;
use actix_web::mime;
use actix_web::HttpRequest;
use chrono::NaiveDateTime;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::problem::ApiError;

/// Parses `body` as the JSON of a `T`.
///
/// # Errors
/// 415 when the request's `Content-Type` is not JSON (`application/json` or `+json`), 400 for
/// malformed JSON (an empty body included), 422 for well-formed JSON of the wrong shape
/// (not an object, missing or unknown fields, wrong types) or with a control character in a
/// string (the rules of [`super::extract::JsonBody`]).
pub fn parse<T: DeserializeOwned>(req: &HttpRequest, body: &[u8]) -> Result<T, ApiError> {
    let json = req
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<mime::Mime>().ok())
        .is_some_and(|m| m.subtype() == mime::JSON || m.suffix() == Some(mime::JSON));
    if !json {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Expected application/json",
            "the body must be JSON with Content-Type: application/json",
        ));
    }
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))?;
    from_value(value)
}

/// Like [`parse`], but an empty body is `None` (an optional body, such as that of the
/// participant protocol's commit / abort / release, which only `extend` needs).
///
/// # Errors
/// As [`parse`] for a non-empty body.
pub fn parse_optional<T: DeserializeOwned>(req: &HttpRequest, body: &[u8]) -> Result<Option<T>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    parse(req, body).map(Some)
}

/// The JSON path (`$.jobs[0].name`) of the first string or key with a control character,
/// appended to `path`. The path is built only on the way back from a find: a clean body
/// (every request) allocates nothing.
fn control_path(v: &Value, path: &mut String) -> bool {
    fn find(v: &Value) -> Option<Vec<String>> {
        let bad = |s: &str| s.chars().any(char::is_control);
        match v {
            Value::String(s) => bad(s).then(Vec::new),
            Value::Array(items) => items.iter().enumerate().find_map(|(i, x)| {
                let mut rest = find(x)?;
                rest.push(format!("[{i}]"));
                Some(rest)
            }),
            Value::Object(map) => map.iter().find_map(|(k, x)| {
                let mut rest = if bad(k) { Vec::new() } else { find(x)? };
                rest.push(format!(".{}", k.escape_debug()));
                Some(rest)
            }),
            _ => None,
        }
    }
    match find(v) {
        // Innermost first.
        Some(steps) => {
            steps.iter().rev().for_each(|s| path.push_str(s));
            true
        }
        None => false,
    }
}

/// Checks a parsed body and builds `T` from it (the rules of the module docs).
///
/// # Errors
/// 422 [`ApiError::invalid`] naming the problem.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(ApiError::invalid("body: expected a JSON object"));
    }
    let mut path = String::from("$");
    if control_path(&value, &mut path) {
        return Err(ApiError::invalid(format!(
            "body: {path} contains a control character (U+0000-U+001F, U+007F-U+009F are refused)"
        )));
    }
    serde_path_to_error::deserialize(&value).map_err(|e| {
        let at = lookup(&value, e.path());
        let text = at.map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned));
        ApiError::invalid(format!("body: {}", describe(&e.path().to_string(), &e.inner().to_string(), text.as_deref())))
    })
}

/// The value at `path` in `v`, if there is one.
fn lookup<'a>(v: &'a Value, path: &serde_path_to_error::Path) -> Option<&'a Value> {
    use serde_path_to_error::Segment;
    path.iter().try_fold(v, |v, seg| match seg {
        Segment::Seq { index } => v.get(index),
        Segment::Map { key } => v.get(key),
        Segment::Enum { .. } | Segment::Unknown => Some(v),
    })
}

/// What a field of the API takes, with an example, by the field's name.
fn expected_of(field: &str) -> Option<&'static str> {
    Some(match field {
        "deadline" | "not_before" | "from" | "to" | "start" | "end" | "expires_at" => {
            "an RFC 3339 timestamp with a timezone, e.g. 2030-01-01T12:00:00Z"
        }
        "cpus" | "gpus" => "a whole number of CPUs, e.g. 16",
        "duration_s" | "lease_s" => "a whole number of seconds >= 1, e.g. 3600",
        "offset_s" => "a whole number of seconds >= 0, e.g. 0",
        "bandwidth_mbps" | "capacity_mbps" => "a whole number of Mbit/s, e.g. 500",
        "dry_run" | "tentative" | "admin" | "service" => "true or false",
        "policy" => "one of time, cost, load, random",
        "method" | "mode" => "one of bir, bbr, bbr-overlay",
        "status" => "one of committed, rejected, cancelled, pending",
        "jobs" => {
            r#"a list of jobs, e.g. [{"name": "A", "os": "linux", "cpus": 16, "offset_s": 0, "duration_s": 3600}]"#
        }
        "transfers" => {
            r#"a list of transfers, e.g. [{"from": "A", "to": "B", "bandwidth_mbps": 500, "offset_s": 0, "duration_s": 600}]"#
        }
        "price_per_cpu_hour" | "price_per_gbps_hour" => "a number >= 0, e.g. 1.5",
        "id" | "name" | "os" | "user" | "from_site" | "to_site" | "site" | "node" => "a non-empty string",
        _ => return None,
    })
}

/// serde's name of an expected type in words.
fn words_of(expected: &str) -> String {
    let e = expected.trim();
    match e {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number >= 0".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "f32" | "f64" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" => "an object".into(),
        _ if e.starts_with("struct ") => "an object".into(),
        _ if e.contains("date and time") => "an RFC 3339 timestamp with a timezone, e.g. 2030-01-01T12:00:00Z".into(),
        _ => e.to_owned(),
    }
}

/// Whether `s` is a date and time without a timezone (`2026-11-27T00:00:00`).
pub fn naive_timestamp(s: &str) -> bool {
    ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"]
        .iter()
        .any(|f| NaiveDateTime::parse_from_str(s.trim(), f).is_ok())
        || chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").is_ok()
}

/// chrono's parse errors: the text of a timestamp that did not parse.
const TIME_ERRORS: [&str; 7] = [
    "premature end of input",
    "input contains invalid characters",
    "input is out of range",
    "input is not enough for unique date and time",
    "trailing input",
    "no possible date and time matching input",
    "bad or unsupported format string",
];

/// A deserialisation failure in the user's words: `field` (a path such as `jobs[0].cpus`; `.`
/// for the whole), serde's message `msg`, and the offending value as text, if known.
pub fn describe(field: &str, msg: &str, value: Option<&str>) -> String {
    let last =
        |path: &str| -> String { path.rsplit(['.', '[']).next().unwrap_or(path).trim_end_matches(']').to_owned() };
    let join = |name: &str| if field.is_empty() || field == "." { name.to_owned() } else { format!("{field}.{name}") };
    let hint = |name: &str| expected_of(name).map_or_else(String::new, |e| format!(": {e}"));
    let shown = value.map_or_else(String::new, |v| format!(" = `{v}`"));
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let name = rest.split('`').next().unwrap_or(rest);
        return format!("`{}` is missing; it is required{}", join(name), hint(name));
    }
    if msg.starts_with("unknown field `") {
        let place = if field.is_empty() || field == "." { String::new() } else { format!(" in `{field}`") };
        return format!(
            "{}{place}",
            msg.replacen(", expected one of", "; the fields here are", 1).replacen(
                ", there are no fields",
                "; there are no fields here",
                1
            )
        );
    }
    let name = last(field);
    let is_time = TIME_ERRORS.iter().any(|t| msg.contains(t)) || msg.contains("date and time");
    if let Some(v) = value {
        if (is_time || expected_of(&name).is_some_and(|e| e.contains("RFC 3339"))) && naive_timestamp(v) {
            let v = v.trim();
            return format!(
                "`{field}` = `{v}` is a naive timestamp (no timezone): add `Z` for UTC or an offset, \
                 e.g. `{v}Z` or `{v}+01:00`"
            );
        }
    }
    if is_time {
        return format!(
            "`{field}`{shown} is not a timestamp: expected RFC 3339 with a timezone, e.g. 2030-01-01T12:00:00Z"
        );
    }
    if msg.starts_with("UUID parsing failed") || msg.contains("invalid length: expected length 32") {
        return format!("`{field}`{shown} is not a UUID: expected e.g. 1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (got, choices) = rest.split_once("`, expected ").unwrap_or((rest, ""));
        let got = got.trim_end_matches('`');
        return format!("`{field}` = `{got}` is not valid: expected {choices}");
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = msg.strip_prefix(prefix) {
            if let Some((got, expected)) = rest.rsplit_once(", expected ") {
                let want = expected_of(&name).map_or_else(|| words_of(expected), str::to_owned);
                return format!("`{field}`: expected {want}, got {got}");
            }
        }
    }
    let parse_failure = [
        "invalid digit found in string",
        "cannot parse integer from empty string",
        "number too large to fit in target type",
        "number too small to fit in target type",
        "invalid float literal",
        "provided string was not `true` or `false`",
    ];
    if parse_failure.iter().any(|p| msg.contains(p)) {
        let want = expected_of(&name).unwrap_or(if msg.contains("true") { "true or false" } else { "a number" });
        return format!("`{field}`{shown}: expected {want}");
    }
    if field.is_empty() || field == "." {
        msg.to_owned()
    } else {
        format!("`{field}`: {msg}")
    }
}
