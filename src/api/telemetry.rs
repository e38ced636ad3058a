//! Logs: the tracing subscriber of the `coreserve` binary, and start-up notices.
//!
//! Log lines go to stderr as text (default) or, with `--log-format json`, as one JSON object per
//! line (tracing-subscriber's JSON formatter: `timestamp`, `level`, `fields`, `target`); the
//! filter is `RUST_LOG` (default `warn`). Text has ANSI colours only when stderr is a terminal;
//! at `info`, every request is one line (`request`: method, path, status, ms). A few start-up lines (the store in use, the address
//! served, what recovery did, a generated admin token) must reach the operator whatever the
//! filter: [`notice`] prints them in the same format as the log lines.

use std::sync::OnceLock;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

static FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Installs the process's tracing subscriber (stderr, `RUST_LOG` or `warn`) in `format`; once,
/// at start (a second call changes nothing).
pub fn init(format: LogFormat) {
    if FORMAT.set(format).is_err() {
        return;
    }
    use std::io::IsTerminal;
    // Colours only for a person at a terminal: a file, a pipe or journald gets plain text.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_ansi(format == LogFormat::Text && std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => logs.try_init(),
        LogFormat::Json => logs.json().try_init(),
    };
}

/// A start-up line on stderr whatever the log filter: plain text, or with JSON logs an object
/// shaped like the log lines (level `INFO`, the text in `fields.message`).
pub fn notice(message: &str) {
    match FORMAT.get().copied().unwrap_or_default() {
        LogFormat::Text => eprintln!("{message}"),
        LogFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "timestamp": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "level": "INFO",
                "fields": { "message": message },
                "target": "coreserve",
            })
        ),
    }
}
