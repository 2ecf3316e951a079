//! The transfers of large files: an upload in parts streamed from disk with bounded memory (resumed by skipping
//! an object already whole), and a download or a read checked against the manifest's size and sha256 as it
//! streams, every read, write and hash of a local file on a blocking thread.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use futures::stream::{FuturesOrdered, StreamExt, TryStreamExt};
use object_store::{GetResultPayload, MultipartUpload, ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};

use super::{io_err, join_err, store_err, SnapshotStore, StoreError, CHUNK};

impl SnapshotStore {
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
