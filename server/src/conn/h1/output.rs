//! The fast path's output queue and its writer: response heads in one buffer, bodies as
//! shared memory slices or file regions, written with one writev per run of memory
//! segments and sendfile (or pread+write) per file region.

use super::encode;
use crate::conn::file_send::{
    send_file_slice, send_paced, writable, FileSendPolicy, Sent as FileSent,
};
use crate::http::reply::{Body, FileSlice, Part, Reply};
use crate::shaping::Throttle;
use crate::tls::ktls::RecordBudget;
use bytes::Bytes;
use http::StatusCode;
use std::io::{self, IoSlice};
use std::sync::Arc;
use tokio::io::Interest;
use tokio::net::TcpStream;

const MAX_IOVECS: usize = 64;
/// Stop parsing more pipelined requests once this much output is queued.
pub(super) const MAX_QUEUED_BYTES: usize = 256 * 1024;

/// One queued piece of output: head bytes (a range of the head buffer), a shared body
/// slice, or a file region.
pub(super) enum Seg {
    Head(usize, usize),
    Mem(Bytes),
    File(FileSlice),
    /// A body under bandwidth limits, written in timed chunks (never with sendfile).
    Paced(Box<(Vec<Part>, Arc<Throttle>)>),
}

impl Seg {
    /// Bytes this segment puts on the wire.
    fn wire_len(&self) -> u64 {
        match self {
            Seg::Head(a, b) => (b - a) as u64,
            Seg::Mem(b) => b.len() as u64,
            Seg::File(f) => f.len,
            Seg::Paced(p) => p.0.iter().map(Part::len).sum(),
        }
    }
}

/// Where a queued response's body sits in the batch's byte stream, so that once the batch
/// is written (or fails part way) the bytes that really left are known.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct BodySpan {
    pub at: u64,
    pub len: u64,
}

impl BodySpan {
    /// Body bytes written when `written` bytes of the batch have gone out.
    pub fn sent(self, written: u64) -> u64 {
        written.saturating_sub(self.at).min(self.len)
    }
}

/// What writing a batch did.
pub(super) struct Sent {
    /// Bytes of the batch written, also when writing failed part way.
    pub written: u64,
    /// Of which with sendfile (for `skiff_sendfile_bytes`).
    pub via_sendfile: u64,
    pub result: io::Result<()>,
}

/// Responses queued but not yet written.
#[derive(Default)]
pub(super) struct Output {
    pub head: Vec<u8>,
    segs: Vec<Seg>,
    /// Bytes queued, file regions counted up to MAX_QUEUED_BYTES: when to flush.
    pub queued_bytes: usize,
    /// Exact bytes queued in this batch.
    position: u64,
    /// Bytes of this batch written so far, also when writing failed part way.
    pub written: u64,
    /// Bytes of this batch sent with sendfile (for `skiff_sendfile_bytes`).
    pub via_sendfile: u64,
    /// On a kTLS connection: the records sent under the kernel's key (kept across
    /// batches). A write that could pass the hard limit fails instead.
    pub records: Option<RecordBudget>,
}

impl Output {
    pub fn with_capacity() -> Output {
        Output {
            head: Vec::with_capacity(512),
            segs: Vec::with_capacity(4),
            ..Default::default()
        }
    }

    fn push(&mut self, seg: Seg, counted: usize) {
        self.position += seg.wire_len();
        self.queued_bytes += counted;
        self.segs.push(seg);
    }

    /// Queues the head bytes appended to `head` since `from`.
    fn push_head_from(&mut self, from: usize) {
        let to = self.head.len();
        self.position += (to - from) as u64;
        self.queued_bytes += to - from;
        // Merge with a directly preceding head range (pipelined bodiless replies).
        match self.segs.last_mut() {
            Some(Seg::Head(_, end)) if *end == from => *end = to,
            _ => self.segs.push(Seg::Head(from, to)),
        }
    }

    /// Queues the head bytes the caller appended to `head` since it was `from` long (a
    /// backend's head, a chunk size line).
    pub fn push_head_appended(&mut self, from: usize) {
        self.push_head_from(from);
    }

    pub fn push_bytes(&mut self, b: Bytes) {
        let n = b.len();
        self.push(Seg::Mem(b), n);
    }

