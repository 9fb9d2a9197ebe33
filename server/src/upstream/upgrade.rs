//! Protocol upgrades through the HTTP proxy (WebSocket): the token a client asks for, and
//! the splice of both upgraded connections once the backend answers 101, closed when
//! both sides stay silent.

use http::{HeaderMap, HeaderValue};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// Put in a request's extensions by the connection that read it, and kept by a tunnel
/// made from it: the connection's place under `max_connections` and in the drain lasts
/// until every tunnel from it has closed (hyper's connection ends at the 101).
#[derive(Clone)]
pub struct TunnelHold {
    /// Never sent on: the receiver waits for every sender to be gone.
    _alive: tokio::sync::mpsc::Sender<()>,
}

impl TunnelHold {
    pub fn new(alive: tokio::sync::mpsc::Sender<()>) -> TunnelHold {
        TunnelHold { _alive: alive }
    }
}

/// The Upgrade token of a request that asks for one (`Connection: upgrade`).
pub(super) fn upgrade_token(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        });
    asks.then(|| headers.get(http::header::UPGRADE).cloned())
        .flatten()
}

/// Copies bytes both ways between the upgraded client and backend connections, until
/// either side closes or no byte has moved either way for `idle` (the pool's
/// `read_timeout`, nginx's `proxy_read_timeout` for a tunnel): a tunnel both peers left
/// silent does not hold its sockets for ever.
pub(super) async fn splice(
    client: hyper::upgrade::OnUpgrade,
    backend: hyper::upgrade::OnUpgrade,
    pool: &'static str,
    idle: Duration,
    hold: Option<TunnelHold>,
) {
    // Dropped when the tunnel ends, whichever way.
    let _hold = hold;
    let (client, backend) = match tokio::try_join!(client, backend) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(pool, error = %e, "upgrade failed");
            return;
        }
    };
    let start = Instant::now();
    let moved = Arc::new(AtomicU64::new(0));
    let mut client = Watched {
        io: hyper_util::rt::TokioIo::new(client),
        start,
        moved: moved.clone(),
    };
    let mut backend = Watched {
        io: hyper_util::rt::TokioIo::new(backend),
        start,
        moved: moved.clone(),
    };
    let silent = async {
        loop {
            let last = start + Duration::from_millis(moved.load(Ordering::Relaxed));
            if last + idle <= Instant::now() {
                return;
            }
            tokio::time::sleep_until(last + idle).await;
        }
    };
    tokio::select! {
        r = tokio::io::copy_bidirectional(&mut client, &mut backend) => {
            if let Err(e) = r {
                tracing::debug!(pool, error = %e, "upgraded connection ended");
            }
        }
        () = silent => tracing::debug!(pool, ?idle, "upgraded connection idle; closed"),
    }
}

/// One side of a tunnel, noting when bytes last arrived from it (milliseconds from the
/// tunnel's start).
struct Watched<T> {
    io: T,
    start: Instant,
    moved: Arc<AtomicU64>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            let ms = self.start.elapsed().as_millis() as u64;
            self.moved.store(ms, Ordering::Relaxed);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
