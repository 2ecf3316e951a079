//! Model files checked against committed sha256 tables, in one place: the model files Attest loads at start-up are
//! read through [`read_verified`] — the embedder's weights installed under `models/` by `scripts/install-model.sh`
//! (`models/minilm.sha256`), ONNX Runtime and the MiniLM graph (`onnx.sha256`, this crate's), and the
//! reader, committed with its table in `crates/attest-models/models/reader/` (`reader.sha256`). A table is in `sha256sum -c` form and
//! compiled into the binary, so a swapped file is refused; the install scripts check the same tables with
//! `scripts/lib/sha256.sh` (the optional GGUF generator, whose path is configurable, only there).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Why a model file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChecksumError {
    /// The table has no line for the file's name.
    #[error("no committed checksum for {name}")]
    NoChecksum { file: PathBuf, name: String },
    #[error("reading {}: {error}", file.display())]
    Unreadable {
        file: PathBuf,
        error: std::io::Error,
    },
    /// The file is not the one the table names.
    #[error("{}: sha256 {actual}, expected {expected}", file.display())]
    Mismatch {
        file: PathBuf,
        /// The committed hash (hex).
        expected: String,
        /// The hash of the file on disk (hex).
        actual: String,
    },
}

/// The committed sha256 (hex) of `file` in a `sha256sum -c` table (`HASH  NAME` or `HASH *NAME` lines).
pub fn expected_sha256<'t>(table: &'t str, file: &str) -> Option<&'t str> {
    expected_sha256s(table, file).next()
}

/// Every committed sha256 of `file` in a table: tables concatenated from several model directories (the
/// reader's members, each with its own `config.json`) list a name once per directory.
fn expected_sha256s<'t, 'f>(
    table: &'t str,
    file: &'f str,
) -> impl Iterator<Item = &'t str> + use<'t, 'f> {
    table.lines().filter_map(move |line| {
        let mut parts = line.split_whitespace();
        let hash = parts.next()?;
        let name = parts.next()?;
        (name.trim_start_matches('*') == file).then_some(hash)
    })
}

/// Reads the file at `path` whole and checks it against its hash in `table`, under its file name; where the
/// table lists that name more than once, any of its hashes is accepted.
pub fn read_verified(table: &str, path: &Path) -> Result<Vec<u8>, ChecksumError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let expected = expected_sha256(table, name).ok_or_else(|| ChecksumError::NoChecksum {
        file: path.to_path_buf(),
        name: name.to_string(),
    })?;
    let bytes = std::fs::read(path).map_err(|error| ChecksumError::Unreadable {
        file: path.to_path_buf(),
        error,
    })?;
    let actual = hex::encode(Sha256::digest(&bytes));
    if !expected_sha256s(table, name).any(|e| actual.eq_ignore_ascii_case(e)) {
        return Err(ChecksumError::Mismatch {
            file: path.to_path_buf(),
            expected: expected.to_string(),
            actual,
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824  hello.txt
0000000000000000000000000000000000000000000000000000000000000000 *other.bin
";

    #[test]
    fn a_file_is_read_only_when_it_matches_its_line() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(expected_sha256(TABLE, "other.bin").map(str::len), Some(64));
        assert_eq!(expected_sha256(TABLE, "nope.bin"), None);

        let hello = dir.path().join("hello.txt");
        std::fs::write(&hello, "hello").unwrap();
        assert_eq!(read_verified(TABLE, &hello).unwrap(), b"hello");

        std::fs::write(&hello, "hello!").unwrap();
        assert!(matches!(
            read_verified(TABLE, &hello),
            Err(ChecksumError::Mismatch { .. })
        ));
        let other = dir.path().join("other.bin");
        assert!(matches!(
            read_verified(TABLE, &other),
            Err(ChecksumError::Unreadable { .. })
        ));
        // A table of two directories: either file of the name is accepted, nothing else.
        let two = format!(
            "{TABLE}{}  hello.txt\n",
            hex::encode(Sha256::digest(b"hello!"))
        );
        assert_eq!(read_verified(&two, &hello).unwrap(), b"hello!");
        std::fs::write(&hello, "hello?").unwrap();
        assert!(matches!(
            read_verified(&two, &hello),
            Err(ChecksumError::Mismatch { .. })
        ));
        let unknown = dir.path().join("unknown.bin");
        std::fs::write(&unknown, "x").unwrap();
        assert!(matches!(
            read_verified(TABLE, &unknown),
            Err(ChecksumError::NoChecksum { .. })
        ));
    }
}
