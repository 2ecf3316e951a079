//! UTC calendar time from the system clock, without a date-time dependency: what reports and snapshot ids are
//! stamped with.

/// A UTC instant split into its calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    pub hour: u64,
    pub minute: u64,
    pub second: u64,
}

impl UtcTime {
    /// The calendar fields of `secs` seconds after 1970-01-01T00:00:00Z.
    pub fn from_unix_secs(secs: u64) -> Self {
        let (days, rem) = (secs / 86_400, secs % 86_400);
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days as i64 + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        UtcTime {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: rem / 3600,
            minute: rem % 3600 / 60,
            second: rem % 60,
        }
    }

    pub fn now() -> Self {
        Self::from_unix_secs(unix_secs())
    }

    /// RFC 3339 to the second: `2026-11-25T09:46:40Z`.
    pub fn rfc3339(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// The same without separators, fit for a name: `20261125T094640Z`.
    pub fn compact(&self) -> String {
        format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_fields_of_known_instants() {
        assert_eq!(UtcTime::from_unix_secs(0).rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(
            UtcTime::from_unix_secs(1_795_600_000).rfc3339(),
            "2026-11-25T09:46:40Z"
        );
        assert_eq!(
            UtcTime::from_unix_secs(951_782_400).rfc3339(),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            UtcTime::from_unix_secs(1_795_600_000).compact(),
            "20261125T094640Z"
        );
    }
}
