//! The circuit breaker around a remote embedder (SPEC "embedders"; seed 001, gap D).
//!
//! Closed: calls go through; `failure_threshold` consecutive failures (or timeouts) open it. Open: calls are
//! refused at once, without touching the network, so searches drop to BM25 immediately. After `open_timeout`
//! the next call is let through as the single half-open probe; `success_threshold` probe successes in a row
//! close it, one probe failure opens it again. State changes are published as the gauge
//! `circuit_breaker_state{service}` (0 closed, 1 half-open, 2 open) and every opening counts in
//! `circuit_breaker_trip_total{service}`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_telemetry::metrics::{CIRCUIT_BREAKER_STATE, CIRCUIT_BREAKER_TRIP_TOTAL};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Thresholds of a breaker (defaults from docs/SPEC.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BreakerConfig {
    /// Consecutive failures that open a closed breaker.
    pub failure_threshold: u32,
    /// Consecutive half-open successes that close it.
    pub success_threshold: u32,
    /// Seconds an open breaker refuses calls before letting a probe through.
    pub open_timeout_secs: f64,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            failure_threshold: 5,
            success_threshold: 2,
            open_timeout_secs: 30.0,
        }
    }
}

impl BreakerConfig {
    pub fn open_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.open_timeout_secs.max(0.0))
    }
}

/// The three states, with their gauge values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    HalfOpen,
    Open,
}

impl BreakerState {
    pub fn gauge_value(self) -> f64 {
        match self {
            BreakerState::Closed => 0.0,
            BreakerState::HalfOpen => 1.0,
            BreakerState::Open => 2.0,
        }
    }
}

/// Time source, so tests can move time by hand instead of sleeping 30 s.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to (tests).
pub struct ManualClock(Mutex<Instant>);

impl ManualClock {
    pub fn new() -> Self {
        ManualClock(Mutex::new(Instant::now()))
    }
    pub fn advance(&self, by: Duration) {
        *self.0.lock() += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.0.lock()
    }
}

/// What a guarded call returns: the call's own result, or a refusal because the breaker is open (or its one
/// half-open probe is already in flight).
#[derive(Debug)]
pub enum Guarded<T, E> {
    Done(Result<T, E>),
    Refused,
}

struct Inner {
    state: BreakerState,
    consecutive_failures: u32,
    half_open_successes: u32,
    opened_at: Instant,
    probe_in_flight: bool,
}

pub struct CircuitBreaker {
    service: String,
    config: BreakerConfig,
    clock: Arc<dyn Clock>,
    inner: Mutex<Inner>,
}

impl CircuitBreaker {
    pub fn new(service: impl Into<String>, config: BreakerConfig) -> Self {
        Self::with_clock(service, config, Arc::new(SystemClock))
    }

    pub fn with_clock(
        service: impl Into<String>,
        config: BreakerConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let breaker = CircuitBreaker {
            service: service.into(),
            config,
            inner: Mutex::new(Inner {
                state: BreakerState::Closed,
                consecutive_failures: 0,
                half_open_successes: 0,
                opened_at: clock.now(),
                probe_in_flight: false,
            }),
            clock,
        };
        metrics::counter!(CIRCUIT_BREAKER_TRIP_TOTAL, "service" => breaker.service.clone())
            .increment(0);
        breaker.publish(BreakerState::Closed);
        breaker
    }

    pub fn state(&self) -> BreakerState {
        self.inner.lock().state
    }

    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// Runs `call` unless the breaker refuses it. `counts_as_failure` says which errors mean the service is
    /// unwell (a rejected bad input does not).
    pub fn call<T, E>(
        &self,
        call: impl FnOnce() -> Result<T, E>,
        counts_as_failure: impl Fn(&E) -> bool,
    ) -> Guarded<T, E> {
        let probe = match self.admit() {
            Some(probe) => probe,
            None => return Guarded::Refused,
        };
        let result = call();
        match &result {
            Err(e) if counts_as_failure(e) => self.on_failure(probe),
            _ => self.on_success(probe),
        }
        Guarded::Done(result)
    }

    /// Some(is_probe) when the call may go ahead.
    fn admit(&self) -> Option<bool> {
        let mut inner = self.inner.lock();
        match inner.state {
            BreakerState::Closed => Some(false),
            BreakerState::Open => {
                if self.clock.now().duration_since(inner.opened_at) >= self.config.open_timeout() {
                    inner.state = BreakerState::HalfOpen;
                    inner.half_open_successes = 0;
                    inner.probe_in_flight = true;
                    drop(inner);
                    self.publish(BreakerState::HalfOpen);
                    tracing::info!(service = %self.service, event = "breaker_half_open", "circuit breaker half-open: probing");
                    Some(true)
                } else {
                    None
                }
            }
            BreakerState::HalfOpen => {
                if inner.probe_in_flight {
                    None
                } else {
                    inner.probe_in_flight = true;
                    Some(true)
                }
            }
        }
    }

