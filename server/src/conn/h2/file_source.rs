//! A file read straight into the HTTP/2 write batch as its DATA frames are cut, so its
//! bytes are copied once on their way to the socket, not into a chunk and then a batch.

// `pread` into the batch's spare capacity, whose length is set to what the kernel wrote:
// reading into the whole spare capacity (safe with rustix) would read the batch's size
// for each frame, and zeroing it first is a pass over every byte.
#![allow(unsafe_code)]

use crate::conn::recorded_body::RecordedBody;
use crate::http::reply::FileSlice;
use skiff_http::h2::source::DataSource;
use std::fs::File;
use std::io;
use std::sync::Arc;

pub(super) struct FileSource {
    file: Arc<File>,
    /// The next byte to read.
    offset: u64,
    /// The exchange, recorded once the last byte is read or the stream goes.
    record: RecordedBody,
}

impl FileSource {
    pub fn new(slice: FileSlice, record: RecordedBody) -> FileSource {
        FileSource {
            file: slice.file,
            offset: slice.offset,
            record,
        }
    }
}

impl DataSource for FileSource {
    fn read_into(&mut self, out: &mut Vec<u8>, n: usize) -> io::Result<()> {
        out.reserve(n);
        let mut left = n;
        while left > 0 {
            let spare = &mut out.spare_capacity_mut()[..left];
            let read = match rustix::io::pread(&*self.file, spare, self.offset) {
                Ok((filled, _)) => filled.len(),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "HTTP/2 response file read failed");
                    return Err(e.into());
                }
            };
            if read == 0 {
                tracing::debug!("HTTP/2 response file ended early (truncated while sent?)");
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            // SAFETY: pread initialised the `read` bytes after the vector's length, within
            // the capacity reserved above.
            unsafe { out.set_len(out.len() + read) };
            self.offset += read as u64;
            left -= read;
        }
        self.record.count_sent(n as u64);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::recorded_body::RequestMeta;
    use crate::exchange::{Outcome, Protocol};
    use std::io::Write;
    use std::time::Instant;

    fn record() -> RecordedBody {
        let meta = RequestMeta {
            remote: std::net::IpAddr::from([192, 0, 2, 1]),
            method: http::Method::GET,
            uri: http::Uri::from_static("/f"),
            protocol: Protocol::Http2,
            referer: None,
            user_agent: None,
            started: Instant::now(),
        };
        let outcome = Outcome {
            vhost: "default",
            status: 200,
            body_bytes: 0,
            cache_hit: None,
            pool: None,
        };
        RecordedBody::for_source(meta, outcome, Instant::now())
    }

    fn source_over(bytes: &[u8], offset: u64) -> FileSource {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        let slice = FileSlice {
            file: Arc::new(f),
            offset,
            len: bytes.len() as u64 - offset,
        };
        FileSource::new(slice, record())
    }

    #[test]
    fn reads_exactly_what_is_asked_after_what_the_batch_holds() {
        let bytes: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
        let mut src = source_over(&bytes, 10);
        // A batch with spare room far beyond the frame: only the frame's bytes are read.
        let mut out = Vec::with_capacity(1 << 20);
        out.extend_from_slice(b"head");
        src.read_into(&mut out, 16_384).unwrap();
        assert_eq!(out.len(), 4 + 16_384);
        assert_eq!(&out[4..], &bytes[10..10 + 16_384]);
        src.read_into(&mut out, 5).unwrap();
        assert_eq!(&out[4 + 16_384..], &bytes[10 + 16_384..10 + 16_389]);
    }

    #[test]
    fn a_file_shorter_than_promised_is_an_error() {
        let mut src = source_over(b"only ten b", 0);
        let mut out = Vec::new();
        let err = src.read_into(&mut out, 11).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
