//! The `slog` logger raft-rs requires, forwarded to `tracing` (target `raft`) with its key-values inline.

use std::fmt::Write as _;

/// A `slog::Drain` that writes every record as one `tracing` event.
pub(crate) struct TracingDrain;

struct KvLine(String);

impl slog::Serializer for KvLine {
    fn emit_arguments(&mut self, key: slog::Key, val: &std::fmt::Arguments<'_>) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(
        &self,
        record: &slog::Record<'_>,
        values: &slog::OwnedKVList,
    ) -> Result<(), slog::Never> {
        use slog::KV;
        let mut line = KvLine(record.msg().to_string());
        let _ = record.kv().serialize(record, &mut line);
        let _ = values.serialize(record, &mut line);
        let line = line.0;
        match record.level() {
            slog::Level::Critical | slog::Level::Error => tracing::error!(target: "raft", "{line}"),
            slog::Level::Warning => tracing::warn!(target: "raft", "{line}"),
            slog::Level::Info => tracing::info!(target: "raft", "{line}"),
            slog::Level::Debug => tracing::debug!(target: "raft", "{line}"),
            slog::Level::Trace => tracing::trace!(target: "raft", "{line}"),
        }
        Ok(())
    }
}
