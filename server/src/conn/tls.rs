//! TLS connections: the handshake in the connection's own task under a deadline (never
//! in the accept loop, where one slow client would stall every accept), then HTTP/2 or
//! HTTP/1.1 as ALPN chose. HTTP/2 runs over rustls (on Skiff's driver, conn/h2, or
//! hyper's); HTTP/1.1 on the fast path, over rustls or, once the session moves into the
//! kernel (kTLS), on the socket itself with sendfile; hyper takes what the fast path
//! hands over.

use super::admission::Admission;
use super::h1;
use super::h1::transport::Transport;
use super::hyper::Wire;
use super::origin::{Origin, TlsSession};
use super::rewind::Rewind;
use super::send_deadline::SendDeadline;
use crate::metrics::{HandshakeLabels, TlsModeLabels};
use crate::settings::H2Engine;
use crate::state::Shared;
use crate::tls::ktls::{self, Handover, HandshakeIo, KernelSession, RecordBudget};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Handshakes one accepted connection on the TLS listener, then serves it in a task of
/// its own, sized for the protocol chosen: the handshake's future (with every protocol's
/// inline, about 9 KB) is not kept reserved for the connection's life.
pub(super) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    local_port: u16,
    admission: Admission,
) {
    let shared = &admission.shared.clone();
    let Some(tls) = shared.tls.clone() else {
        return;
    };
    // Prepared for the kernel (read by record during the handshake) unless the setting
    // is off or the kernel was lately found without the tls ULP.
    let for_kernel = tls.settings.ktls && ktls::worth_trying();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config.clone());
    let handshake = tokio::time::timeout(
        tls.settings.handshake_timeout,
        acceptor.accept(HandshakeIo::new(stream, for_kernel)),
    );
    let count = |result: &'static str, version: &'static str| {
        shared
            .metrics
            .tls_handshakes
            .get_or_create(&HandshakeLabels { result, version })
            .inc();
    };
    let mut stream = match handshake.await {
        Err(_) => {
            count("timeout", "none");
            tracing::debug!(peer = %peer, "TLS handshake timed out");
            return;
        }
        Ok(Err(e)) => {
            count("failure", "none");
            tracing::debug!(peer = %peer, error = %e, "TLS handshake failed");
            return;
        }
        Ok(Ok(stream)) => stream,
    };
    let (_, conn) = stream.get_ref();
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "1.3",
        Some(rustls::ProtocolVersion::TLSv1_2) => "1.2",
        _ => "other",
    };
    count("success", version);
    let wire = match conn.alpn_protocol() {
        Some(b"h2") => Wire::Http2,
        _ => Wire::Http1,
    };
    let session = TlsSession {
        slot: tls.slot_for(conn.server_name()),
    };
    let mode = |mode: &'static str| {
        shared
            .metrics
            .tls_connections
            .get_or_create(&TlsModeLabels { mode })
            .inc();
    };
    // HTTP/2 stays over rustls: only HTTP/1.1 has a sendfile path to gain.
    if for_kernel && wire == Wire::Http1 {
        match ktls::into_kernel(stream) {
            Handover::Kernel(socket, kernel) => {
                mode("kernel");
                tracing::trace!(peer = %peer, version = ?kernel.version, cipher = ?kernel.cipher, "TLS session in the kernel");
                let shared = shared.clone();
                tokio::spawn(async move {
                    serve_kernel(socket, kernel, session, peer, local_port, &shared).await;
                    drop(admission);
                });
                return;
            }
            Handover::Userspace(s) => stream = s,
            Handover::Failed(e) => {
                shared.metrics.tls_kernel_failures.inc();
                tracing::debug!(peer = %peer, error = %e, "kTLS set-up failed; connection closed");
                return;
            }
        }
    }
    stream.get_mut().0.read_freely();
    mode("userspace");
    let origin = Origin {
        peer,
        local_port,
        tls: Some(session.clone()),
    };
    let send_timeout = shared.settings.limits.send_timeout;
    let shared = shared.clone();
    match wire {
        Wire::Http2 if shared.settings.h2_engine == H2Engine::Skiff => {
            let io = SendDeadline::new(stream, send_timeout);
            tokio::spawn(super::h2::serve(io, origin, shared, admission));
        }
        // What the tasks capture is small (a box, a pointer): captured whole, the stream
        // would be held twice, in the task's captures and in the future it moved into.
        Wire::Http2 => {
            let io = SendDeadline::new(stream, send_timeout);
            let serving = Box::pin(super::hyper::serve(io, wire, origin, shared));
            tokio::spawn(async move {
                serving.await;
                drop(admission);
            });
        }
        Wire::Http1 => {
            let stream = Transport::Rustls(Box::new(stream));
            tokio::spawn(async move {
                serve_rustls_h1(stream, session, origin, &shared).await;
                drop(admission);
            });
        }
    }
}

