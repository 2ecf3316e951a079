//! One bounded pool per process for CPU-heavy work — FAISS and tantivy searches, model inference (embedder,
//! reranker, reader), chunking, MinHash, request parsing — so that such work never runs on the async workers
//! and a burst of it cannot start more threads than there are cores (tokio's blocking pool alone would start
//! up to 512). Work waits for a permit on the async side, then runs on tokio's blocking pool; the permit is
//! held for exactly as long as the closure runs. Quickwit's `run_cpu_intensive` is the model.
//!
//! The size is `available_parallelism` unless a role sets it once at start-up ([`set_threads`]).

use std::sync::{Arc, OnceLock};

use tokio::sync::Semaphore;

/// The permits and how many there are.
static POOL: OnceLock<(Arc<Semaphore>, usize)> = OnceLock::new();

fn pool_of(threads: usize) -> (Arc<Semaphore>, usize) {
    let threads = threads.max(1);
    (Arc::new(Semaphore::new(threads)), threads)
}

fn pool() -> &'static (Arc<Semaphore>, usize) {
    POOL.get_or_init(|| pool_of(std::thread::available_parallelism().map_or(2, |n| n.get())))
}

/// Sizes the pool (at least 1). Only a call before any use counts; returns whether it did.
pub fn set_threads(threads: usize) -> bool {
    POOL.set(pool_of(threads)).is_ok()
}

/// How many closures may run at once.
pub fn threads() -> usize {
    pool().1
}

/// The pool failed to run the closure (it panicked, or the runtime is shutting down).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPoolError(pub String);

impl std::fmt::Display for CpuPoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CPU pool: {}", self.0)
    }
}

impl std::error::Error for CpuPoolError {}

/// Runs `f` on the bounded pool and returns its result.
pub async fn run_cpu_intensive<T, F>(f: F) -> Result<T, CpuPoolError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let permit = Arc::clone(&pool().0)
        .acquire_owned()
        .await
        .map_err(|e| CpuPoolError(e.to_string()))?;
    // The closure runs inside the caller's span: its log lines keep the request id, its spans the trace.
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _held = permit;
        let _entered = span.enter();
        f()
    })
    .await
    .map_err(|e| CpuPoolError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_closures_run_at_once_than_the_pool_has_threads() {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (running, most) = (Arc::clone(&running), Arc::clone(&most));
                tokio::spawn(run_cpu_intensive(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    running.fetch_sub(1, Ordering::SeqCst);
                }))
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let most = most.load(Ordering::SeqCst);
        assert!(
            most >= 1 && most <= threads(),
            "{most} at once, pool of {}",
            threads()
        );
        let panicked = run_cpu_intensive(|| panic!("boom")).await;
        assert!(panicked.is_err());
        assert_eq!(
            run_cpu_intensive(|| 7).await,
            Ok(7),
            "a panic does not leak its permit"
        );
    }
}
