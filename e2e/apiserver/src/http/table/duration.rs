//! Times in printed cells: apimachinery's `duration.HumanDuration` (ages, job durations), the age of a timestamp
//! as the printers' `translateTimestampSince` gives it, and the RFC 3339 `Created At` of the default columns.

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

const SECOND: i128 = 1_000_000_000;
const MINUTE: i128 = 60 * SECOND;
const HOUR: i128 = 60 * MINUTE;

/// `duration.HumanDuration`: about two or three significant figures (`45s`, `3m20s`, `12m`, `5h10m`, `20h`,
/// `2d3h`, `30d`, `2y30d`, `9y`); a duration below -1s is `<invalid>` (a clock skew of a second is tolerated as
/// `0s`).
pub fn human_duration(duration: SignedDuration) -> String {
    // Go's durations are int64 nanoseconds: `time.Since` saturates at about 292 years.
    let nanos = duration.as_nanos().clamp(i64::MIN.into(), i64::MAX.into());
    let seconds = nanos / SECOND;
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = nanos / MINUTE;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / HOUR;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return match days % 365 {
            0 => format!("{years}y"),
            d => format!("{years}y{d}d"),
        };
    }
    format!("{years}y")
}

/// A timestamp of an object (`metav1.Time` or `MicroTime`), `None` when unset: absent, null, empty or Go's zero time,
/// which is what an unset time decodes to.
pub fn timestamp(value: &Value) -> Option<Result<Timestamp, ()>> {
    let text = value.as_str().filter(|t| !t.is_empty())?;
    match text.parse::<Timestamp>() {
        Ok(time) if time.as_second() == GO_ZERO_TIME => None,
        Ok(time) => Some(Ok(time)),
        Err(_) => Some(Err(())),
    }
}

/// `0001-01-01T00:00:00Z`, Go's zero `time.Time`, in Unix seconds.
const GO_ZERO_TIME: i64 = -62_135_596_800;

/// `translateTimestampSince`: how long ago `value` was, `<unknown>` when unset. A time that does not parse (which
/// kube-apiserver would not have decoded) is `<invalid>`, as a time far in the future is.
pub fn age(value: &Value, now: Timestamp) -> String {
    match timestamp(value) {
        None => "<unknown>".to_owned(),
        Some(Ok(then)) => human_duration(now.duration_since(then)),
        Some(Err(())) => "<invalid>".to_owned(),
    }
}

/// The `Created At` cell of kube-apiserver's default table convertor: the creation time in UTC, RFC 3339 to the
/// second (Go's zero time when unset).
pub fn created_at(value: &Value) -> String {
    let time = match timestamp(value) {
        Some(Ok(time)) => time,
        _ => Timestamp::from_second(GO_ZERO_TIME).unwrap_or(Timestamp::UNIX_EPOCH),
    };
    time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn human(seconds: i64) -> String {
        human_duration(SignedDuration::from_secs(seconds))
    }

    #[test]
    fn human_durations_have_two_or_three_figures() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 10 * 60 + 59, "5h10m"),
            (8 * 3600, "8h"),
            (47 * 3600 + 59 * 60, "47h"),
            (48 * 3600, "2d"),
            (51 * 3600, "2d3h"),
            (8 * 86400 - 1, "7d23h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400, "2y"),
            (760 * 86400, "2y30d"),
            (8 * 365 * 86400, "8y"),
            (3000 * 86400, "8y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human(seconds), expected, "{seconds}s");
        }
        // Truncated, never rounded: a fraction below -1s is tolerated, 1.9s is 1s.
        assert_eq!(human_duration(SignedDuration::from_millis(-1900)), "0s");
        assert_eq!(human_duration(SignedDuration::from_millis(1900)), "1s");
    }

    #[test]
    fn ages_of_timestamps() {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().expect("time");
        assert_eq!(age(&json!("2026-03-01T11:56:40Z"), now), "3m20s");
        assert_eq!(age(&json!("2026-02-27T08:59:59.500000Z"), now), "2d3h");
        assert_eq!(age(&json!("2026-03-01T12:00:05Z"), now), "<invalid>");
        assert_eq!(age(&Value::Null, now), "<unknown>");
        assert_eq!(age(&json!("0001-01-01T00:00:00Z"), now), "<unknown>");
        assert_eq!(age(&json!("yesterday"), now), "<invalid>");
        assert_eq!(created_at(&json!("2026-03-01T13:00:00+01:00")), "2026-03-01T12:00:00Z");
        assert_eq!(created_at(&Value::Null), "0001-01-01T00:00:00Z");
    }
}
