//! Accepted connections for the gRPC servers of every role, with `TCP_NODELAY` set. tonic sets it only on the
//! listeners it binds itself; servers here take a bound listener (so tests can use port 0), and without it a
//! small reply can wait for Nagle's algorithm and the peer's delayed ACK — tens of milliseconds on a hop that
//! should take one.

use tokio::net::{TcpListener, TcpStream};
use tokio_stream::wrappers::TcpListenerStream;
use tokio_stream::{Stream, StreamExt};

/// The connections `listener` accepts, each with `TCP_NODELAY` on.
pub fn nodelay(listener: TcpListener) -> impl Stream<Item = std::io::Result<TcpStream>> {
    TcpListenerStream::new(listener).map(|accepted| {
        accepted.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = Box::pin(nodelay(listener));
        let _client = TcpStream::connect(addr).await.unwrap();
        let server_side = incoming.next().await.unwrap().unwrap();
        assert!(server_side.nodelay().unwrap());
    }
}
