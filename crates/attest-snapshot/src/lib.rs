//! The storage side of cluster snapshots: a *snapshot destination*.
//!
//! A destination is where `attest snapshot create` writes a snapshot's files and manifests and where
//! `attest snapshot restore` reads them back. It is one of
//!
//! - a local or mounted **directory** (`/backups/attest`, `./snaps`, created when missing) or `file:///abs/path`;
//! - **S3-compatible object storage**, `s3://bucket[/prefix]`, with credentials, region and endpoint from the
//!   environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
//!   `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, ... everything `object_store`'s `AmazonS3Builder::from_env` reads), or
//!   given explicitly with [`SnapshotStore::open_with`].
//!
//! Both go through the [`object_store`] crate. Keys are `/`-separated and relative to the location. Large files are
//! uploaded in parts, streamed from disk with bounded memory ([`SnapshotStore::upload_file`]); an upload re-run
//! after an interruption skips the objects that are already complete (an interrupted multipart upload never leaves
//! a visible object). Downloads are checked against the manifest's size and sha256 while they are written
//! ([`SnapshotStore::download_verified`]), and a whole snapshot can be verified without keeping it
//! ([`SnapshotStore::hash_object`]).
//!
//! Every error names the key (and the local file where there is one).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

mod destinations;
mod transfer;
pub use destinations::{DestinationPolicy, SnapshotsConfig};

/// Default size of one part of a multipart upload, and the size from which an upload is multipart.
pub const DEFAULT_PART_SIZE: usize = 8 * 1024 * 1024;
/// Default number of parts of one multipart upload in flight at once (memory: this many parts).
pub const DEFAULT_UPLOAD_CONCURRENCY: usize = 4;
/// Size of the chunks local files are read, hashed and written in (each on a blocking thread).
const CHUNK: usize = 1024 * 1024;

/// Where content-addressed snapshots (cluster snapshot format 2) keep file contents, under the destination:
/// one object per distinct file, shared by every snapshot of the destination that holds that file.
pub const BLOBS: &str = "blobs";

/// The key of the blob holding content of this sha256 (64 lowercase hex digits) under `blobs`:
/// `<blobs>/<first two digits>/<sha256>`; `None` for anything else (manifests are read from the destination,
/// so their hashes are checked before they become keys).
pub fn blob_key(blobs: &str, sha256_hex: &str) -> Option<String> {
    let ok = sha256_hex.len() == 64
        && sha256_hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| format!("{blobs}/{}/{sha256_hex}", &sha256_hex[..2]))
}

/// The directory a location names (a path or `file:///abs/path`; not `s3://`), or why it names none.
pub(crate) fn directory_of(location: &str) -> Result<PathBuf, String> {
    if location.starts_with("file:") {
        let url = url::Url::parse(location).map_err(|e| format!("not a file URL: {e}"))?;
        if url
            .host_str()
            .is_some_and(|h| !h.is_empty() && h != "localhost")
        {
            return Err("a file URL must be file:///absolute/path".into());
        }
        url.to_file_path()
            .map_err(|_| "a file URL must be file:///absolute/path".into())
    } else if location.contains("://") {
        Err(
            "unsupported scheme (expected a directory, file:///abs/path or s3://bucket[/prefix])"
                .into(),
        )
    } else {
        Ok(PathBuf::from(location))
    }
}

/// Errors of a snapshot destination. Every one names the key (relative to the location) it concerns.
#[derive(thiserror::Error, Debug)]
pub enum StoreError {
    /// The location (or an option given with it) is not one this store can open.
    #[error("bad snapshot location: {0}")]
    BadLocation(String),
    /// No object at `key`.
    #[error("{key}: not found in the snapshot destination")]
    Missing { key: String },
    /// The object at `key` is not what the manifest says (size or sha256).
    #[error("{key}: {reason}")]
    Mismatch { key: String, reason: String },
    /// Local I/O while uploading or downloading `key`; the message names the local file.
    #[error("{key}: {source}")]
    Io {
        key: String,
        #[source]
        source: std::io::Error,
    },
    /// The object store refused or failed an operation on `key`.
    #[error("{key}: {message}")]
    Store { key: String, message: String },
}

