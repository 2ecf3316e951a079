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
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{FuturesOrdered, StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{GetResultPayload, MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};

mod destinations;
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

    /// Uploads a local file to `key`: one put below the part size, else a multipart upload in parts of the part
    /// size, streamed from disk (at most `upload_concurrency` parts in memory). `progress(n)` is called with the
    /// bytes just sent (increments, as parts finish). Resume: when an object of exactly the file's size already
    /// exists at `key`, nothing is sent and `Ok(0)` is returned. A failed or cancelled multipart upload leaves no
    /// visible object and is aborted (on cancellation, by a task spawned on the current runtime). Returns the
    /// bytes sent.
    pub async fn upload_file(
        &self,
        local: &Path,
        key: &str,
        progress: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<u64, StoreError> {
        let path = self.path(key)?;
        let size = tokio::fs::metadata(local)
            .await
            .map_err(|e| io_err(key, local, e))?
            .len();
        if self.size_of(key).await? == Some(size) {
            return Ok(0);
        }
        if size < self.part_size as u64 {
            let data = tokio::fs::read(local)
                .await
                .map_err(|e| io_err(key, local, e))?;
            if data.len() as u64 != size {
                return Err(io_err(
                    key,
                    local,
                    changed_while_read(size, data.len() as u64),
                ));
            }
            self.store
                .put(&path, PutPayload::from(data))
                .await
                .map_err(|e| store_err(key, e))?;
            progress(size);
            return Ok(size);
        }

        let upload = self
            .store
            .put_multipart(&path)
            .await
            .map_err(|e| store_err(key, e))?;
        let mut guard = AbortOnDrop(Some(upload));
        let result = self
            .send_parts(&mut guard, local, key, size, progress)
            .await;
        let result = match result {
            Ok(()) => {
                let upload = guard
                    .0
                    .as_mut()
                    .expect("the upload is held until completed");
                upload.complete().await.map_err(|e| store_err(key, e))
            }
            Err(e) => Err(e),
        };
        // Completed: nothing to abort. Failed: abort here (a drop while this runs aborts in the background).
        match result {
            Ok(_) => {
                guard.0 = None;
                Ok(size)
            }
            Err(e) => {
                if let Some(upload) = guard.0.as_mut() {
                    let _ = upload.abort().await;
                }
                guard.0 = None;
                Err(e)
            }
        }
    }

    async fn send_parts(
        &self,
        guard: &mut AbortOnDrop,
        local: &Path,
        key: &str,
        size: u64,
        progress: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<(), StoreError> {
        let upload = guard
            .0
            .as_mut()
            .expect("the upload is held while parts are sent");
        let file = tokio::fs::File::open(local)
            .await
            .map_err(|e| io_err(key, local, e))?
            .into_std()
            .await;
        let mut reader = BlockingFile::new(file, local);
        let mut in_flight = FuturesOrdered::new();
        let mut offset = 0u64;
        while offset < size {
            let want = (size - offset).min(self.part_size as u64) as usize;
            let data = reader.read_exact(key, want).await?;
            offset += want as u64;
            let part = upload.put_part(PutPayload::from(data));
            in_flight.push_back(async move { part.await.map(|()| want as u64) });
            if in_flight.len() >= self.upload_concurrency {
                let sent = in_flight
                    .next()
                    .await
                    .expect("a part is in flight")
                    .map_err(|e| store_err(key, e))?;
                progress(sent);
            }
        }
        while let Some(sent) = in_flight.next().await {
            progress(sent.map_err(|e| store_err(key, e))?);
        }
        Ok(())
    }

    /// Downloads `key` into `dest` (parent directories created), hashing (sha256) while writing, then syncs it.
    /// When the object is missing, or its size or hash differs from `bytes`/`sha256_hex`, or anything fails (or
    /// the future is dropped), `dest` is removed; the error names the key. `progress(n)` gets the bytes just
    /// written.
    pub async fn download_verified(
        &self,
        key: &str,
        dest: &Path,
        bytes: u64,
        sha256_hex: &str,
        progress: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<(), StoreError> {
        let mut cleanup = RemoveOnDrop(Some(dest.to_path_buf()));
        if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| io_err(key, parent, e))?;
        }
        let file = tokio::fs::File::create(dest)
            .await
            .map_err(|e| io_err(key, dest, e))?
            .into_std()
            .await;
        let mut sink = Some(BlockingFile::new(file, dest));
        let (size, hash) = self
            .stream_object(key, Some(bytes), &mut sink, progress)
            .await?;
        check(key, bytes, sha256_hex, size, &hash)?;
        let mut sink = sink.expect("the sink is returned");
        sink.sync(key).await?;
        cleanup.0 = None;
        Ok(())
    }

    /// Size and sha256 (lowercase hex) of the object at `key`, read through without keeping it.
    pub async fn hash_object(&self, key: &str) -> Result<(u64, String), StoreError> {
        self.stream_object(key, None, &mut None, &|_| {}).await
    }

    /// Reads `key` through, hashing it and writing it to `sink` when there is one. With `expect`, stops as soon
    /// as the object is known to be of another size.
    async fn stream_object(
        &self,
        key: &str,
        expect: Option<u64>,
        sink: &mut Option<BlockingFile>,
        progress: &(dyn Fn(u64) + Send + Sync),
    ) -> Result<(u64, String), StoreError> {
        let path = self.path(key)?;
        let got = self.store.get(&path).await.map_err(|e| store_err(key, e))?;
        if let Some(want) = expect {
            if got.meta.size != want {
                return Err(size_mismatch(key, want, got.meta.size));
            }
        }
        let mut hasher = Some(Sha256::new());
        let mut total = 0u64;
        match got.payload {
            GetResultPayload::File(file, local) => {
                // A directory destination: read, hash and write in large chunks on blocking threads.
                let mut source = BlockingFile::new(file, &local);
                loop {
                    let chunk = source.read_some(key, CHUNK).await?;
                    if chunk.is_empty() {
                        break;
                    }
                    total += chunk.len() as u64;
                    if let Some(want) = expect.filter(|want| total > *want) {
                        return Err(size_mismatch(key, want, total));
                    }
                    let n = chunk.len() as u64;
                    consume(key, chunk, &mut hasher, sink).await?;
                    progress(n);
                }
            }
            GetResultPayload::Stream(mut stream) => {
                let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
                while let Some(piece) = stream.try_next().await.map_err(|e| store_err(key, e))? {
                    total += piece.len() as u64;
                    if let Some(want) = expect.filter(|want| total > *want) {
                        return Err(size_mismatch(key, want, total));
                    }
                    buf.extend_from_slice(&piece);
                    if buf.len() >= CHUNK {
                        let n = buf.len() as u64;
                        consume(
                            key,
                            std::mem::replace(&mut buf, Vec::with_capacity(CHUNK)),
                            &mut hasher,
                            sink,
                        )
                        .await?;
                        progress(n);
                    }
                }
                if !buf.is_empty() {
                    let n = buf.len() as u64;
                    consume(key, buf, &mut hasher, sink).await?;
                    progress(n);
                }
            }
        }
        let hash = hex::encode(hasher.take().expect("the hasher is returned").finalize());
        Ok((total, hash))
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

fn changed_while_read(expected: u64, got: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!("changed while being read: expected {expected} bytes, read {got}"),
    )
}

fn size_mismatch(key: &str, want: u64, got: u64) -> StoreError {
    StoreError::Mismatch {
        key: key.to_string(),
        reason: format!("size {got} bytes, expected {want}"),
    }
}

fn check(key: &str, bytes: u64, sha256_hex: &str, size: u64, hash: &str) -> Result<(), StoreError> {
    if size != bytes {
        return Err(size_mismatch(key, bytes, size));
    }
    if !hash.eq_ignore_ascii_case(sha256_hex.trim()) {
        return Err(StoreError::Mismatch {
            key: key.to_string(),
            reason: format!("sha256 {hash}, expected {}", sha256_hex.trim()),
        });
    }
    Ok(())
}

/// Hashes `chunk` and writes it to `sink` (if any) on a blocking thread.
async fn consume(
    key: &str,
    chunk: Vec<u8>,
    hasher: &mut Option<Sha256>,
    sink: &mut Option<BlockingFile>,
) -> Result<(), StoreError> {
    let mut h = hasher.take().expect("the hasher is returned");
    let mut file = sink.as_mut().and_then(|s| s.file.take());
    let result = tokio::task::spawn_blocking(move || {
        h.update(&chunk);
        let written = match file.as_mut() {
            Some(f) => f.write_all(&chunk),
            None => Ok(()),
        };
        (h, file, written)
    })
    .await;
    let (h, file, written) = result.map_err(|e| join_err(key, e))?;
    *hasher = Some(h);
    if let Some(s) = sink.as_mut() {
        s.file = file;
        written.map_err(|e| io_err(key, &s.path, e))?;
    }
    Ok(())
}

/// A local file used from async code: every read, write and sync runs on a blocking thread.
struct BlockingFile {
    file: Option<std::fs::File>,
    path: PathBuf,
}

impl BlockingFile {
    fn new(file: std::fs::File, path: &Path) -> Self {
        BlockingFile {
            file: Some(file),
            path: path.to_path_buf(),
        }
    }

    async fn blocking<T: Send + 'static>(
        &mut self,
        key: &str,
        op: impl FnOnce(&mut std::fs::File) -> std::io::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let Some(mut file) = self.file.take() else {
            return Err(io_err(
                key,
                &self.path,
                std::io::Error::other("an earlier operation failed"),
            ));
        };
        let (file, result) = tokio::task::spawn_blocking(move || {
            let result = op(&mut file);
            (file, result)
        })
        .await
        .map_err(|e| join_err(key, e))?;
        self.file = Some(file);
        result.map_err(|e| io_err(key, &self.path, e))
    }

    /// Exactly `len` bytes (an error if the file ends sooner).
    async fn read_exact(&mut self, key: &str, len: usize) -> Result<Vec<u8>, StoreError> {
        self.blocking(key, move |f| {
            let mut buf = vec![0u8; len];
            let mut filled = 0;
            while filled < len {
                match f.read(&mut buf[filled..]) {
                    Ok(0) => return Err(changed_while_read(len as u64, filled as u64)),
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(buf)
        })
        .await
    }

    /// Up to `max` bytes; empty at the end of the file.
    async fn read_some(&mut self, key: &str, max: usize) -> Result<Vec<u8>, StoreError> {
        self.blocking(key, move |f| {
            let mut buf = vec![0u8; max];
            let mut filled = 0;
            while filled < max {
                match f.read(&mut buf[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            buf.truncate(filled);
            Ok(buf)
        })
        .await
    }

    async fn sync(&mut self, key: &str) -> Result<(), StoreError> {
        self.blocking(key, |f| f.sync_all()).await
    }
}

/// Aborts a multipart upload that is dropped unfinished (the future of `upload_file` dropped mid-way), so S3 does
/// not keep its parts. The abort runs on a task spawned on the current runtime; outside one it is skipped.
struct AbortOnDrop(Option<Box<dyn MultipartUpload>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(mut upload) = self.0.take() {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = upload.abort().await;
                });
            }
        }
    }
}

/// Removes a partly written download unless disarmed (also when the future is dropped).
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
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
