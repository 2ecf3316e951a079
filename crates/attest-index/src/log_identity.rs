//! Which ingest log this is, and the notes a replica keeps about its peers' logs.
//!
//! Log positions only compare within one log. A replica that comes back with an empty disk under the same node,
//! or is restored from a snapshot, numbers its records again from where that log stands, so a peer that
//! remembers "everything through position P of that node" would skip writes the new log took at positions it
//! thinks it has read. Each log therefore has an id, a random u64 drawn when it is created (or when a log from
//! before ids opens) and drawn again when a snapshot is restored: a position is meaningful only with its log's
//! id (catch-up's `DocVersionsResponse.log_id`).
//!
//! The notes are catch-up's cursors on the peers' logs (opaque bytes to this crate), kept in the log's `meta`
//! family so that a restarted replica asks each peer only for what changed since it last read from it: without
//! them every restart listed every peer's documents in full (2.5 min of CPU on a 10M-vector cluster). A note
//! is written after the writes it accounts for, in the same database, so it never survives a crash that they do
//! not.

use rocksdb::{Direction, IteratorMode, WriteBatch, WriteOptions, DB};

use crate::error::{IndexError, Result};
use crate::wal::CF_META;

/// The log's id (u64, big-endian).
const KEY_LOG_ID: &[u8] = b"log_id";
/// Prefix of a note on a peer's log: followed by the peer's node id (u64, big-endian).
const PEER_NOTE_PREFIX: &[u8] = b"peer_cursor/";

/// The log's id, drawn and durably recorded first if it has none.
pub(crate) fn ensure(db: &DB) -> Result<u64> {
    let meta = db.cf_handle(CF_META).expect("meta cf");
    match db.get_cf(meta, KEY_LOG_ID)? {
        Some(b) => {
            Ok(u64::from_be_bytes(b.as_slice().try_into().map_err(
                |_| IndexError::Serialization("bad log id".into()),
            )?))
        }
        None => renew(db),
    }
}

/// Draws a new id for the log and records it durably (a restored snapshot is a new log).
pub(crate) fn renew(db: &DB) -> Result<u64> {
    let meta = db.cf_handle(CF_META).expect("meta cf");
    // Never 0: that is what a peer from before ids answers.
    let id = rand::random::<u64>() | 1;
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    db.put_cf_opt(meta, KEY_LOG_ID, id.to_be_bytes(), &sync)?;
    Ok(id)
}

fn peer_note_key(peer: u64) -> Vec<u8> {
    [PEER_NOTE_PREFIX, &peer.to_be_bytes()].concat()
}

/// The note last kept on peer `peer`'s log, if any.
pub(crate) fn peer_note(db: &DB, peer: u64) -> Result<Option<Vec<u8>>> {
    let meta = db.cf_handle(CF_META).expect("meta cf");
    Ok(db.get_cf(meta, peer_note_key(peer))?)
}

/// Keeps `note` on peer `peer`'s log. Not synced: a note lost in a crash leaves an older one (or none), which
/// only makes the next catch-up list more.
pub(crate) fn keep_peer_note(db: &DB, peer: u64, note: &[u8]) -> Result<()> {
    let meta = db.cf_handle(CF_META).expect("meta cf");
    db.put_cf(meta, peer_note_key(peer), note)?;
    Ok(())
}

/// Adds to `batch` the removal of every note on peers' logs (the log lost documents those notes account for).
pub(crate) fn forget_peer_notes(db: &DB, batch: &mut WriteBatch) -> Result<()> {
    let meta = db.cf_handle(CF_META).expect("meta cf");
    for entry in db.iterator_cf(
        meta,
        IteratorMode::From(PEER_NOTE_PREFIX, Direction::Forward),
    ) {
        let (key, _) = entry?;
        if !key.starts_with(PEER_NOTE_PREFIX) {
            break;
        }
        batch.delete_cf(meta, key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::wal::IngestLog;

    #[test]
    fn a_log_keeps_its_id_until_renewed_and_its_notes_across_opens() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("wal");
        let (id, other) = {
            let log = IngestLog::open(&path).unwrap();
            let other = IngestLog::open(&tmp.path().join("other")).unwrap();
            assert_eq!(log.reader().peer_note(7).unwrap(), None);
            log.reader().keep_peer_note(7, b"through 42").unwrap();
            log.reader().keep_peer_note(8, b"through 3").unwrap();
            (log.log_id(), other.log_id())
        };
        assert_ne!(id, 0);
        assert_ne!(id, other, "two logs, two ids");
        let mut log = IngestLog::open(&path).unwrap();
        assert_eq!(log.log_id(), id, "the id survives a reopen");
        assert_eq!(
            log.reader().peer_note(7).unwrap().as_deref(),
            Some(&b"through 42"[..])
        );
        let renewed = log.renew_id().unwrap();
        assert_ne!(renewed, id);
        assert_eq!(log.reader().log_id(), renewed, "readers see the new id");
        drop(log);
        let log = IngestLog::open(&path).unwrap();
        assert_eq!(log.log_id(), renewed, "the renewed id is the recorded one");
        assert_eq!(
            log.reader().peer_note(8).unwrap().as_deref(),
            Some(&b"through 3"[..])
        );
    }

    /// Documents forgotten (a damaged segment's, whose vectors the log no longer held) take the notes on the
    /// peers with them: kept, the next catch-up would list only what changed since and never copy them back.
    #[test]
    fn forgotten_documents_take_the_notes_on_peers_with_them() {
        use crate::wal::LogOp;
        let tmp = tempfile::tempdir().unwrap();
        let mut log = IngestLog::open(tmp.path()).unwrap();
        let seqs = log
            .append(&[(
                LogOp::Delete {
                    tenant: "t".into(),
                    doc_id: "d".into(),
                },
                5,
            )])
            .unwrap();
        let reader = log.reader();
        reader.keep_peer_note(3, b"through 9").unwrap();
        reader.keep_peer_note(4, b"through 7").unwrap();
        log.forget_documents(&[("t".into(), "d".into(), seqs[0])])
            .unwrap();
        assert_eq!(reader.peer_note(3).unwrap(), None);
        assert_eq!(reader.peer_note(4).unwrap(), None);
        drop((log, reader));
        let log = IngestLog::open(tmp.path()).unwrap();
        assert_eq!(log.reader().peer_note(3).unwrap(), None, "durably");
    }
}