impl StoreError {
    /// The key the error concerns (the location for [`StoreError::BadLocation`]).
    pub fn key(&self) -> &str {
        match self {
            StoreError::BadLocation(location) => location,
            StoreError::Missing { key }
            | StoreError::Mismatch { key, .. }
            | StoreError::Io { key, .. }
            | StoreError::Store { key, .. } => key,
        }
    }
}

fn io_err(key: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io {
        key: key.to_string(),
        source: std::io::Error::new(e.kind(), format!("local file {}: {e}", path.display())),
    }
}

fn store_err(key: &str, e: object_store::Error) -> StoreError {
    match e {
        object_store::Error::NotFound { .. } => StoreError::Missing {
            key: key.to_string(),
        },
        e => StoreError::Store {
            key: key.to_string(),
            message: e.to_string(),
        },
    }
}

fn join_err(key: &str, e: tokio::task::JoinError) -> StoreError {
    StoreError::Store {
        key: key.to_string(),
        message: format!("blocking task failed: {e}"),
    }
}

/// A snapshot destination: a directory or an S3-compatible bucket (with an optional prefix). Cheap to clone.
#[derive(Clone)]
pub struct SnapshotStore {
    store: Arc<dyn ObjectStore>,
    /// Prefix inside the store under which every key lives (empty for a directory).
    prefix: Vec<String>,
    location: String,
    /// The directory of a directory destination (`None` for object storage).
    dir: Option<PathBuf>,
    part_size: usize,
    upload_concurrency: usize,
}

impl fmt::Debug for SnapshotStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotStore")
            .field("location", &self.location)
            .field("part_size", &self.part_size)
            .field("upload_concurrency", &self.upload_concurrency)
            .finish_non_exhaustive()
    }
}

impl SnapshotStore {
    /// Opens a destination. `location`: a directory path (created if missing), `file:///abs/path`, or
    /// `s3://bucket[/prefix]` with credentials, region and endpoint from the environment (whatever
    /// `AmazonS3Builder::from_env` reads: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, ...). Anything else is [`StoreError::BadLocation`] naming it.
    /// Nothing is contacted here: a wrong endpoint or credentials show at the first operation.
    pub fn open(location: &str) -> Result<Self, StoreError> {
        Self::open_with(location, &[])
    }

    /// [`SnapshotStore::open`] with S3 options on top of the environment's, as `(key, value)` pairs named like the
    /// environment variables, case-insensitive (`aws_endpoint_url`, `aws_allow_http`, `aws_access_key_id`,
    /// `aws_region`, ...). An unknown option, or any option for a directory, is [`StoreError::BadLocation`].
    pub fn open_with(location: &str, options: &[(&str, &str)]) -> Result<Self, StoreError> {
        let bad = |why: &str| StoreError::BadLocation(format!("{location:?}: {why}"));
        let trimmed = location.trim();
        if trimmed.is_empty() {
            return Err(bad(
                "empty (expected a directory, file:///abs/path or s3://bucket[/prefix])",
            ));
        }
        let mut local_dir = None;
        let (store, prefix): (Arc<dyn ObjectStore>, Vec<String>) =
            if let Some(rest) = trimmed.strip_prefix("s3://") {
                let (bucket, prefix) = match rest.split_once('/') {
                    Some((bucket, prefix)) => (bucket, prefix),
                    None => (rest, ""),
                };
                if bucket.is_empty() {
                    return Err(bad("no bucket (expected s3://bucket[/prefix])"));
                }
                let prefix = split_prefix(prefix).map_err(|why| bad(&why))?;
                let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
                for (key, value) in options {
                    let config_key = AmazonS3ConfigKey::from_str(&key.to_ascii_lowercase())
                        .map_err(|_| bad(&format!("unknown S3 option {key:?}")))?;
                    builder = builder.with_config(config_key, *value);
                }
                let s3 = builder.build().map_err(|e| bad(&e.to_string()))?;
                (Arc::new(s3), prefix)
            } else {
                let dir = directory_of(trimmed).map_err(|why| bad(&why))?;
                if !options.is_empty() {
                    return Err(bad("options apply to s3:// locations only"));
                }
                std::fs::create_dir_all(&dir)
                    .map_err(|e| bad(&format!("cannot create {}: {e}", dir.display())))?;
                // Deleting a snapshot (retention) leaves no empty directories behind.
                let fs = LocalFileSystem::new_with_prefix(&dir)
                    .map_err(|e| bad(&e.to_string()))?
                    .with_automatic_cleanup(true);
                local_dir = Some(dir);
                (Arc::new(fs), Vec::new())
            };
        Ok(SnapshotStore {
            store,
            prefix,
            location: location.to_string(),
            dir: local_dir,
            part_size: DEFAULT_PART_SIZE,
            upload_concurrency: DEFAULT_UPLOAD_CONCURRENCY,
        })
    }

