//! The static category of an error: the one trait every error with a reason implements, and the rendering of an
//! error with its causes that conditions, events and the terminal show. It imports nothing of the crate, so that any
//! module may use it without a cycle.

/// An error with a static category: a short, bounded name of what failed (`ManifestImagePullFailed`,
/// `StatusWriteFailed`), used as log field, condition and event reason and metric label, so that error text (which
/// names objects and carries server messages) never becomes a label value or an unbounded set of reasons.
pub trait Categorized: std::error::Error {
    /// The category: a constant, in UpperCamelCase as Kubernetes reasons are.
    fn category(&self) -> &'static str;

    /// Whether the error only says the object changed under the action (a write whose resourceVersion
    /// precondition no longer held): expected, logged quietly and retried at once, since the next pass sees the
    /// change and decides again.
    fn is_conflict(&self) -> bool {
        false
    }
}

/// Renders an error with its chain of causes, one per line, for a condition's message, an event's note or the
/// user at the terminal.
pub fn report(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(&format!("\n  caused by: {inner}"));
        cause = inner.source();
    }
    text
}
