//! A loopback TCP proxy in front of one shard node, so the history suite's nemesis can cut the node off the
//! network. The node is started with `--advertise http://<proxy>`: meta records that address, and the router
//! and the peer shards (repair, catch-up) reach the node only through the proxy. The proxy outlives the node's
//! restarts (it connects to the node's fixed `--grpc` port for each new connection).
//!
//! - **Healthy**: every accepted connection is relayed, both ways, to the node (one that cannot reach the node,
//!   down after a SIGKILL, is closed at once: the nearest thing to a refused connection).
//! - **Partitioned** ([`Proxy::partition`]): nothing is relayed and nothing is closed. Bytes on open
//!   connections are read and discarded, new connections are accepted and drained, so callers see a silent
//!   network (packets dropped), not a refused one, and find out only through their own deadlines.
//! - **Healed** ([`Proxy::heal`]): new connections are relayed again; the blackholed ones are closed (their
//!   streams lost bytes midway, and a client without keepalives would otherwise wait on them forever).
//!
//! Plain std threads, one accepting and one per direction of each connection; dropping the [`Proxy`] closes
//! every connection and joins every thread.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Proxy {
    /// Where callers connect (127.0.0.1, a port from the OS).
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// The accepting thread, joined on drop.
    acceptor: Option<JoinHandle<()>>,
}

/// What the accepting thread, the relay threads and the [`Proxy`] share.
struct Shared {
    /// The node's own gRPC address.
    upstream: SocketAddr,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Partitioned: new connections are blackholed from the start.
    partitioned: bool,
    /// Set on drop: the accepting thread stops at its next connection (the drop makes one).
    stopped: bool,
    /// The id of the next connection.
    next: u64,
    /// Open connections by id, so a heal or the drop can close them.
    conns: HashMap<u64, Conn>,
    /// Relay threads that may still run, joined on drop.
    threads: Vec<JoinHandle<()>>,
}

/// One connection through the proxy.
struct Conn {
    /// Clones of its sockets: the caller's, then the node's (none when it was accepted while partitioned).
    sockets: Vec<TcpStream>,
    /// Its relay threads discard what they read.
    blackholed: Arc<AtomicBool>,
}