    fn on_success(&self, probe: bool) {
        let mut inner = self.inner.lock();
        match inner.state {
            BreakerState::Closed => inner.consecutive_failures = 0,
            BreakerState::HalfOpen if probe => {
                inner.probe_in_flight = false;
                inner.half_open_successes += 1;
                if inner.half_open_successes >= self.config.success_threshold {
                    inner.state = BreakerState::Closed;
                    inner.consecutive_failures = 0;
                    drop(inner);
                    self.publish(BreakerState::Closed);
                    tracing::info!(service = %self.service, event = "breaker_closed", "circuit breaker closed");
                }
            }
            // A call admitted before the breaker opened finished late: it proves nothing about now.
            _ => {}
        }
    }

    fn on_failure(&self, probe: bool) {
        let mut inner = self.inner.lock();
        match inner.state {
            BreakerState::Closed => {
                inner.consecutive_failures += 1;
                if inner.consecutive_failures >= self.config.failure_threshold {
                    self.trip(inner);
                }
            }
            BreakerState::HalfOpen if probe => {
                inner.probe_in_flight = false;
                self.trip(inner);
            }
            _ => {}
        }
    }

    fn trip(&self, mut inner: parking_lot::MutexGuard<'_, Inner>) {
        inner.state = BreakerState::Open;
        inner.opened_at = self.clock.now();
        inner.half_open_successes = 0;
        let failures = inner.consecutive_failures;
        drop(inner);
        metrics::counter!(CIRCUIT_BREAKER_TRIP_TOTAL, "service" => self.service.clone())
            .increment(1);
        self.publish(BreakerState::Open);
        tracing::warn!(service = %self.service, consecutive_failures = failures, event = "breaker_open",
            "circuit breaker open: calls refused until the open timeout passes");
    }

    fn publish(&self, state: BreakerState) {
        metrics::gauge!(CIRCUIT_BREAKER_STATE, "service" => self.service.clone())
            .set(state.gauge_value());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> (CircuitBreaker, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new());
        let b = CircuitBreaker::with_clock("test", BreakerConfig::default(), clock.clone());
        (b, clock)
    }

    fn fail(b: &CircuitBreaker) -> bool {
        matches!(
            b.call(|| Err::<(), _>("down"), |_| true),
            Guarded::Done(Err(_))
        )
    }

    fn succeed(b: &CircuitBreaker) -> bool {
        matches!(
            b.call(|| Ok::<_, &str>(()), |_| true),
            Guarded::Done(Ok(()))
        )
    }

    #[test]
    fn opens_after_five_consecutive_failures_only() {
        let (b, _) = breaker();
        for _ in 0..4 {
            assert!(fail(&b));
        }
        assert!(succeed(&b), "a success resets the count");
        for _ in 0..4 {
            assert!(fail(&b));
        }
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(fail(&b));
        assert_eq!(b.state(), BreakerState::Open);
        let mut ran = false;
        assert!(matches!(
            b.call(
                || {
                    ran = true;
                    Ok::<_, &str>(())
                },
                |_| true
            ),
            Guarded::Refused
        ));
        assert!(!ran, "an open breaker never calls the service");
    }

    #[test]
    fn half_open_after_the_timeout_lets_one_probe_through_and_closes_after_two_successes() {
        let (b, clock) = breaker();
        for _ in 0..5 {
            fail(&b);
        }
        clock.advance(Duration::from_secs(29));
        assert!(!succeed(&b), "still open before 30 s");
        clock.advance(Duration::from_secs(1));
        // While the probe runs, other calls are refused.
        let inner_refused = b.call(
            || {
                Ok::<_, &str>(matches!(
                    b.call(|| Ok::<_, &str>(()), |_| true),
                    Guarded::Refused
                ))
            },
            |_| true,
        );
        assert!(matches!(inner_refused, Guarded::Done(Ok(true))));
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(succeed(&b));
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn a_failed_probe_opens_again_for_another_timeout() {
        let (b, clock) = breaker();
        for _ in 0..5 {
            fail(&b);
        }
        clock.advance(Duration::from_secs(30));
        assert!(fail(&b));
        assert_eq!(b.state(), BreakerState::Open);
        clock.advance(Duration::from_secs(10));
        assert!(!succeed(&b));
        clock.advance(Duration::from_secs(20));
        assert!(succeed(&b));
        assert!(succeed(&b));
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn errors_that_are_not_failures_leave_it_closed() {
        let (b, _) = breaker();
        for _ in 0..20 {
            b.call(|| Err::<(), _>("bad input"), |_| false);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn thresholds_are_configurable() {
        let clock = Arc::new(ManualClock::new());
        let cfg = BreakerConfig {
            failure_threshold: 2,
            success_threshold: 1,
            open_timeout_secs: 1.0,
        };
        let b = CircuitBreaker::with_clock("t2", cfg, clock.clone());
        fail(&b);
        fail(&b);
        assert_eq!(b.state(), BreakerState::Open);
        clock.advance(Duration::from_secs(1));
        assert!(succeed(&b));
        assert_eq!(b.state(), BreakerState::Closed);
    }
}