    /// Queues an error reply that closes the connection.
    pub fn queue_error(&mut self, status: StatusCode) {
        self.queue_reply(Reply::error(status), 1, true, false, u64::MAX);
    }

    /// Serializes the reply's head and queues its body; returns where the body sits.
    pub fn queue_reply(
        &mut self,
        reply: Reply,
        minor: u8,
        close: bool,
        head_only: bool,
        sendfile_min: u64,
    ) -> BodySpan {
        let from = self.head.len();
        let with_body = encode::reply_head(&mut self.head, &reply, minor, close);
        self.push_head_from(from);
        let at = self.position;
        if !with_body || head_only {
            return BodySpan { at, len: 0 };
        }
        if let Some(throttle) = reply.throttle {
            let parts = match reply.body {
                Body::Empty => vec![],
                Body::Bytes(b) | Body::Mirrored(b, _) => vec![Part::Bytes(b)],
                Body::File(f) => vec![Part::File(f)],
                Body::Parts(p) => p,
            };
            // Flushed right after: it takes a while.
            self.push(Seg::Paced(Box::new((parts, throttle))), MAX_QUEUED_BYTES);
            return BodySpan {
                at,
                len: self.position - at,
            };
        }
        let file_counted = |f: &FileSlice| f.len.min(MAX_QUEUED_BYTES as u64) as usize;
        match reply.body {
            Body::Empty => {}
            Body::Bytes(b) => self.push_bytes(b),
            Body::Mirrored(_, f) if f.len >= sendfile_min => {
                let n = file_counted(&f);
                self.push(Seg::File(f), n)
            }
            Body::Mirrored(b, _) => self.push_bytes(b),
            Body::File(f) => {
                let n = file_counted(&f);
                self.push(Seg::File(f), n)
            }
            Body::Parts(parts) => {
                for p in parts {
                    match p {
                        Part::Bytes(b) => self.push_bytes(b),
                        Part::File(f) => {
                            let n = file_counted(&f);
                            self.push(Seg::File(f), n)
                        }
                    }
                }
            }
        }
        BodySpan {
            at,
            len: self.position - at,
        }
    }

    /// Forgets the batch (after it was written or failed).
    fn clear(&mut self) {
        self.segs.clear();
        self.head.clear();
        self.queued_bytes = 0;
        self.position = 0;
        self.written = 0;
        self.via_sendfile = 0;
    }

