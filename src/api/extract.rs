//! [`JsonBody`]: the JSON body extractor of every REST endpoint that takes a body.
//!
//! `web::Json<T>` lets serde read a struct from a JSON *array* (fields in order) and passes
//! strings with control characters on to the handler. `JsonBody<T>` reads the body with the
//! app's `JsonConfig` (size limit 413, media type 415, syntax 400: [`super::problem::json_error`]),
//! then refuses with 422, before `T` is built:
//! - a body that is not a JSON object;
//! - any string or key containing a control character (U+0000-U+001F, U+007F-U+009F; NUL
//!   cannot be stored by PostgreSQL, and no field of the API has a use for the others);
//!
//! and finally deserialises `T` (wrong shape, missing or unknown fields: 422 naming them).

use actix_web::{dev::Payload, web, FromRequest, HttpRequest};
use futures::future::LocalBoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::problem::ApiError;

/// A JSON object body deserialised into `T` (see the module docs for what is refused).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T> JsonBody<T> {
    /// The body.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for JsonBody<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The JSON path (`$.jobs[0].name`) of the first string or key with a control character,
/// appended to `path`. The path is built only on the way back from a find: a clean body
/// (every request) costs no allocation.
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
    serde_json::from_value(value).map_err(|e| ApiError::invalid(format!("body: {e}")))
}

impl<T: DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self, actix_web::Error>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let json = web::Json::<Value>::from_request(req, payload);
        Box::pin(async move {
            let value = json.await?.into_inner();
            Ok(JsonBody(from_value(value)?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Two {
        a: String,
        b: Vec<String>,
    }

    #[test]
    fn objects_only_and_no_control_characters() {
        let ok: Two = from_value(serde_json::json!({"a": "x", "b": ["y"]})).unwrap();
        assert_eq!(ok.b, ["y"]);
        let e = from_value::<Two>(serde_json::json!(["x", ["y"]])).unwrap_err();
        assert!(e.detail.contains("expected a JSON object"), "{e}");
        let e = from_value::<Two>(serde_json::json!({"a": "x", "b": ["y", "z\u{0}"]})).unwrap_err();
        assert!(e.detail.contains("$.b[1] contains a control character"), "{e}");
        let e = from_value::<Two>(serde_json::json!({"a\u{7f}": "x"})).unwrap_err();
        assert!(e.detail.contains("control character"), "{e}");
        let e = from_value::<Two>(serde_json::json!({"a": "x"})).unwrap_err();
        assert!(e.detail.contains("missing field `b`"), "{e}");
        assert_eq!(e.status.as_u16(), 422);
    }
}