impl Conn {
    fn close(&self) {
        for s in &self.sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Proxy {
    /// A healthy proxy to `upstream`, listening on 127.0.0.1 on a port from the OS.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            upstream,
            state: Mutex::new(State::default()),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || accept(listener, shared))
        };
        Proxy {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops relaying: from now on, what open connections carry is discarded, and new ones are only drained.
    pub fn partition(&self) {
        let mut state = self.shared.state.lock().unwrap();
        state.partitioned = true;
        for c in state.conns.values() {
            c.blackholed.store(true, Ordering::SeqCst);
        }
    }

    /// Relays new connections again and closes the blackholed ones.
    pub fn heal(&self) {
        let mut state = self.shared.state.lock().unwrap();
        state.partitioned = false;
        state.conns.retain(|_, c| {
            let blackholed = c.blackholed.load(Ordering::SeqCst);
            if blackholed {
                c.close();
            }
            !blackholed
        });
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let threads = {
            let mut state = self.shared.state.lock().unwrap();
            state.stopped = true;
            for c in state.conns.values() {
                c.close();
            }
            state.conns.clear();
            std::mem::take(&mut state.threads)
        };
        // Wakes the accepting thread, which sees `stopped`.
        let _ = TcpStream::connect(self.addr);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept(listener: TcpListener, shared: Arc<Shared>) {
    for caller in listener.incoming() {
        let Ok(caller) = caller else { continue };
        let partitioned = {
            let state = shared.state.lock().unwrap();
            if state.stopped {
                return;
            }
            state.partitioned
        };
        // Outside the lock: a stopped (SIGSTOP) node's kernel still accepts, a killed one refuses at once.
        let node = if partitioned {
            None
        } else {
            match TcpStream::connect_timeout(&shared.upstream, Duration::from_secs(2)) {
                Ok(node) => Some(node),
                // The node is down: close the caller's connection.
                Err(_) => continue,
            }
        };
        let mut state = shared.state.lock().unwrap();
        if state.stopped {
            return;
        }
        // A partition that began while the node was being connected holds for this connection too.
        let blackholed = Arc::new(AtomicBool::new(state.partitioned || node.is_none()));
        let id = state.next;
        state.next += 1;
        let mut sockets = vec![caller.try_clone().unwrap()];
        let mut threads = Vec::new();
        match node {
            Some(node) => {
                let _ = caller.set_nodelay(true);
                let _ = node.set_nodelay(true);
                sockets.push(node.try_clone().unwrap());
                let (caller2, node2) = (caller.try_clone().unwrap(), node.try_clone().unwrap());
                for (from, to) in [(caller, node), (node2, caller2)] {
                    let (shared, blackholed) = (Arc::clone(&shared), Arc::clone(&blackholed));
                    threads.push(std::thread::spawn(move || {
                        relay(from, Some(to), id, &blackholed, &shared)
                    }));
                }
            }
            None => {
                let (shared, blackholed) = (Arc::clone(&shared), Arc::clone(&blackholed));
                threads.push(std::thread::spawn(move || {
                    relay(caller, None, id, &blackholed, &shared)
                }));
            }
        }
        state.conns.insert(
            id,
            Conn {
                sockets,
                blackholed,
            },
        );
        state.threads.retain(|t| !t.is_finished());
        state.threads.extend(threads);
    }
}

/// Copies `from` to `to` until either ends, discarding while `blackholed`. A relayed connection that ends is
/// closed on both sides; a blackholed one only on the side that ended (the other keeps hearing nothing until
/// the heal closes it).
fn relay(
    mut from: TcpStream,
    mut to: Option<TcpStream>,
    id: u64,
    blackholed: &AtomicBool,
    shared: &Shared,
) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if blackholed.load(Ordering::SeqCst) {
            continue;
        }
        if let Some(to) = to.as_mut() {
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    }
    let mut state = shared.state.lock().unwrap();
    let _ = from.shutdown(Shutdown::Both);
    if !blackholed.load(Ordering::SeqCst) {
        if let Some(c) = state.conns.remove(&id) {
            c.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    /// An echo server that serves `connections` connections, then stops.
    fn echo(connections: usize) -> (SocketAddr, JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let served: Vec<_> = listener
                .incoming()
                .take(connections)
                .map(|s| {
                    let mut s = s.unwrap();
                    std::thread::spawn(move || {
                        let mut r = s.try_clone().unwrap();
                        let _ = std::io::copy(&mut r, &mut s);
                    })
                })
                .collect();
            for s in served {
                s.join().unwrap();
            }
        });
        (addr, server)
    }

    fn connect(proxy: &Proxy) -> TcpStream {
        let s = TcpStream::connect(proxy.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        s
    }

    /// Writes `msg` and reads the echo: Ok(what came back), or the read's error (a timeout: no answer).
    fn ask(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        s.write_all(msg)?;
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got)?;
        Ok(got)
    }

    fn silent(r: std::io::Result<Vec<u8>>) -> bool {
        matches!(r, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
    }

    /// The proxy closed `s`: EOF, or a reset (not a read timeout).
    fn closed(s: &mut TcpStream) -> bool {
        match s.read(&mut [0u8; 8]) {
            Ok(n) => n == 0,
            Err(e) => e.kind() == ErrorKind::ConnectionReset,
        }
    }

    #[test]
    fn proxy_relays_until_partitioned_then_again_after_heal() {
        // The echo server sees the connection opened while healthy and the one opened after the heal; the one
        // opened during the partition never reaches it.
        let (upstream, server) = echo(2);
        let proxy = Proxy::start(upstream);
        let mut before = connect(&proxy);
        assert_eq!(ask(&mut before, b"ping").unwrap(), b"ping");

        proxy.partition();
        let r = ask(&mut before, b"lost");
        assert!(silent(r), "an open connection answered while partitioned");
        let mut during = connect(&proxy);
        let r = ask(&mut during, b"lost");
        assert!(silent(r), "a new connection answered while partitioned");

        proxy.heal();
        assert!(
            closed(&mut before),
            "a blackholed connection stayed open after the heal"
        );
        assert!(
            closed(&mut during),
            "a blackholed connection stayed open after the heal"
        );
        let mut after = connect(&proxy);
        assert_eq!(ask(&mut after, b"pong").unwrap(), b"pong");

        drop(proxy);
        // The proxy closed its connections to the echo server, whose threads then end.
        server.join().unwrap();
        assert!(closed(&mut after));
    }
}