    /// Writes the batch and forgets it: runs of memory segments with writev, files with
    /// sendfile or pread, paced bodies in timed chunks. One future, not one per layer:
    /// this runs for every batch of responses.
    pub async fn write_and_clear(
        &mut self,
        stream: &TcpStream,
        policy: FileSendPolicy,
        read_chunk: &mut Vec<u8>,
    ) -> Sent {
        let Output {
            head,
            segs,
            written,
            via_sendfile,
            records,
            ..
        } = self;
        let mut i = 0;
        let mut skip = 0usize; // bytes of segs[i] already written
        let result = 'write: {
            while i < segs.len() {
                if let Seg::Paced(paced) = &segs[i] {
                    let (parts, throttle) = &**paced;
                    if !take_records(records, || paced_records(parts, throttle)) {
                        break 'write Err(RecordBudget::exhausted());
                    }
                    let r = send_paced(
                        stream,
                        parts,
                        throttle.clone(),
                        policy.send_timeout,
                        written,
                    )
                    .await;
                    if let Err(e) = r {
                        break 'write Err(e);
                    }
                    i += 1;
                    continue;
                }
                if let Seg::File(f) = &segs[i] {
                    if !take_records(records, || file_records(f.len, policy)) {
                        break 'write Err(RecordBudget::exhausted());
                    }
                    let mut sent = FileSent::default();
                    let r = send_file_slice(stream, f, policy, read_chunk, &mut sent).await;
                    *via_sendfile += sent.via_sendfile;
                    *written += sent.via_sendfile + sent.via_pread;
                    if let Err(e) = r {
                        break 'write Err(e);
                    }
                    i += 1;
                    continue;
                }
                // Gather a run of memory segments.
                let mut iov: [IoSlice<'_>; MAX_IOVECS] = [IoSlice::new(&[]); MAX_IOVECS];
                let mut n_iov = 0;
                let mut j = i;
                let mut more_follows = false;
                while j < segs.len() && n_iov < MAX_IOVECS {
                    let slice: &[u8] = match &segs[j] {
                        Seg::Head(a, b) => &head[*a..*b],
                        Seg::Mem(b) => b,
                        Seg::File(_) | Seg::Paced(_) => {
                            more_follows = true;
                            break;
                        }
                    };
                    let slice = if j == i { &slice[skip..] } else { slice };
                    iov[n_iov] = IoSlice::new(slice);
                    n_iov += 1;
                    j += 1;
                }
                if let Some(budget) = records {
                    let len = iov[..n_iov].iter().map(|s| s.len() as u64).sum();
                    if !budget.allows(RecordBudget::bound(len, 1)) {
                        break 'write Err(RecordBudget::exhausted());
                    }
                }
                let n =
                    match write_vectored(stream, &iov[..n_iov], more_follows, policy.send_timeout)
                        .await
                    {
                        Ok(n) => n,
                        Err(e) => break 'write Err(e),
                    };
                *written += n as u64;
                if let Some(budget) = records {
                    budget.wrote(n as u64);
                }
                // Advance over what was written.
                let mut left = n;
                while left > 0 {
                    let len = segs[i].wire_len() as usize - skip;
                    if left >= len {
                        left -= len;
                        i += 1;
                        skip = 0;
                    } else {
                        skip += left;
                        left = 0;
                    }
                }
                // Skip empty memory segments (e.g. an empty body).
                while i < segs.len()
                    && !matches!(segs[i], Seg::File(_) | Seg::Paced(_))
                    && segs[i].wire_len() as usize == skip
                {
                    i += 1;
                    skip = 0;
                }
            }
            Ok(())
        };
        let sent = Sent {
            written: *written,
            via_sendfile: *via_sendfile,
            result,
        };
        self.clear();
        sent
    }
}

/// Takes `n()` records from a kTLS connection's budget (always true on other connections).
fn take_records(records: &mut Option<RecordBudget>, n: impl FnOnce() -> u64) -> bool {
    match records {
        Some(r) => r.take(n()),
        None => true,
    }
}

/// The most records `file_send` makes for a file region: one sendfile per
/// `sendfile_chunk_bytes`, or one write per `read_chunk_bytes` on the pread path.
fn file_records(len: u64, policy: FileSendPolicy) -> u64 {
    let below_max = policy.sendfile_max_bytes == 0 || len < policy.sendfile_max_bytes;
    let piece = if len >= policy.sendfile_min_bytes && below_max {
        policy.sendfile_chunk_bytes
    } else {
        policy.read_chunk_bytes
    };
    RecordBudget::bound(len, RecordBudget::calls(len, piece as u64))
}

/// The most records a paced body makes: one write per pacing chunk of each part.
fn paced_records(parts: &[Part], throttle: &Throttle) -> u64 {
    let chunk = throttle.chunk_size() as u64;
    parts
        .iter()
        .map(|p| RecordBudget::bound(p.len(), RecordBudget::calls(p.len(), chunk)))
        .sum()
}

/// One writev (or sendmsg with MSG_MORE when a file body follows, so the head and the
/// first file bytes share a packet), waiting for writability as needed.
async fn write_vectored(
    stream: &TcpStream,
    iov: &[IoSlice<'_>],
    more_follows: bool,
    send_timeout: std::time::Duration,
) -> io::Result<usize> {
    if iov.iter().all(|s| s.is_empty()) {
        return Ok(0);
    }
    loop {
        let r = stream.try_io(Interest::WRITABLE, || {
            if more_follows {
                rustix::net::sendmsg(
                    stream,
                    iov,
                    &mut rustix::net::SendAncillaryBuffer::default(),
                    rustix::net::SendFlags::MORE | rustix::net::SendFlags::NOSIGNAL,
                )
                .map_err(io::Error::from)
            } else {
                rustix::io::writev(stream, iov).map_err(io::Error::from)
            }
        });
        match r {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                writable(stream, send_timeout).await?
            }
            Err(e) => return Err(e),
        }
    }
}
