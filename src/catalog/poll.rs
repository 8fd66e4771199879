//! When a CatalogSource's image is looked up again (OLM v0's `registryPoll`): its interval read as Go's
//! `time.ParseDuration` reads it (an interval OLM refuses falls back to OLM's 15 minutes with OLM's message), whether
//! a poll is due (OLM's `CatalogSource.Update`), and how long until the next one.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::v1alpha1::{CatalogSource, SourceType};

/// OLM v0's `DefaultRegistryPollDuration`: the interval used when the one given does not parse.
pub const DEFAULT_REGISTRY_POLL: Duration = Duration::from_secs(15 * 60);

/// A CatalogSource's polling, when it polls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryPoll {
    /// The interval; zero when the given one is zero or negative (every check is a poll).
    pub interval: Duration,
    /// OLM's message when the given interval did not parse (the default is used instead).
    pub parse_error: Option<String>,
}

/// The polling of `source`, as OLM's `CatalogSource.Poll` decides it: only a `grpc` source with an image and a
/// `registryPoll` polls.
pub fn registry_poll(source: &CatalogSource) -> Option<RegistryPoll> {
    let poll = source.spec.update_strategy.as_ref()?.registry_poll.as_ref()?;
    let image = source.spec.image.as_deref().unwrap_or_default();
    if image.is_empty() || source.spec.source_type != SourceType::Grpc {
        return None;
    }
    let raw = poll.interval.as_deref().unwrap_or_default();
    Some(match parse_go_duration(raw) {
        Ok(nanos) => RegistryPoll { interval: non_negative(nanos), parse_error: None },
        Err(error) => RegistryPoll {
            interval: DEFAULT_REGISTRY_POLL,
            parse_error: Some(format!(
                "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of {} instead. \
                 Error: {error}",
                go_duration_string(DEFAULT_REGISTRY_POLL)
            )),
        },
    })
}

fn non_negative(nanos: i128) -> Duration {
    u64::try_from(nanos).map(Duration::from_nanos).unwrap_or(Duration::ZERO)
}

/// When the next poll is due: `interval` after the last poll, or after the source's creation before the first
/// (OLM's `Update`).
pub fn next_poll(created: Option<Timestamp>, last_poll: Option<Timestamp>, interval: Duration) -> Option<Timestamp> {
    let since = last_poll.or(created)?;
    let interval = k8s_openapi::jiff::SignedDuration::try_from(interval).ok()?;
    since.checked_add(interval).ok()
}

/// Whether a poll is due at `now`; a source without a creation time polls at once.
pub fn poll_due(created: Option<Timestamp>, last_poll: Option<Timestamp>, interval: Duration, now: Timestamp) -> bool {
    next_poll(created, last_poll, interval).is_none_or(|due| due <= now)
}

/// How long until the next poll is due (zero when it is due).
pub fn until_next_poll(
    created: Option<Timestamp>,
    last_poll: Option<Timestamp>,
    interval: Duration,
    now: Timestamp,
) -> Duration {
    next_poll(created, last_poll, interval)
        .and_then(|due| Duration::try_from(due.duration_since(now)).ok())
        .unwrap_or(Duration::ZERO)
}

/// Go's `time.ParseDuration`: nanoseconds, or Go's error text. A sign, then numbers with optional fractions, each
/// with one of the units `ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`; `0` alone needs no unit.
pub fn parse_go_duration(text: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let integer_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let integer = &rest[..integer_end];
        rest = &rest[integer_end..];
        let mut fraction = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let fraction_end = after_dot.find(|c: char| !c.is_ascii_digit()).unwrap_or(after_dot.len());
            fraction = &after_dot[..fraction_end];
            rest = &after_dot[fraction_end..];
        }
        if integer.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_end = rest.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let scale: i128 = match unit {
            "" => return Err(format!("time: missing unit in duration {text:?}")),
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {unit:?} in duration {text:?}")),
        };
        let whole: i128 = if integer.is_empty() { 0 } else { integer.parse().map_err(|_| invalid())? };
        let mut value = whole.checked_mul(scale).ok_or_else(invalid)?;
        let mut place = scale;
        for digit in fraction.bytes() {
            place /= 10;
            value += i128::from(digit - b'0') * place;
        }
        total = total.checked_add(value).filter(|total| *total <= i128::from(i64::MAX)).ok_or_else(invalid)?;
    }
    Ok(if negative { -total } else { total })
}

