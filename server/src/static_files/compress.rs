//! On-the-fly compression of cacheable files. Each file version is compressed once per
//! coding (the result lives in the I/O cache), so a small CSS file costs one compression,
//! not one per request.

use crate::http::encoding::Encoding;
use async_compression::Level;
use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, ReadBuf};

#[derive(Debug, Clone)]
pub struct CompressionPolicy {
    /// Offered codings, in the server's order of preference.
    pub encodings: Vec<Encoding>,
    pub min_size: u64,
    /// Exact media types, or `type/*`.
    pub types: Vec<String>,
}

impl CompressionPolicy {
    pub fn from_config(c: &skiff_config::Compression) -> CompressionPolicy {
        CompressionPolicy {
            encodings: c
                .encodings
                .iter()
                .map(|e| match e {
                    skiff_config::Coding::Brotli => Encoding::Brotli,
                    skiff_config::Coding::Zstd => Encoding::Zstd,
                    skiff_config::Coding::Gzip => Encoding::Gzip,
                })
                .collect(),
            min_size: c.min_size,
            types: c.types.clone(),
        }
    }

    /// Whether a body of this type and size is worth compressing. Types that are already
    /// compressed (images, archives, fonts in woff2) are never on the list.
    pub fn applies(&self, content_type: &[u8], len: u64) -> bool {
        if len < self.min_size {
            return false;
        }
        let essence = content_type.split(|&b| b == b';').next().unwrap_or(b"");
        let essence = std::str::from_utf8(essence).unwrap_or("").trim();
        self.types.iter().any(|t| match t.strip_suffix("/*") {
            Some(major) => essence.split('/').next() == Some(major),
            None => t.eq_ignore_ascii_case(essence),
        })
    }
}

/// Compresses `data` with async-compression's encoder. Reading from a byte slice never
/// suspends, so the encoder is driven to completion inline with a no-op waker.
pub fn compress(encoding: Encoding, data: &[u8]) -> io::Result<Bytes> {
    let out = match encoding {
        Encoding::Gzip => drain(
            async_compression::tokio::bufread::GzipEncoder::with_quality(data, Level::Default),
        ),
        // Quality 5: most of brotli's gain at a small part of quality 11's time.
        Encoding::Brotli => drain(
            async_compression::tokio::bufread::BrotliEncoder::with_quality(data, Level::Precise(5)),
        ),
        Encoding::Zstd => drain(
            async_compression::tokio::bufread::ZstdEncoder::with_quality(data, Level::Default),
        ),
    }?;
    Ok(Bytes::from(out))
}

fn drain<R: AsyncRead + Unpin>(mut reader: R) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        let mut rb = ReadBuf::new(&mut buf);
        match Pin::new(&mut reader).poll_read(&mut cx, &mut rb) {
            Poll::Ready(Ok(())) if rb.filled().is_empty() => return Ok(out),
            Poll::Ready(Ok(())) => out.extend_from_slice(rb.filled()),
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => {
                return Err(io::Error::other("compressor waited on an in-memory source"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn policy() -> CompressionPolicy {
        CompressionPolicy::from_config(&skiff_config::Compression::default())
    }

    #[test]
    fn types_and_sizes() {
        let p = policy();
        assert!(p.applies(b"text/css; charset=utf-8", 5000));
        assert!(p.applies(b"application/json", 5000));
        assert!(!p.applies(b"text/css", 100), "below min_size");
        assert!(!p.applies(b"image/jpeg", 5000));
        assert!(!p.applies(b"application/gzip", 5000));
    }

    #[tokio::test]
    async fn every_coding_round_trips() {
        let data = "body { color: red }\n".repeat(200);
        for enc in Encoding::ALL {
            let packed = compress(enc, data.as_bytes()).unwrap();
            assert!(
                packed.len() < data.len() / 4,
                "{enc:?} compressed {}",
                packed.len()
            );
            let mut out = Vec::new();
            match enc {
                Encoding::Gzip => {
                    async_compression::tokio::bufread::GzipDecoder::new(&packed[..])
                        .read_to_end(&mut out)
                        .await
                }
                Encoding::Brotli => {
                    async_compression::tokio::bufread::BrotliDecoder::new(&packed[..])
                        .read_to_end(&mut out)
                        .await
                }
                Encoding::Zstd => {
                    async_compression::tokio::bufread::ZstdDecoder::new(&packed[..])
                        .read_to_end(&mut out)
                        .await
                }
            }
            .unwrap();
            assert_eq!(out, data.as_bytes(), "{enc:?}");
        }
    }
}
