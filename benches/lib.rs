//! Attest's benchmarks: the criterion bench `fuse` (RRF merge), the `cluster_bench`, `cluster_scale` and
//! `fallback_bench` drivers (examples that start real role processes), and the scale scripts beside them. The
//! library holds what the drivers share and a test can reach.

use std::future::Future;

/// Runs `work` until it ends or the process is told to stop (SIGINT, SIGTERM); then drops it, and with it what it
/// owns. A driver's work owns its local cluster, whose `Drop` runs `local-cluster.sh down`: the script starts its
/// processes in the background, where SIGINT is ignored, so a driver stopped by Ctrl-C or `kill` used to leave all
/// of them serving — at 10M, seven processes holding 44 GB of disk and most of the page cache.
pub async fn stopped_on_signal<T>(
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let stopped_by = tokio::select! {
        done = work => return done,
        _ = interrupt.recv() => "SIGINT",
        _ = terminate.recv() => "SIGTERM",
    };
    anyhow::bail!("stopped by {stopped_by}; the cluster was taken down")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Stands for the cluster: records that it was dropped.
    struct Owned(Arc<AtomicBool>);

    impl Drop for Owned {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn work_that_ends_is_returned() {
        assert_eq!(stopped_on_signal(async { Ok(7) }).await.unwrap(), 7);
        let failed = stopped_on_signal(async { Err::<(), _>(anyhow::anyhow!("no")) }).await;
        assert_eq!(failed.unwrap_err().to_string(), "no");
    }

    #[tokio::test]
    async fn a_signal_drops_the_work_and_what_it_owns() {
        let dropped = Arc::new(AtomicBool::new(false));
        let owned = Owned(Arc::clone(&dropped));
        let work = async move {
            let _cluster = owned;
            // The handlers are in place before the work is first polled; SIGTERM to this process.
            // SAFETY: raise has no preconditions.
            unsafe { libc::raise(libc::SIGTERM) };
            std::future::pending::<anyhow::Result<()>>().await
        };
        let stopped =
            tokio::time::timeout(std::time::Duration::from_secs(60), stopped_on_signal(work))
                .await
                .expect("the signal ends the work");
        assert_eq!(
            stopped.unwrap_err().to_string(),
            "stopped by SIGTERM; the cluster was taken down"
        );
        assert!(
            dropped.load(Ordering::SeqCst),
            "what the work owned is dropped"
        );
    }
}