/// A duration as Go's `Duration.String` prints it for whole seconds and above (`15m0s`, `1h0m0s`, `30s`).
pub fn go_duration_string(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (hours, minutes, seconds) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m{seconds}s"),
        _ => format!("{hours}h{minutes}m{seconds}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i128 = 1_000_000_000;

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        assert_eq!(parse_go_duration("10m"), Ok(600 * SECOND));
        assert_eq!(parse_go_duration("1h30m"), Ok(5400 * SECOND));
        assert_eq!(parse_go_duration("1.5s"), Ok(1500 * 1_000_000));
        assert_eq!(parse_go_duration(".5s"), Ok(SECOND / 2));
        assert_eq!(parse_go_duration("500ms"), Ok(500 * 1_000_000));
        assert_eq!(parse_go_duration("3us"), Ok(3_000));
        assert_eq!(parse_go_duration("3µs"), Ok(3_000));
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("-5m"), Ok(-300 * SECOND));
        assert_eq!(parse_go_duration("+1m1s"), Ok(61 * SECOND));
    }

    #[test]
    fn go_duration_errors_are_go_s_words() {
        assert_eq!(parse_go_duration(""), Err(r#"time: invalid duration """#.to_owned()));
        assert_eq!(parse_go_duration("10"), Err(r#"time: missing unit in duration "10""#.to_owned()));
        assert_eq!(parse_go_duration("5d"), Err(r#"time: unknown unit "d" in duration "5d""#.to_owned()));
        assert_eq!(parse_go_duration("ten minutes"), Err(r#"time: invalid duration "ten minutes""#.to_owned()));
        assert_eq!(parse_go_duration("."), Err(r#"time: invalid duration ".""#.to_owned()));
        assert_eq!(parse_go_duration("-"), Err(r#"time: invalid duration "-""#.to_owned()));
        assert!(parse_go_duration("9999999999999999h").is_err(), "overflow is refused, as Go refuses it");
    }

    #[test]
    fn go_prints_whole_durations_with_every_smaller_unit() {
        assert_eq!(go_duration_string(DEFAULT_REGISTRY_POLL), "15m0s");
        assert_eq!(go_duration_string(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration_string(Duration::from_secs(30)), "30s");
    }

    fn source(source_type: &str, image: Option<&str>, interval: Option<&str>) -> CatalogSource {
        let mut spec = serde_json::json!({"sourceType": source_type});
        if let Some(image) = image {
            spec["image"] = image.into();
        }
        if let Some(interval) = interval {
            spec["updateStrategy"] = serde_json::json!({"registryPoll": {"interval": interval}});
        }
        serde_json::from_value(serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "CatalogSource", "metadata": {"name": "c", "namespace": "olm"}, "spec": spec}))
        .expect("a CatalogSource")
    }

    #[test]
    fn only_grpc_images_with_a_registry_poll_poll() {
        let poll = registry_poll(&source("grpc", Some("r/c:1"), Some("10m"))).expect("polls");
        assert_eq!(poll, RegistryPoll { interval: Duration::from_secs(600), parse_error: None });
        assert_eq!(registry_poll(&source("grpc", Some("r/c:1"), None)), None);
        assert_eq!(registry_poll(&source("grpc", None, Some("10m"))), None, "an address does not poll");
        assert_eq!(registry_poll(&source("configmap", Some("r/c:1"), Some("10m"))), None);
        let negative = registry_poll(&source("grpc", Some("r/c:1"), Some("-1m"))).expect("polls");
        assert_eq!(negative.interval, Duration::ZERO);
    }

    #[test]
    fn an_interval_that_does_not_parse_polls_every_15_minutes_and_says_so_in_olm_s_words() {
        let poll = registry_poll(&source("grpc", Some("r/c:1"), Some("10"))).expect("polls");
        assert_eq!(poll.interval, DEFAULT_REGISTRY_POLL);
        assert_eq!(
            poll.parse_error.as_deref(),
            Some(
                "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of 15m0s instead. \
                 Error: time: missing unit in duration \"10\""
            )
        );
    }

    #[test]
    fn a_poll_is_due_an_interval_after_the_last_one_or_after_creation() {
        let at = |seconds: i64| Timestamp::from_second(seconds).expect("a time");
        let interval = Duration::from_secs(60);
        assert!(!poll_due(Some(at(0)), None, interval, at(59)));
        assert!(poll_due(Some(at(0)), None, interval, at(60)));
        assert!(!poll_due(Some(at(0)), Some(at(100)), interval, at(150)));
        assert!(poll_due(Some(at(0)), Some(at(100)), interval, at(160)));
        assert!(poll_due(None, None, interval, at(0)), "no creation time: poll now");
        assert_eq!(until_next_poll(Some(at(0)), Some(at(100)), interval, at(150)), Duration::from_secs(10));
        assert_eq!(until_next_poll(Some(at(0)), Some(at(100)), interval, at(500)), Duration::ZERO);
    }
}
