//! A TCP fault proxy between controller processes and the API server: it forwards bytes both
//! ways, and on command delays them, resets every open connection, or goes half-open (holds
//! connections open while forwarding nothing, as a dead peer behind a NAT does); its upstream
//! can move (the API server restarted on another port).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How the proxy treats traffic now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass,
    /// Every chunk waits this long before it is forwarded.
    Delay(Duration),
    /// Nothing is forwarded; connections stay open.
    HalfOpen,
}

#[derive(Debug)]
struct State {
    upstream: SocketAddr,
    mode: Mode,
}

/// A running proxy; dropping it stops it and every connection.
pub struct FaultProxy {
    address: SocketAddr,
    state: Arc<Mutex<State>>,
    /// Bumped to reset every open connection.
    resets: watch::Sender<u64>,
    task: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.resets.send_modify(|n| *n += 1);
    }
}

impl FaultProxy {
    /// Listens on 127.0.0.1 (a free port), forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let address = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            upstream,
            mode: Mode::Pass,
        }));
        let (resets, _) = watch::channel(0u64);
        let task = {
            let state = state.clone();
            let resets = resets.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        tokio::task::yield_now().await;
                        continue;
                    };
                    let state = state.clone();
                    let reset = resets.subscribe();
                    tokio::spawn(connection(client, state, reset));
                }
            })
        };
        Ok(Self {
            address,
            state,
            resets,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn set_mode(&self, mode: Mode) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .mode = mode;
    }

    /// New connections go to `upstream` (open ones are reset).
    pub fn set_upstream(&self, upstream: SocketAddr) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upstream = upstream;
        self.reset();
    }

    /// Closes every open connection (both sides see a reset).
    pub fn reset(&self) {
        self.resets.send_modify(|n| *n += 1);
    }
}

fn mode_of(state: &Mutex<State>) -> Mode {
    state.lock().unwrap_or_else(PoisonError::into_inner).mode
}

async fn connection(client: TcpStream, state: Arc<Mutex<State>>, mut reset: watch::Receiver<u64>) {
    let upstream = state
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .upstream;
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    reset.borrow_and_update();
    tokio::select! {
        () = pump(client_read, server_write, state.clone()) => {}
        () = pump(server_read, client_write, state) => {}
        _ = reset.changed() => {}
    }
}

/// Copies `from` to `to` chunk by chunk under the proxy's mode.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    state: Arc<Mutex<State>>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let read = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        loop {
            match mode_of(&state) {
                Mode::Pass => break,
                Mode::Delay(by) => {
                    tokio::time::sleep(by).await;
                    break;
                }
                // Hold the bytes until the mode changes (or the connection is reset).
                Mode::HalfOpen => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server() -> SocketAddr {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buffer = [0u8; 64];
                    while let Ok(n) = stream.read(&mut buffer).await {
                        if n == 0 || stream.write_all(&buffer[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        address
    }

    async fn round_trip(stream: &mut TcpStream) -> Option<Vec<u8>> {
        stream.write_all(b"ping").await.ok()?;
        let mut buffer = [0u8; 4];
        let read = tokio::time::timeout(Duration::from_millis(500), stream.read_exact(&mut buffer))
            .await
            .ok()?;
        read.ok().map(|_| buffer.to_vec())
    }

    #[tokio::test]
    async fn forwards_holds_half_open_and_resets() {
        let proxy = FaultProxy::start(echo_server().await).await.unwrap();
        let mut stream = TcpStream::connect(proxy.address).await.unwrap();
        assert_eq!(round_trip(&mut stream).await.as_deref(), Some(&b"ping"[..]));

        proxy.set_mode(Mode::HalfOpen);
        assert_eq!(
            round_trip(&mut stream).await,
            None,
            "nothing comes back half-open"
        );
        proxy.set_mode(Mode::Pass);
        // The held bytes go through once the peer is back; then traffic flows again.
        let mut held = [0u8; 4];
        stream.read_exact(&mut held).await.unwrap();
        assert_eq!(&held, b"ping");
        assert_eq!(round_trip(&mut stream).await.as_deref(), Some(&b"ping"[..]));

        proxy.reset();
        let mut buffer = [0u8; 4];
        let closed = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut buffer))
            .await
            .unwrap();
        assert!(
            matches!(closed, Ok(0) | Err(_)),
            "reset closes the connection"
        );
    }
}