    /// The location as given to [`SnapshotStore::open`].
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Why the top-level name `name` of a directory destination must not be read or deleted as a snapshot's
    /// folder: it is a symbolic link (which could lead anywhere, a node's data included) or not a directory.
    /// `None` for a plain directory, a name that is not there, and object storage (which has no links).
    pub fn entry_problem(&self, name: &str) -> Option<String> {
        let path = self.dir.as_ref()?.join(name);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if meta.file_type().is_symlink() {
            Some(format!(
                "{} is a symbolic link; a snapshot is a plain directory of the destination",
                path.display()
            ))
        } else if !meta.is_dir() {
            Some(format!("{} is not a directory", path.display()))
        } else {
            None
        }
    }

    /// Part size of multipart uploads (and the file size from which an upload is multipart); default 8 MiB. S3
    /// refuses parts under 5 MiB (except the last); a directory takes any size. At least 1.
    pub fn with_part_size(mut self, bytes: usize) -> Self {
        self.part_size = bytes.max(1);
        self
    }

    /// How many parts of one upload are sent at once (default 4; memory is about this times the part size).
    pub fn with_upload_concurrency(mut self, parts: usize) -> Self {
        self.upload_concurrency = parts.max(1);
        self
    }

    pub fn part_size(&self) -> usize {
        self.part_size
    }

    fn path(&self, key: &str) -> Result<ObjectPath, StoreError> {
        let mut parts: Vec<&str> = self.prefix.iter().map(String::as_str).collect();
        for part in key.split('/') {
            if part.is_empty() {
                continue;
            }
            if part == "." || part == ".." {
                return Err(StoreError::Store {
                    key: key.to_string(),
                    message: "a key may not contain '.' or '..' segments".into(),
                });
            }
            parts.push(part);
        }
        ObjectPath::parse(parts.join("/")).map_err(|e| StoreError::Store {
            key: key.to_string(),
            message: format!("invalid key: {e}"),
        })
    }

    /// Writes `data` to `key` in one put (atomic: readers see the old object or the new one).
    pub async fn put_bytes(&self, key: &str, data: Vec<u8>) -> Result<(), StoreError> {
        let path = self.path(key)?;
        self.store
            .put(&path, PutPayload::from(data))
            .await
            .map_err(|e| store_err(key, e))?;
        Ok(())
    }