/// Serves HTTP/1.1 over rustls (`stream` is `Transport::Rustls`): the fast path, and
/// hyper for what it hands over.
async fn serve_rustls_h1(
    stream: Transport,
    session: TlsSession,
    origin: Origin,
    shared: &Arc<Shared>,
) {
    let on_tls = h1::OnTls {
        session,
        records: None,
    };
    let (peer, local_port) = (origin.peer, origin.local_port);
    let h1::Ended::Handoff(Transport::Rustls(stream), prefix, _) =
        h1::serve(stream, peer, local_port, shared, Some(on_tls), None).await
    else {
        return;
    };
    let io = SendDeadline::new(
        Rewind::new(stream, prefix),
        shared.settings.limits.send_timeout,
    );
    // ALPN said http/1.1 or nothing: an h2 preface here is refused, as on kTLS.
    // Boxed: hyper's future is kilobytes, and this task is sized for the fast path.
    Box::pin(super::hyper::serve(io, Wire::Http1, origin, shared.clone())).await
}

/// Serves HTTP/1.1 on a socket whose TLS records the kernel makes: the fast path with
/// sendfile, and hyper for what the fast path hands over, both on plain bytes.
async fn serve_kernel(
    socket: TcpStream,
    kernel: KernelSession,
    session: TlsSession,
    peer: SocketAddr,
    local_port: u16,
    shared: &Arc<Shared>,
) {
    let on_tls = h1::OnTls {
        session: session.clone(),
        records: Some(RecordBudget::new(kernel.records_sent)),
    };
    let socket = Transport::Plain(socket);
    let h1::Ended::Handoff(Transport::Plain(socket), prefix, records) =
        h1::serve(socket, peer, local_port, shared, Some(on_tls), None).await
    else {
        return;
    };
    let records = records.unwrap_or(RecordBudget::new(kernel.records_sent));
    let io = SendDeadline::new(
        KernelIo::new(Rewind::new(socket, prefix), records),
        shared.settings.limits.send_timeout,
    );
    let origin = Origin {
        peer,
        local_port,
        tls: Some(session),
    };
    // ALPN said http/1.1 or nothing: an h2 preface here is refused as on rustls.
    // Boxed: hyper's future is kilobytes, and this task is sized for the fast path.
    Box::pin(super::hyper::serve(io, Wire::Http1, origin, shared.clone())).await;
}

/// hyper's I/O on a kTLS socket: the peer's control records (close_notify, KeyUpdate)
/// end the stream as a close does, and the records written count against the key's
/// limit, past which writes fail.
pub(super) struct KernelIo<T> {
    inner: T,
    records: RecordBudget,
}

impl<T> KernelIo<T> {
    pub fn new(inner: T, records: RecordBudget) -> KernelIo<T> {
        KernelIo { inner, records }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for KernelIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match ready!(Pin::new(&mut self.inner).poll_read(cx, buf)) {
            Err(e) if ktls::is_control_record(&e) => Poll::Ready(Ok(())),
            r => Poll::Ready(r),
        }
    }
}

impl<T: AsyncWrite + Unpin> KernelIo<T> {
    fn counted(&mut self, r: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = r {
            self.records.wrote(n as u64);
        }
        r
    }

    /// Refuses a write once the budget could not take one more call of `len` bytes.
    fn allowed(&self, len: usize) -> io::Result<()> {
        if self.records.allows(RecordBudget::bound(len as u64, 1)) {
            Ok(())
        } else {
            Err(RecordBudget::exhausted())
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for KernelIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.allowed(buf.len())?;
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.counted(r)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.allowed(bufs.iter().map(|b| b.len()).sum())?;
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.counted(r)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
