//! Logging setup: tracing with an env filter (`RUST_LOG`), as text for people or JSON for log pipelines.

use clap::ValueEnum;
use tracing_subscriber::{fmt, EnvFilter};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber. `RUST_LOG` overrides the default `info` level.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // A second initialization (possible in tests) keeps the first subscriber; that is harmless.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Installs the global subscriber as [`init`] does, writing to `file` (without terminal colours) instead of standard
/// error: for a process whose standard output is meant for a reader, the log kept apart.
pub fn init_to_file(format: LogFormat, file: std::fs::File) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = fmt().with_env_filter(filter).with_ansi(false).with_writer(std::sync::Mutex::new(file));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
