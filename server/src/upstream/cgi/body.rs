//! A CGI request's body: streamed when its length is known, otherwise read (up to the
//! pool's limit) first, since every CGI protocol needs CONTENT_LENGTH up front; and
//! sending it, framed as the protocol wants, within the pool's send timeout.

use crate::upstream::failure::{within, Failure};
use crate::upstream::pool::Pool;
use crate::upstream::request::ClientBody;
use bytes::Bytes;
use http_body::Body as _;
use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;

/// A CGI request body: streamed when their length is known, otherwise read (up to the limit)
/// first, since every CGI protocol needs CONTENT_LENGTH up front.
pub(super) enum CgiBody {
    Stream(ClientBody),
    Buffered(Bytes),
}

pub(super) async fn prepare_body(
    body: ClientBody,
    declared: Option<u64>,
) -> Result<(CgiBody, u64), Failure> {
    if body.is_end_stream() {
        return Ok((CgiBody::Buffered(Bytes::new()), 0));
    }
    if let Some(n) = declared {
        return Ok((CgiBody::Stream(body), n));
    }
    // `serve` gathered a body without a declared length whole, within the pool's limit.
    match body.collect().await {
        Ok(c) => {
            let b = c.to_bytes();
            let n = b.len() as u64;
            Ok((CgiBody::Buffered(b), n))
        }
        Err(e) => Err(Failure::Client(e)),
    }
}

pub(super) async fn send_body(
    pool: &Pool,
    w: &mut (impl AsyncWriteExt + Unpin),
    body: CgiBody,
    length: u64,
    mut frame: impl FnMut(&[u8]) -> Bytes,
) -> Result<(), Failure> {
    match body {
        CgiBody::Buffered(b) => {
            if !b.is_empty() {
                within(pool.send_timeout, w.write_all(&frame(&b))).await?;
            }
        }
        CgiBody::Stream(mut body) => {
            let mut sent = 0u64;
            while let Some(f) = body.frame().await {
                let f = f.map_err(Failure::Client)?;
                if let Ok(data) = f.into_data() {
                    sent += data.len() as u64;
                    if sent > length {
                        return Err(Failure::Protocol(
                            "client sent more than its Content-Length".into(),
                        ));
                    }
                    within(pool.send_timeout, w.write_all(&frame(&data))).await?;
                }
            }
        }
    }
    Ok(())
}
