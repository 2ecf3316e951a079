//! Bytes per column family of ingest logs (`wal` directories), read-only: where a replica row's disk goes.
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
            println!("{dir}\t{name}\t{sst}\t{keys}");
        }
    }
    Ok(())
}
