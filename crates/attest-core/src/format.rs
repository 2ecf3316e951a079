//! On-disk format versions: the one window rule for every layout Attest writes (a shard's ingest log, its segment
//! manifest, meta's store, the snapshot manifests).
//!
//! Each layout carries its version where it is stored and names it in a [`Layout`]. A build reads its current
//! version and the one before it, writes only the current one (a layout read at the previous version is upgraded
//! by the next write), and refuses anything else, naming the version it found and the ones it reads. Data written
//! before a layout carried a version is its version 1, the layout `tests/fixtures/format-1` records.

use std::fmt;

/// A layout and the version this build writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// What it is, as an operator would name it ("shard ingest log").
    pub what: &'static str,
    pub current: u32,
}

/// The version of data stored before its layout carried one.
pub const UNMARKED: u32 = 1;

impl Layout {
    /// The versions this build reads, oldest first.
    pub fn readable(&self) -> Vec<u32> {
        (self.current.saturating_sub(1).max(1)..=self.current).collect()
    }

    /// The version found at `location` (`None`: no version recorded, [`UNMARKED`]) when this build reads it.
    pub fn check(&self, found: Option<u32>, location: &str) -> Result<u32, FormatError> {
        let found = found.unwrap_or(UNMARKED);
        if self.readable().contains(&found) {
            Ok(found)
        } else {
            Err(FormatError {
                layout: *self,
                found,
                location: location.to_string(),
            })
        }
    }
}

/// A layout version outside the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub layout: Layout,
    pub found: u32,
    pub location: String,
}

impl std::error::Error for FormatError {}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let readable: Vec<String> = self.layout.readable().iter().map(u32::to_string).collect();
        let advice = if self.found > self.layout.current {
            "it was written by a newer release of Attest: run that release (or restore a snapshot into it)"
        } else {
            "it was written by an older release than the one before this build: open it with the releases in \
             between first, each upgrades what it writes"
        };
        write!(
            f,
            "{}: {} format version {}, but this build reads version{} {}; {advice}",
            self.location,
            self.layout.what,
            self.found,
            if readable.len() > 1 { "s" } else { "" },
            readable.join(" and ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: Layout = Layout {
        what: "test log",
        current: 1,
    };
    const THIRD: Layout = Layout {
        what: "test log",
        current: 3,
    };

    #[test]
    fn the_window_is_the_current_version_and_the_one_before() {
        assert_eq!(FIRST.readable(), vec![1]);
        assert_eq!(THIRD.readable(), vec![2, 3]);
        assert_eq!(FIRST.check(None, "x"), Ok(1), "unmarked data is version 1");
        assert_eq!(THIRD.check(Some(2), "x"), Ok(2));
        assert!(THIRD.check(None, "x").is_err(), "version 1 is two behind");
    }

    #[test]
    fn a_refusal_names_both_versions_and_what_to_do() {
        let newer = FIRST.check(Some(2), "/data/wal").unwrap_err().to_string();
        assert!(
            newer.contains("/data/wal: test log format version 2, but this build reads version 1"),
            "{newer}"
        );
        assert!(newer.contains("newer release"), "{newer}");
        let older = THIRD.check(Some(1), "/data/wal").unwrap_err().to_string();
        assert!(older.contains("reads versions 2 and 3"), "{older}");
        assert!(older.contains("older release"), "{older}");
    }
}
