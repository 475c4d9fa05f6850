//! Durations as people write them (`500ms`, `30s`, `5m`, `1h`, `7d`, `1.5h`) and times
//! (for time travel): the CLI's `--timeout`/`--older-than`/`--as-of` and the Python
//! package's strings, one rule each.

use std::time::Duration;

/// Longest duration accepted, in days (longer ones are surely a mistake, and overflow
/// clocks).
pub const MAX_DURATION_DAYS: f64 = 100_000.0;

/// A duration that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// No number before the unit.
    #[error("'{text}' is not a duration such as 500ms, 30s, 5m, 1h or 7d")]
    NotANumber {
        /// The text given.
        text: String,
    },
    /// A number without a unit (seconds are never assumed).
    #[error("'{text}' has no unit; write it with one: {text}s, {text}m, {text}h or {text}d")]
    NoUnit {
        /// The text given.
        text: String,
    },
    /// A unit other than ms, s, m, h or d.
    #[error("'{text}': unknown unit '{unit}'; use ms, s, m, h or d")]
    UnknownUnit {
        /// The text given.
        text: String,
        /// Its unit.
        unit: String,
    },
    /// Longer than [`MAX_DURATION_DAYS`].
    #[error("'{text}' is longer than the {MAX_DURATION_DAYS} days a duration may be")]
    TooLong {
        /// The text given.
        text: String,
    },
}

/// `s` (a non-negative number and a unit: ms, s, m, h or d) as a duration.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number.parse().map_err(|_| DurationError::NotANumber { text: s.to_string() })?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86400.0,
        "" => return Err(DurationError::NoUnit { text: s.to_string() }),
        _ => return Err(DurationError::UnknownUnit { text: s.to_string(), unit: unit.to_string() }),
    };
    // Finite and bounded here, so the conversion below cannot fail.
    if !seconds.is_finite() || seconds > MAX_DURATION_DAYS * 86400.0 {
        return Err(DurationError::TooLong { text: s.to_string() });
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| DurationError::TooLong { text: s.to_string() })
}

/// A time that could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("'{text}' is not a time: write RFC 3339, e.g. 2026-01-02T03:04:05Z or 2026-01-02T03:04:05.5+01:00 (a space may replace the T; without a zone, UTC)")]
#[non_exhaustive]
pub struct TimeError {
    /// The text given.
    pub text: String,
}

/// `s` as a UTC time: RFC 3339, with a space allowed for the `T`; a time without a
/// zone is UTC.
pub fn parse_time(s: &str) -> Result<chrono::DateTime<chrono::Utc>, TimeError> {
    arrow::compute::kernels::cast_utils::string_to_datetime(&chrono::Utc, s.trim()).map_err(|_| TimeError { text: s.to_string() })
}
