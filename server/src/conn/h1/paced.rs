//! Bodies under bandwidth limits on the fast path: chunks of about 1/20 s, each after the
//! wait the pacer asks for. File parts are read with pread (sendfile cannot be paced).

use super::transport::Transport;
use crate::conn::file_send::truncated;
use crate::http::reply::Part;
use crate::shaping::{Pacer, Throttle};
use std::io;
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// Sends a body in timed chunks; `sent` counts what went out, also when this fails.
pub(super) async fn send_paced(
    stream: &mut Transport,
    parts: &[Part],
    throttle: std::sync::Arc<Throttle>,
    send_timeout: Duration,
    sent: &mut u64,
) -> io::Result<()> {
    let mut pacer = Pacer::new(throttle);
    let chunk = pacer.chunk_size();
    let mut buf = Vec::new();
    for part in parts {
        match part {
            Part::Bytes(b) => {
                for piece in b.chunks(chunk) {
                    pace(&mut pacer, piece.len(), stream).await?;
                    stream.write_all(piece, send_timeout, sent).await?;
                }
            }
            Part::File(f) => {
                buf.resize(chunk, 0);
                let mut off = f.offset;
                let end = f.offset + f.len;
                while off < end {
                    let want = ((end - off) as usize).min(chunk);
                    let n = f.file.read_at(&mut buf[..want], off)?;
                    if n == 0 {
                        return Err(truncated());
                    }
                    pace(&mut pacer, n, stream).await?;
                    stream.write_all(&buf[..n], send_timeout, sent).await?;
                    off += n as u64;
                }
            }
        }
    }
    Ok(())
}

/// A pacing wait past which the client is watched: a shared bucket in debt (many clients
/// at once, or ones that ask and leave) asks for waits this long.
const WATCHED_WAIT: Duration = Duration::from_secs(1);

/// Waits the pacer's time for `n` bytes. A long wait fails once the client has closed its
/// side, so connections whose clients left do not hold their places under
/// `max_connections` through a shared bucket's debt. A client that only half-closes is
/// then cut as well; under a bucket in no debt, the waits stay short and it is served.
async fn pace(pacer: &mut Pacer, n: usize, stream: &mut Transport) -> io::Result<()> {
    let wait = pacer.before_chunk(n as u64);
    if wait <= WATCHED_WAIT {
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        return Ok(());
    }
    tokio::select! {
        () = tokio::time::sleep(wait) => Ok(()),
        () = stream.client_gone() => Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the client left during a paced wait",
        )),
    }
}
