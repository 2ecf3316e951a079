//! Where an ingest log's (`wal` directory's) disk goes, read-only: bytes and keys per column family, and the
//! bookkeeping of its `meta` family (last sequence number, how far sealed vectors were dropped).
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
