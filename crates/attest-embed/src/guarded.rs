//! [`GuardedEmbedder`]: counts every embedder call (`embedding_request_total`, `embedding_fail_total`) and,
//! for remote embedders, puts the [`CircuitBreaker`] in front so that while the service is down calls fail at
//! once with [`EmbedError::Unavailable`] instead of waiting for a timeout.

use attest_telemetry::metrics::{EMBEDDING_FAIL_TOTAL, EMBEDDING_REQUEST_TOTAL};

use crate::breaker::{BreakerState, CircuitBreaker, Guarded};
use crate::embedder::Embedder;
use crate::error::EmbedError;

pub struct GuardedEmbedder<E> {
    inner: E,
    breaker: Option<CircuitBreaker>,
}

impl<E: Embedder> GuardedEmbedder<E> {
    /// Metrics only (the in-process model cannot be "down" the way a service can).
    pub fn metered(inner: E) -> Self {
        GuardedEmbedder {
            inner,
            breaker: None,
        }
    }

    /// Metrics and a circuit breaker.
    pub fn with_breaker(inner: E, breaker: CircuitBreaker) -> Self {
        GuardedEmbedder {
            inner,
            breaker: Some(breaker),
        }
    }

    pub fn breaker_state(&self) -> Option<BreakerState> {
        self.breaker.as_ref().map(CircuitBreaker::state)
    }

    pub fn inner(&self) -> &E {
        &self.inner
    }
}

/// Bad input is the caller's problem, not a sign that the service is unwell.
fn is_service_failure(e: &EmbedError) -> bool {
    !matches!(e, EmbedError::InvalidInput(_))
}

impl<E: Embedder> Embedder for GuardedEmbedder<E> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let counted = |result: Result<Vec<Vec<f32>>, EmbedError>| {
            metrics::counter!(EMBEDDING_REQUEST_TOTAL).increment(1);
            if result.is_err() {
                metrics::counter!(EMBEDDING_FAIL_TOTAL).increment(1);
            }
            result
        };
        match &self.breaker {
            None => counted(self.inner.embed(texts)),
            Some(breaker) => match breaker.call(|| self.inner.embed(texts), is_service_failure) {
                Guarded::Done(result) => counted(result),
                Guarded::Refused => Err(EmbedError::Unavailable(
                    "circuit breaker open: the embedding service is skipped until it recovers"
                        .into(),
                )),
            },
        }
    }

    fn count_tokens(&self, text: &str) -> usize {
        self.inner.count_tokens(text)
    }

    fn query_prefix(&self) -> &str {
        self.inner.query_prefix()
    }
    fn identity(&self) -> crate::EmbedderIdentity {
        self.inner.identity()
    }
}
