//! Where an ingest log's (`wal` directory's) disk goes, read-only: bytes and keys per column family, the raw
//! bytes of the `dedup` family's documents (`s` keys) and bucket entries (`b` keys) before RocksDB encodes them,
//! and the bookkeeping of its `meta` family (last sequence number, how far sealed vectors were dropped).
//!
//!     log_breakdown DIR...
use rocksdb::{Options, DB};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for dir in std::env::args().skip(1) {
        let cfs = DB::list_cf(&Options::default(), &dir)?;
        let db = DB::open_cf_for_read_only(&Options::default(), &dir, &cfs, false)?;
        for name in &cfs {
            let cf = db.cf_handle(name).expect("listed");
            let sst = db
                .property_int_value_cf(&cf, "rocksdb.total-sst-files-size")?
                .unwrap_or(0);
            let keys = db
                .property_int_value_cf(&cf, "rocksdb.estimate-num-keys")?
                .unwrap_or(0);
            println!("{dir}\t{name}\t{sst} bytes\t{keys} keys");
        }
        if let Some(dedup) = db.cf_handle("dedup") {
            // (entries, key bytes, value bytes) of `s` and of `b` keys.
            let mut kinds = [(0u64, 0u64, 0u64); 2];
            for item in db.iterator_cf(&dedup, rocksdb::IteratorMode::Start) {
                let (k, v) = item?;
                let kind = &mut kinds[usize::from(k.first() == Some(&b'b'))];
                kind.0 += 1;
                kind.1 += k.len() as u64;
                kind.2 += v.len() as u64;
            }
            for ((n, k, v), name) in kinds.iter().zip(["documents", "bucket entries"]) {
                println!("{dir}	dedup	{name}: {n}, raw keys {k} bytes, raw values {v} bytes");
            }
        }
        let meta = db.cf_handle("meta").expect("meta family");
        for key in ["last_seq", "vectors_dropped_through"] {
            let value = db
                .get_cf(&meta, key)?
                .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
                .map(u64::from_be_bytes);
            println!("{dir}\tmeta\t{key} = {value:?}");
        }
    }
    Ok(())
}
