//! Readiness a role's start-up sets as it goes (listening, then recovering, registering, loading models ...),
//! and the gRPC health service kept in step with it.
//!
//! Every role listens at once and says what it waits for: `/readyz` answers 503 with the reason, and gRPC health
//! answers `NOT_SERVING` for the overall service (`""`, what a kubelet gRPC probe asks by default) until the
//! role can serve. The service named [`LIVENESS_SERVICE`] is `SERVING` as long as the process runs, so a
//! liveness probe does not restart a node that is only still replaying its log.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tonic_health::pb::health_check_response;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};
use tonic_health::ServingStatus;

use crate::ops::ReadinessCheck;

/// The gRPC health service name that only says the process is up (the chart's liveness probes ask for it).
pub const LIVENESS_SERVICE: &str = "liveness";

/// How often a gRPC health watch looks for a change.
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

/// A readiness state set by the code that starts a role: waiting (with what for) or ready.
#[derive(Clone, Debug)]
pub struct Readiness {
    state: Arc<RwLock<Result<(), String>>>,
}

impl Readiness {
    /// Not ready yet, waiting for `what`.
    pub fn waiting(what: impl Into<String>) -> Readiness {
        let what = what.into();
        tracing::info!(waiting_for = %what, event = "not_ready", "not ready yet");
        Readiness {
            state: Arc::new(RwLock::new(Err(what))),
        }
    }

    /// Now waiting for `what` (logged when it changes).
    pub fn set_waiting(&self, what: impl Into<String>) {
        let what = what.into();
        let mut state = self.state.write();
        if state.as_ref().err() != Some(&what) {
            tracing::info!(waiting_for = %what, event = "not_ready", "not ready yet");
            *state = Err(what);
        }
    }

    /// Ready to serve.
    pub fn set_ready(&self) {
        let mut state = self.state.write();
        if state.is_err() {
            tracing::info!(event = "ready", "ready to serve");
            *state = Ok(());
        }
    }

    pub fn get(&self) -> Result<(), String> {
        self.state.read().clone()
    }

    /// The check `/readyz` and gRPC health read.
    pub fn check(&self) -> ReadinessCheck {
        let state = Arc::clone(&self.state);
        Arc::new(move || state.read().clone())
    }
}

/// The gRPC health service of a role, answering from its readiness at each call (no copy to fall behind):
/// the overall status (`""`) and the role's own `services` are SERVING while `ready()` holds, NOT_SERVING
/// otherwise; [`LIVENESS_SERVICE`] is always SERVING; any other name is NOT_FOUND, as gRPC health wants.
#[derive(Clone)]
pub struct ReadinessHealth {
    ready: ReadinessCheck,
    services: Arc<Vec<String>>,
}

impl ReadinessHealth {
    pub fn new(ready: ReadinessCheck, services: Vec<String>) -> ReadinessHealth {
        ReadinessHealth {
            ready,
            services: Arc::new(services),
        }
    }

    /// The service to add to a tonic server.
    pub fn server(self) -> HealthServer<ReadinessHealth> {
        HealthServer::new(self)
    }

    fn status_of(&self, service: &str) -> Result<ServingStatus, tonic::Status> {
        if service == LIVENESS_SERVICE {
            return Ok(ServingStatus::Serving);
        }
        if !service.is_empty() && !self.services.iter().any(|s| s == service) {
            return Err(tonic::Status::not_found("service not registered"));
        }
        Ok(if (self.ready)().is_ok() {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        })
    }
}

fn response(status: ServingStatus) -> HealthCheckResponse {
    let wire = match status {
        ServingStatus::Serving => health_check_response::ServingStatus::Serving,
        ServingStatus::NotServing => health_check_response::ServingStatus::NotServing,
        ServingStatus::Unknown => health_check_response::ServingStatus::Unknown,
    };
    HealthCheckResponse {
        status: wire as i32,
    }
}

#[tonic::async_trait]
impl Health for ReadinessHealth {
    async fn check(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
        let status = self.status_of(&request.get_ref().service)?;
        Ok(tonic::Response::new(response(status)))
    }

    type WatchStream =
        tokio_stream::wrappers::ReceiverStream<Result<HealthCheckResponse, tonic::Status>>;

    /// The current status, then each change (looked at every [`WATCH_INTERVAL`]) until the caller goes.
    async fn watch(
        &self,
        request: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        let service = request.into_inner().service;
        let mut last = self.status_of(&service)?;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let this = self.clone();
        tokio::spawn(async move {
            if tx.send(Ok(response(last))).await.is_err() {
                return;
            }
            loop {
                tokio::time::sleep(WATCH_INTERVAL).await;
                let now = this.status_of(&service).unwrap_or(ServingStatus::Unknown);
                if now != last {
                    if tx.send(Ok(response(now))).await.is_err() {
                        return;
                    }
                    last = now;
                } else if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(tonic::Response::new(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_health::pb::health_client::HealthClient;

    async fn eventually(
        client: &mut HealthClient<tonic::transport::Channel>,
        name: &str,
        want: ServingStatus,
    ) {
        for _ in 0..200 {
            let got = client
                .check(HealthCheckRequest {
                    service: name.into(),
                })
                .await
                .map(|r| r.into_inner().status);
            if got.ok() == Some(want as i32) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{name:?} never became {want:?}");
    }

    #[tokio::test]
    async fn health_follows_readiness_and_liveness_stays_serving() {
        let readiness = Readiness::waiting("the shard map");
        let service =
            ReadinessHealth::new(readiness.check(), vec!["attest.v1.Thing".into()]).server();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = stopped.await;
                    },
                ),
        );
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = HealthClient::new(channel);
        eventually(&mut client, "", ServingStatus::NotServing).await;
        eventually(&mut client, LIVENESS_SERVICE, ServingStatus::Serving).await;
        assert_eq!(readiness.get(), Err("the shard map".to_string()));
        readiness.set_ready();
        eventually(&mut client, "", ServingStatus::Serving).await;
        readiness.set_waiting("meta");
        eventually(&mut client, "", ServingStatus::NotServing).await;
        eventually(&mut client, LIVENESS_SERVICE, ServingStatus::Serving).await;
        eventually(&mut client, "attest.v1.Thing", ServingStatus::NotServing).await;
        let unknown = client
            .check(HealthCheckRequest {
                service: "other".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(unknown.code(), tonic::Code::NotFound);
        let _ = stop.send(());
        server.await.unwrap().unwrap();
    }
}
