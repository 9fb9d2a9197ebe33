//! The uwsgi and SCGI exchange on a connection: the request packet, the raw body, and a
//! response read until the backend closes.

use super::body::{send_body, CgiBody};
use crate::upstream::connection::Conn;
use crate::upstream::failure::{within, Failure};
use crate::upstream::gather::{read_more, read_within};
use crate::upstream::pool::Pool;
use crate::upstream::response::{whole, UpstreamResponse};
use bytes::{Bytes, BytesMut};
use skiff_codec::response_head::parse_head;
use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

/// A backend that closed before its response head failed (it crashed, or its worker was
/// killed): an I/O failure, which counts against the endpoint's health.
pub(super) fn closed_before_head() -> Failure {
    Failure::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the backend closed the connection before a response head",
    ))
}

/// uwsgi and SCGI: a request packet, the raw body, and a response read until EOF.
pub(super) async fn exchange(
    pool: &Pool,
    mut conn: Conn,
    unsent: &[u8],
    rest: Option<CgiBody>,
    length: u64,
) -> Result<UpstreamResponse, Failure> {
    within(pool.send_timeout, conn.write_all(unsent)).await?;
    if let Some(body) = rest {
        conn.set_nodelay();
        send_body(pool, &mut conn, body, length, Bytes::copy_from_slice).await?;
    }
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let head = loop {
        if let Some(head) = parse_head(&buf).map_err(|e| Failure::Protocol(e.to_string()))? {
            break head;
        }
        if within(pool.read_timeout, conn.read_buf(&mut buf)).await? == 0 {
            return Err(closed_before_head());
        }
    };
    let mut body = buf.split_off(head.consumed);
    // uwsgi and SCGI end a response by closing: if the close comes soon, the response is
    // complete and goes out whole.
    let mut deadline = None;
    loop {
        let held = body.len();
        match read_more(&mut conn, &mut body, held, &mut deadline).await {
            Some(Ok(0)) => return Ok(whole(head.status, head.fields, body.freeze())),
            Some(Ok(_)) => continue,
            _ => break,
        }
    }
    let first = body.freeze();
    let (tx, rx) = mpsc::channel::<io::Result<Bytes>>(8);
    let read_timeout = pool.read_timeout;
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(first)).await.is_err() {
            return;
        }
        loop {
            let mut chunk = BytesMut::with_capacity(32 * 1024);
            match read_within(&mut conn, &mut chunk, read_timeout).await {
                Ok(0) => return,
                Ok(_) => {
                    if tx.send(Ok(chunk.freeze())).await.is_err() {
                        return;
                    }
                }
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
