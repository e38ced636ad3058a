//! Names and ids that come from outside (job names, request ids, OS names, grid ids).

/// Longest accepted name or id, in characters (Unicode scalar values).
pub const MAX_TEXT_CHARS: usize = 128;

/// Why a name or id was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    #[error("must not be empty or only whitespace")]
    Blank,
    #[error("must be at most 128 characters")]
    TooLong,
    #[error("must not contain control characters (U+0000-U+001F, U+007F-U+009F)")]
    Control,
}

/// A value that is none of the accepted forms: the error of the crate's `FromStr`
/// implementations (policies, methods, routing, participant references, ...), reading
/// ``unknown {what} `{value}`; expected {expected}``.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{value}`; expected {expected}")]
pub struct UnknownValue {
    /// What was being read, e.g. `routing`.
    pub what: &'static str,
    /// The text given.
    pub value: String,
    /// The accepted forms, in words.
    pub expected: String,
}

impl UnknownValue {
    /// `value` read as a `what`, which accepts `expected`.
    pub fn new(what: &'static str, value: &str, expected: impl Into<String>) -> Self {
        UnknownValue { what, value: value.to_owned(), expected: expected.into() }
    }
}

/// Checks a name or id: 1 to [`MAX_TEXT_CHARS`] characters, at least one of them not
/// whitespace, none a control character (`char::is_control`: U+0000-U+001F and
/// U+007F-U+009F; NUL included, which PostgreSQL cannot store in text).
///
/// # Errors
/// The first [`TextError`] found, in the order: control, blank, too long.
pub fn check_text(s: &str) -> Result<(), TextError> {
    if s.chars().any(char::is_control) {
        return Err(TextError::Control);
    }
    if s.trim().is_empty() {
        return Err(TextError::Blank);
    }
    if s.chars().count() > MAX_TEXT_CHARS {
        return Err(TextError::TooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_visible_text() {
        assert_eq!(check_text("A-1 é"), Ok(()));
        assert_eq!(check_text(""), Err(TextError::Blank));
        assert_eq!(check_text(" \t"), Err(TextError::Control));
        assert_eq!(check_text("  "), Err(TextError::Blank));
        assert_eq!(check_text("a\0b"), Err(TextError::Control));
        assert_eq!(check_text("a\u{85}"), Err(TextError::Control));
        assert_eq!(check_text(&"x".repeat(128)), Ok(()));
        assert_eq!(check_text(&"é".repeat(129)), Err(TextError::TooLong));
    }
}