    /// The whole object at `key`; `None` when missing.
    pub async fn get_bytes(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path(key)?;
        let got = match self.store.get(&path).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(store_err(key, e)),
        };
        let data: Bytes = got.bytes().await.map_err(|e| store_err(key, e))?;
        Ok(Some(data.to_vec()))
    }

    /// Size of the object at `key`; `None` when missing.
    pub async fn size_of(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let path = self.path(key)?;
        match self.store.head(&path).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_err(key, e)),
        }
    }

    /// The names directly under `prefix` (`""` = the top) that are "directories" (common prefixes), sorted.
    pub async fn list_dirs(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let path = self.path(prefix)?;
        let listed = self
            .store
            .list_with_delimiter(if path.as_ref().is_empty() {
                None
            } else {
                Some(&path)
            })
            .await;
        let listed = match listed {
            Ok(listed) => listed,
            Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(e) => return Err(store_err(prefix, e)),
        };
        let mut names: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Every object under `prefix`, as (key relative to the location, size), in key order: what a snapshot in
    /// progress has uploaded so far.
    pub async fn list_objects(&self, prefix: &str) -> Result<Vec<(String, u64)>, StoreError> {
        let path = self.path(prefix)?;
        let skip = self.prefix.len();
        let listed: Vec<object_store::ObjectMeta> =
            match self.store.list(Some(&path)).try_collect().await {
                Ok(listed) => listed,
                Err(object_store::Error::NotFound { .. }) => return Ok(Vec::new()),
                Err(e) => return Err(store_err(prefix, e)),
            };
        let mut out: Vec<(String, u64)> = listed
            .into_iter()
            .map(|m| {
                let parts: Vec<String> = m
                    .location
                    .parts()
                    .skip(skip)
                    .map(|p| p.as_ref().to_string())
                    .collect();
                (parts.join("/"), m.size)
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// Deletes the object at `key` (nothing when there is none): a re-run replaces a file whose name does not
    /// tell its content.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path(key)?;
        match self.store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(store_err(key, e)),
        }
    }

    /// Deletes every object under `prefix` (a snapshot, for retention); returns how many. `prefix` must not be
    /// empty (use the top-level names from [`SnapshotStore::list_dirs`]).
    pub async fn delete_prefix(&self, prefix: &str) -> Result<u64, StoreError> {
        if prefix.split('/').all(str::is_empty) {
            return Err(StoreError::Store {
                key: prefix.to_string(),
                message: "refusing to delete everything".into(),
            });
        }
        let path = self.path(prefix)?;
        let locations = self
            .store
            .list(Some(&path))
            .map_ok(|meta| meta.location)
            .boxed();
        let deleted: Vec<ObjectPath> = self
            .store
            .delete_stream(locations)
            .try_collect()
            .await
            .map_err(|e| store_err(prefix, e))?;
        Ok(deleted.len() as u64)
    }
}

fn split_prefix(prefix: &str) -> Result<Vec<String>, String> {
    let parts: Vec<String> = prefix
        .split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    if parts.iter().any(|p| p == "." || p == "..") {
        return Err("the prefix may not contain '.' or '..'".into());
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    #[test]
    fn blob_keys_come_from_well_formed_hashes_only() {
        let sha = "ab".repeat(32);
        assert_eq!(blob_key(BLOBS, &sha), Some(format!("blobs/ab/{sha}")));
        for bad in [
            "",
            "../x",
            &"AB".repeat(32),
            &"ab".repeat(31),
            &format!("{}/x", "a".repeat(62)),
        ] {
            assert_eq!(blob_key(BLOBS, bad), None, "{bad:?}");
        }
    }

    /// The store is shared between tasks, and its futures can be spawned.
    #[test]
    fn store_and_futures_are_send() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        shareable::<SnapshotStore>();
        let tmp = std::env::temp_dir();
        let store = SnapshotStore::open(tmp.to_str().unwrap()).unwrap();
        let progress = |_n: u64| {};
        assert_send(&store.upload_file(Path::new("x"), "k", &progress));
        assert_send(&store.download_verified("k", Path::new("x"), 0, "", &progress));
        assert_send(&store.hash_object("k"));
        assert_send(&store.list_dirs(""));
        assert_send(&store.delete_prefix("p"));
    }

    #[test]
    fn keys_join_the_prefix_and_refuse_dot_segments() {
        let store =
            SnapshotStore::open_with("s3://b/pre/fix/", &[("aws_region", "us-east-1")]).unwrap();
        assert_eq!(store.path("a/b").unwrap().as_ref(), "pre/fix/a/b");
        assert_eq!(store.path("/a//b/").unwrap().as_ref(), "pre/fix/a/b");
        assert_eq!(store.path("").unwrap().as_ref(), "pre/fix");
        let err = store.path("a/../b").unwrap_err();
        assert!(err.to_string().contains("a/../b"), "{err}");
    }
}
