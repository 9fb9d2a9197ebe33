//! The FastCGI exchange on a connection: the rest of the opening, a streamed body in
//! STDIN records, then the response records, gathered or streamed, and the connection
//! kept for reuse when the backend agreed to keep it.

use super::body::{send_body, CgiBody};
use crate::upstream::connection::Conn;
use crate::upstream::failure::{within, Failure};
use crate::upstream::gather::{read_more, read_within};
use crate::upstream::pool::Pool;
use crate::upstream::response::{whole, UpstreamResponse};
use bytes::{Bytes, BytesMut};
use skiff_codec::fastcgi;
use skiff_codec::response_head::parse_head;
use std::io;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// A FastCGI exchange on `conn`: the rest of the opening, a streamed body with the empty
/// STDIN record after it, then the response.
pub(super) async fn exchange(
    pool: &Arc<Pool>,
    idx: usize,
    mut conn: Conn,
    unsent: &[u8],
    rest: Option<CgiBody>,
    length: u64,
) -> Result<UpstreamResponse, Failure> {
    let keep_conn = pool.keepalive > 0;
    let stale = |f: Failure| match f {
        Failure::Io(e)
            if matches!(
                e.kind(),
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
            ) =>
        {
            Failure::Stale
        }
        other => other,
    };
    within(pool.send_timeout, conn.write_all(unsent))
        .await
        .map_err(stale)?;
    if let Some(body) = rest {
        conn.set_nodelay();
        send_body(pool, &mut conn, body, length, |chunk| {
            let mut b = BytesMut::with_capacity(chunk.len() + 16);
            fastcgi::encode_stdin(&mut b, 1, chunk);
            b.freeze()
        })
        .await?;
        let mut end = BytesMut::with_capacity(8);
        fastcgi::encode_stdin(&mut end, 1, &[]);
        within(pool.send_timeout, conn.write_all(&end)).await?;
    }

    let mut dec = fastcgi::Decoder::new(1);
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut stdout = BytesMut::new();
    let mut ended = false;
    let mut received = false;
    let head = loop {
        ended |= drain_events(pool, &mut dec, &mut rbuf, &mut stdout)?;
        if let Some(head) = parse_head(&stdout).map_err(|e| Failure::Protocol(e.to_string()))? {
            break head;
        }
        if ended {
            return Err(Failure::Protocol(
                "the application ended without a response head".into(),
            ));
        }
        match within(pool.read_timeout, conn.read_buf(&mut rbuf)).await {
            Ok(0) if !received => return Err(Failure::Stale),
            Ok(0) => return Err(super::stream::closed_before_head()),
            Ok(_) => received = true,
            Err(f) if !received => return Err(stale(f)),
            Err(f) => return Err(f),
        }
    };
    let mut body_so_far = stdout.split_off(head.consumed);
    // The rest of a small response is usually here or on its way: gather it.
    let mut deadline = None;
    while !ended {
        let held = body_so_far.len() + rbuf.len();
        match read_more(&mut conn, &mut rbuf, held, &mut deadline).await {
            Some(Ok(n)) if n > 0 => {
                ended |= drain_events(pool, &mut dec, &mut rbuf, &mut body_so_far)?;
            }
            _ => break,
        }
    }
    let first = body_so_far.freeze();
    if ended && rbuf.is_empty() {
        // The whole response is in hand (the usual case for small pages): one write with a
        // Content-Length, no reader task and no chunked encoding.
        if keep_conn {
            crate::upstream::kept::put_idle(pool, idx, conn);
        }
        return Ok(whole(head.status, head.fields, first));
    }
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(8);
    let read_timeout = pool.read_timeout;
    let name = pool.name;
    let keeper = pool.clone();
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(first)).await.is_err() {
            return;
        }
        let mut ended = ended;
        loop {
            loop {
                match dec.decode(&mut rbuf) {
                    Ok(Some(fastcgi::Event::Stdout(b))) => {
                        if tx.send(Ok(b)).await.is_err() {
                            return; // the client went away: dropping the connection aborts
                        }
                    }
                    Ok(Some(fastcgi::Event::Stderr(b))) => log_stderr(name, &b),
                    Ok(Some(fastcgi::Event::End { .. })) => ended = true,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(pool = name, error = %e, "malformed FastCGI response");
                        let _ = tx.send(Err(io::Error::other(e.to_string()))).await;
                        return;
                    }
                }
            }
            if ended {
                // The request is complete and nothing is left over: keep the connection.
                if keep_conn && rbuf.is_empty() {
                    crate::upstream::kept::put_idle(&keeper, idx, conn);
                }
                return;
            }
            match read_within(&mut conn, &mut rbuf, read_timeout).await {
                Ok(0) => {
                    let _ = tx
                        .send(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "FastCGI response truncated",
                        )))
                        .await;
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        }
    });
    Ok(crate::upstream::response::streamed(
        head.status,
        head.fields,
        rx,
    ))
}

/// Decodes every whole record in `rbuf`: stdout into `into`, stderr to the log. Returns
/// whether END_REQUEST was among them.
fn drain_events(
    pool: &Pool,
    dec: &mut fastcgi::Decoder,
    rbuf: &mut BytesMut,
    into: &mut BytesMut,
) -> Result<bool, Failure> {
    let mut ended = false;
    while let Some(ev) = dec
        .decode(rbuf)
        .map_err(|e| Failure::Protocol(e.to_string()))?
    {
        match ev {
            fastcgi::Event::Stdout(b) => into.extend_from_slice(&b),
            fastcgi::Event::Stderr(b) => log_stderr(pool.name, &b),
            fastcgi::Event::End { .. } => ended = true,
        }
    }
    Ok(ended)
}

/// A backend's stderr record, to the error log with the pool's name: one line of at most
/// [`STDERR_LOGGED`] bytes, control characters escaped, so that a script's output (a PHP
/// notice quoting a request) cannot forge log lines or flood the log.
fn log_stderr(pool: &str, b: &[u8]) {
    tracing::warn!(pool, "backend stderr: {}", stderr_line(b));
}

/// nginx's bound on a backend's stderr line (about 2 KiB).
const STDERR_LOGGED: usize = 2048;

fn stderr_line(b: &[u8]) -> String {
    let text = String::from_utf8_lossy(&b[..b.len().min(STDERR_LOGGED)]);
    let mut line = String::with_capacity(text.len());
    for c in text.trim_end().chars() {
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    if b.len() > STDERR_LOGGED {
        line.push_str(&format!(" [{} more bytes]", b.len() - STDERR_LOGGED));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stderr_record_is_one_bounded_line() {
        assert_eq!(
            stderr_line(b"PHP Notice: x\n[error] forged line\r\n"),
            "PHP Notice: x\\n[error] forged line"
        );
        let long = stderr_line(&[b'a'; 5000]);
        assert!(
            long.starts_with(&"a".repeat(2048)) && long.ends_with(" [2952 more bytes]"),
            "{long}"
        );
    }
}
