//! A bound listener of any role, plaintext or TLS, and the connections it accepts — the one way every gRPC
//! (tonic) and HTTP (axum) server of Attest takes its traffic. A `TcpListener` converts into a plaintext
//! [`Listener`], so tests keep binding `127.0.0.1:0` and passing the socket.
//!
//! TLS handshakes run in their own tasks, bounded in number and time, so a slow or silent client cannot stall
//! the accept loop; a failed handshake (no client certificate under mutual TLS, an unknown CA) is logged and
//! counted in `tls_handshake_failures_total`, never handed to the server.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::tls::ServerTls;

/// Longest a client may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in flight at most per listener (the rest wait in the kernel's accept queue).
const MAX_HANDSHAKES: usize = 256;

/// A bound socket and, when it speaks TLS, its configuration.
#[derive(Debug)]
pub struct Listener {
    tcp: TcpListener,
    tls: Option<Arc<ServerTls>>,
}

impl From<TcpListener> for Listener {
    fn from(tcp: TcpListener) -> Self {
        Listener { tcp, tls: None }
    }
}

impl Listener {
    /// `tcp` speaking TLS with `tls` when given, else plaintext.
    pub fn new(tcp: TcpListener, tls: Option<Arc<ServerTls>>) -> Self {
        Listener { tcp, tls }
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// `https` or `http`: the scheme clients reach this listener with.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Whether a client must present a certificate of the cluster CA to get in.
    pub fn requires_client_certificate(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|t| t.requires_client_certificate())
    }

    /// Whether a client may present a certificate of the cluster CA without having to: then
    /// [`serve_http`] tells each request whether its connection did ([`ClientCertificate`]).
    pub fn client_certificate_optional(&self) -> bool {
        self.tls
            .as_ref()
            .is_some_and(|t| t.verifies_client_certificates() && !t.requires_client_certificate())
    }

    /// The accepted connections (`TCP_NODELAY` on), handshaken when TLS is on; for tonic's
    /// `serve_with_incoming*`.
    pub fn incoming(self) -> Pin<Box<dyn Stream<Item = io::Result<Conn>> + Send>> {
        match self.tls {
            None => Box::pin(crate::incoming::nodelay(self.tcp).map(|c| c.map(Conn::Plain))),
            Some(tls) => Box::pin(tls_incoming(self.tcp, tls)),
        }
    }
}

fn tls_incoming(tcp: TcpListener, tls: Arc<ServerTls>) -> impl Stream<Item = io::Result<Conn>> {
    let (tx, rx) = mpsc::channel(64);
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    tokio::spawn(async move {
        loop {
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            let accepted = tokio::select! {
                accepted = tcp.accept() => accepted,
                // The server stopped taking connections.
                _ = tx.closed() => return,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, say: back off instead of spinning.
                    tracing::warn!(error = %e, event = "accept_failed", "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let peer = stream.peer_addr().ok();
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
            let tx = tx.clone();
            tokio::spawn(async move {
                let _slot = slot;
                let reason =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send(Ok(Conn::Tls(Box::new(stream)))).await;
                            return;
                        }
                        Ok(Err(e)) => e.to_string(),
                        Err(_) => "handshake timed out".to_string(),
                    };
                metrics::counter!("tls_handshake_failures_total").increment(1);
                tracing::info!(peer = ?peer, error = %reason, event = "tls_handshake_failed",
                    "a TLS handshake failed");
            });
        }
    });
    ReceiverStream::new(rx)
}

/// A request extension [`serve_http`] adds on TLS connections: whether the client presented a certificate that
/// verified against the listener's client CA (rustls refuses the handshake of one that does not, so a
/// certificate seen here is a verified one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCertificate {
    pub verified: bool,
}

impl Conn {
    /// Whether the peer presented a verified client certificate (never on plaintext).
    pub fn client_certificate(&self) -> ClientCertificate {
        let verified = match self {
            Conn::Plain(_) => false,
            Conn::Tls(s) => s
                .get_ref()
                .1
                .peer_certificates()
                .is_some_and(|c| !c.is_empty()),
        };
        ClientCertificate { verified }
    }
}

/// One accepted connection, plaintext or TLS.
pub enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        let tcp = match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.get_ref().0,
        };
        TcpConnectInfo {
            local_addr: tcp.local_addr().ok(),
            remote_addr: tcp.peer_addr().ok(),
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets the requests in flight finish: hyper's
/// connection builder over the accepted (handshaken, under TLS) connections, each wrapped so that hyper's own
/// answers to a request it cannot parse carry the JSON error body ([`crate::parse_errors`]).
pub async fn serve_http(
    listener: Listener,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut connections = listener.incoming();
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let conn = tokio::select! {
            conn = connections.next() => conn,
            _ = &mut shutdown => break,
        };
        let conn = match conn {
            Some(Ok(conn)) => conn,
            // Out of file descriptors, say (plaintext accepts report it here): back off, keep serving.
            Some(Err(e)) => {
                tracing::warn!(error = %e, event = "accept_failed", "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            None => break,
        };
        // The guard of an internal API with optional client certificates reads this per request.
        let identity = axum::Extension(conn.client_certificate());
        let service = hyper_util::service::TowerToHyperService::new(tower::Layer::layer(
            &identity,
            app.clone(),
        ));
        let connection = builder
            .serve_connection_with_upgrades(
                hyper_util::rt::TokioIo::new(crate::parse_errors::JsonParseErrors::new(conn)),
                service,
            )
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "an HTTP connection ended with an error");
            }
        });
    }
    drop(connections);
    graceful.shutdown().await;
    Ok(())
}
