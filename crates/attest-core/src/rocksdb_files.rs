//! What to say when RocksDB refuses a directory written by a newer RocksDB. The engine's ingest log and meta's
//! Raft store both link Debian's RocksDB 7.8; builds before it bundled RocksDB 10.4, whose files (table and
//! MANIFEST `format_version` 6) 7.8 cannot read. RocksDB's own message ("Corrupt or unsupported format_version")
//! reads like damage; this names the RocksDB that wrote the directory, from its newest `OPTIONS-*` file.
//!
//! With the `rocksdb` feature (the crates that open a RocksDB already link it), also the options every store
//! opens with ([`harden`]).

use std::path::Path;

/// The `rocksdb_version` recorded in the newest `OPTIONS-NNNNNN` file of `dir`, if there is one.
pub fn written_by(dir: &Path) -> Option<String> {
    let newest = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let number: u64 = name.strip_prefix("OPTIONS-")?.parse().ok()?;
            Some((number, e.path()))
        })
        .max_by_key(|(number, _)| *number)?
        .1;
    std::fs::read_to_string(newest)
        .ok()?
        .lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix("rocksdb_version=")
                .map(|v| v.trim().to_string())
        })
}

/// RocksDB's open error for `dir`, with what it means when the directory is of a newer format than this build
/// reads; any other error is returned as it is.
pub fn explain_open_error(dir: &Path, error: &str) -> String {
    if !error.contains("format_version") {
        return error.to_string();
    }
    let writer =
        written_by(dir).map_or_else(|| "a newer RocksDB".to_string(), |v| format!("RocksDB {v}"));
    format!(
        "{error}: {} was written by {writer}, whose format this build's RocksDB (Debian's 7.8) cannot read; \
         Attest builds before the switch to Debian's RocksDB bundled RocksDB 10.4. Serve it with the build that \
         wrote it, or ingest the collection again into a new data directory",
        dir.display()
    )
}

/// Options every RocksDB store of the engine opens with, whatever else it tunes.
///
/// RocksDB's info log (the `LOG` file beside the store) is kept to fatal lines. Debian's librocksdb 7.8 is built
/// with assertions, and its info-log writer asserts when it is written again after a failed write: on a full
/// disk the first log line that cannot be flushed leaves the writer in error, and the next one aborts the whole
/// process (`sync_without_flush_called_`), whatever the caller does with the error statuses. RocksDB's errors
/// reach the engine as statuses anyway, which it logs as JSON with the request; the `LOG` file's statistics and
/// compaction chatter are what is given up. (Header lines, written only while a store opens, ignore the level:
/// opening needs [`crate::disk::OPEN_NEEDS_BYTES`] free, checked before.)
#[cfg(feature = "rocksdb")]
pub fn harden(opts: &mut rocksdb::Options) {
    opts.set_log_level(rocksdb::LogLevel::Fatal);
    // One old `LOG` is plenty when it holds headers and fatal lines.
    opts.set_keep_log_file_num(2);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options_file(dir: &Path, number: u32, version: &str) {
        let text =
            format!("# This is a RocksDB option file.\n[Version]\n  rocksdb_version={version}\n");
        std::fs::write(dir.join(format!("OPTIONS-{number:06}")), text).unwrap();
    }

    #[test]
    fn the_newest_options_file_names_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(written_by(dir.path()), None);
        options_file(dir.path(), 7, "10.4.2");
        options_file(dir.path(), 12, "10.5.0");
        std::fs::write(
            dir.path().join("OPTIONS-000099.dbtmp"),
            "rocksdb_version=1.0.0",
        )
        .unwrap();
        assert_eq!(written_by(dir.path()).as_deref(), Some("10.5.0"));
    }

    #[test]
    fn a_format_refusal_names_the_writer_and_other_errors_pass_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        options_file(dir.path(), 7, "10.4.2");
        let refused =
            "Corruption: Corrupt or unsupported format_version: 6 in file MANIFEST-000005";
        let said = explain_open_error(dir.path(), refused);
        assert!(said.starts_with(refused), "{said}");
        assert!(said.contains("written by RocksDB 10.4.2"), "{said}");
        assert!(said.contains("ingest the collection again"), "{said}");
        assert_eq!(
            explain_open_error(dir.path(), "IO error: lock"),
            "IO error: lock"
        );
    }
}
