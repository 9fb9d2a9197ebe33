//! The fast path's output queue and its writer: response heads in one buffer (with small
//! memory bodies copied in behind them), other bodies as shared memory slices or file
//! regions, written with one gathered send per run of memory segments and sendfile (or
//! pread+write) per file region.

use super::encode;
use super::idle;
use super::paced::send_paced;
use super::transport::{send_file_pread, Transport};
use crate::conn::file_send::{cork, sendfile_slice, uses_sendfile, FileSendPolicy};
use crate::http::reply::{Body, FileSlice, Part, Reply};
use crate::shaping::Throttle;
use crate::tls::ktls::RecordBudget;
use bytes::Bytes;
use http::StatusCode;
use std::io::{self, IoSlice};
use std::sync::Arc;

const MAX_IOVECS: usize = 64;
/// Memory bodies up to this size are copied into the head buffer behind their head: the
/// usual small reply is then one buffer and one send(2), not a two-part sendmsg (about
/// 2 % less CPU per 1–2 KiB response; at 4 KiB the copy cost what it saved: BENCHMARKS.md).
pub(super) const INLINE_BODY_MAX: usize = 2048;
/// Bodies are copied in only while the head buffer stays within this, leaving room for a
/// few more pipelined heads before it would outgrow the size the worker's pool keeps.
const INLINE_HEAD_MAX: usize = idle::HEAD_KEPT_CAPACITY * 3 / 4;
/// Segments a batch usually has (a head and a body, or a few pipelined replies).
const SMALL_IOVECS: usize = 8;
/// Stop parsing more pipelined requests once this much output is queued.
pub(super) const MAX_QUEUED_BYTES: usize = 256 * 1024;

/// One queued piece of output: head bytes (a range of the head buffer, small bodies
/// copied in included), a shared body slice, or a file region.
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
    /// Whether the batch went to the writer that may wait (a full socket, file or paced
    /// bodies, kTLS, records rustls still holds), rather than one writev now.
    pub took_writer: bool,
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
    /// Hands over the (empty) head buffer and segment list, for the worker's pool.
    pub fn lend(&mut self) -> (Vec<u8>, Vec<Seg>) {
        debug_assert!(self.segs.is_empty(), "lending a queue with output in it");
        (
            std::mem::take(&mut self.head),
            std::mem::take(&mut self.segs),
        )
    }

    /// Takes back a head buffer and segment list (empty) from the worker's pool.
    pub fn restore(&mut self, head: Vec<u8>, segs: Vec<Seg>) {
        self.head = head;
        self.segs = segs;
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
        // Merge with a directly preceding head range (a copied-in body, pipelined replies).
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

    /// Queues a reply's memory body: copied behind the head if small and the head buffer
    /// stays within `INLINE_HEAD_MAX`, shared otherwise.
    fn push_body(&mut self, b: Bytes) {
        let from = self.head.len();
        if b.len() <= INLINE_BODY_MAX && from + b.len() <= INLINE_HEAD_MAX {
            if from + b.len() > self.head.capacity() {
                // Grown once to the size the pool keeps, not doubled past it by the next
                // pipelined head.
                self.head.reserve_exact(idle::HEAD_KEPT_CAPACITY - from);
            }
            self.head.extend_from_slice(&b);
            self.push_head_from(from);
        } else {
            self.push_bytes(b);
        }
    }

    /// Queues an error reply that closes the connection; returns where its body sits.
    pub fn queue_error(&mut self, status: StatusCode) -> BodySpan {
        self.queue_reply(Reply::error(status), 1, true, false, u64::MAX)
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
            Body::Bytes(b) => self.push_body(b),
            Body::Mirrored(_, f) if f.len >= sendfile_min => {
                let n = file_counted(&f);
                self.push(Seg::File(f), n)
            }
            Body::Mirrored(b, _) => self.push_body(b),
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
    pub fn clear(&mut self) {
        self.segs.clear();
        self.head.clear();
        self.queued_bytes = 0;
        self.position = 0;
        self.written = 0;
        self.via_sendfile = 0;
    }

    /// Writes the batch and forgets it: runs of memory segments with writev, files with
    /// sendfile or pread, paced bodies in timed chunks.
    ///
    /// The usual batch (heads and cached bodies that the socket takes at once) is written
    /// without an await. Only a batch that must wait, or has file or paced bodies, runs
    /// the boxed writer: a future held in place would make every connection's task,
    /// idle ones included, that writer's size larger.
    pub async fn write_and_clear(
        &mut self,
        stream: &mut Transport,
        policy: FileSendPolicy,
        read_chunk: &mut Vec<u8>,
    ) -> Sent {
        let mut took_writer = false;
        let result = match self.write_memory_now(stream) {
            Ok(Some((i, skip))) => {
                took_writer = true;
                Box::pin(self.write_from(i, skip, stream, policy, read_chunk)).await
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        let sent = Sent {
            written: self.written,
            via_sendfile: self.via_sendfile,
            took_writer,
            result,
        };
        self.clear();
        sent
    }

    /// Writes a batch of memory segments only, if the socket takes it now: `None` when
    /// all is written, otherwise where `write_from` goes on (segment, bytes of it sent).
    fn write_memory_now(&mut self, stream: &mut Transport) -> io::Result<Option<(usize, usize)>> {
        if self.segs.is_empty() {
            return Ok(None);
        }
        // kTLS counts records per write: its budget checks are the writer's.
        if self.records.is_some() {
            return Ok(Some((0, 0)));
        }
        // The usual batch is a head and a body: an array that small costs a few stores to
        // set up, where MAX_IOVECS empty slices cost a kilobyte of them per write.
        let tried = if self.segs.len() <= SMALL_IOVECS {
            let mut iov = [IoSlice::new(&[]); SMALL_IOVECS];
            write_run_now(&self.head, &self.segs, stream, &mut iov)
        } else {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            write_run_now(&self.head, &self.segs, stream, &mut iov)
        };
        match tried? {
            RunNow::Untried => Ok(Some((0, 0))),
            RunNow::Empty => Ok(None),
            RunNow::Wrote { n, len } => {
                self.written += n as u64;
                if n < len {
                    Ok(Some(advance(&self.segs, 0, 0, n)))
                } else if stream.has_queued_records() {
                    // All taken, but rustls holds records the socket did not take yet.
                    Ok(Some((self.segs.len(), 0)))
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// Writes the batch from segment `i` (less its first `skip` bytes), waiting as needed.
    async fn write_from(
        &mut self,
        mut i: usize,
        mut skip: usize,
        stream: &mut Transport,
        policy: FileSendPolicy,
        read_chunk: &mut Vec<u8>,
    ) -> io::Result<()> {
        let Output {
            head,
            segs,
            written,
            via_sendfile,
            records,
            ..
        } = self;
        'write: {
            while i < segs.len() {
                if let Seg::Paced(paced) = &segs[i] {
                    let (parts, throttle) = &**paced;
                    if !take_records(records, || paced_records(parts, throttle)) {
                        break 'write Err(RecordBudget::exhausted());
                    }
                    // Boxed: paced bodies are rare, and their future is large.
                    let r = Box::pin(send_paced(
                        stream,
                        parts,
                        throttle.clone(),
                        policy.send_timeout,
                        written,
                    ))
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
                    let plain = !stream.is_rustls();
                    if plain {
                        cork(stream.tcp(), &policy, true);
                    }
                    // Counted into `written` as it goes: a connection dropped mid-file
                    // (at the grace period's end) records the bytes that left.
                    let before = *written;
                    let r = match stream {
                        Transport::Plain(s) if uses_sendfile(f.len, &policy) => {
                            let r = sendfile_slice(s, f, policy, written).await;
                            *via_sendfile += *written - before;
                            r
                        }
                        _ => send_file_pread(stream, f, policy, read_chunk, written).await,
                    };
                    if plain {
                        cork(stream.tcp(), &policy, false);
                    }
                    if let Err(e) = r {
                        break 'write Err(e);
                    }
                    i += 1;
                    continue;
                }
                // A run of memory segments, gathered again on each try inside the write:
                // an iovec array held across the await would sit in every connection's
                // task, idle ones included.
                let (len, more_follows) = {
                    let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
                    let (n_iov, more) = gather(head, segs, i, skip, &mut iov);
                    (
                        iov[..n_iov].iter().map(|s| s.len() as u64).sum::<u64>(),
                        more,
                    )
                };
                if let Some(budget) = records {
                    if !budget.allows(RecordBudget::bound(len, 1)) {
                        break 'write Err(RecordBudget::exhausted());
                    }
                }
                let run = Run {
                    head,
                    segs,
                    from: i,
                    skip,
                };
                let n = match write_vectored(stream, run, len, more_follows, policy.send_timeout)
                    .await
                {
                    Ok(n) => n,
                    Err(e) => break 'write Err(e),
                };
                *written += n as u64;
                if let Some(budget) = records {
                    budget.wrote(n as u64);
                }
                (i, skip) = advance(segs, i, skip, n);
            }
            // On rustls, the last records may still be queued.
            stream.flush(policy.send_timeout).await
        }
    }
}

/// Where a batch goes on after `n` more bytes from segment `i` (less `skip` bytes) were
/// written: past them, and past empty memory segments (e.g. an empty body).
fn advance(segs: &[Seg], mut i: usize, mut skip: usize, n: usize) -> (usize, usize) {
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
    while i < segs.len()
        && !matches!(segs[i], Seg::File(_) | Seg::Paced(_))
        && segs[i].wire_len() as usize == skip
    {
        i += 1;
        skip = 0;
    }
    (i, skip)
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
    // The writer's own rule (`uses_sendfile`), so the bound and the calls cannot disagree.
    let piece = if uses_sendfile(len, &policy) {
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

/// Up to `iov.len()` memory segments from `segs[from]` (less its first `skip` bytes),
/// stopping at a file or paced body: the count, and whether such a body follows.
fn gather<'a>(
    head: &'a [u8],
    segs: &'a [Seg],
    from: usize,
    skip: usize,
    iov: &mut [IoSlice<'a>],
) -> (usize, bool) {
    let mut n_iov = 0;
    for (j, seg) in segs.iter().enumerate().skip(from) {
        if n_iov == iov.len() {
            break;
        }
        let slice: &[u8] = match seg {
            Seg::Head(a, b) => &head[*a..*b],
            Seg::Mem(b) => b,
            Seg::File(_) | Seg::Paced(_) => return (n_iov, true),
        };
        iov[n_iov] = IoSlice::new(if j == from { &slice[skip..] } else { slice });
        n_iov += 1;
    }
    (n_iov, false)
}

/// What `write_run_now` did.
enum RunNow {
    /// The batch is not all memory or has more segments than `iov` (not tried), or the
    /// socket took none of it (WouldBlock).
    Untried,
    /// Nothing to write.
    Empty,
    /// `n` of the batch's `len` bytes were written.
    Wrote { n: usize, len: usize },
}

/// One gathered write (sendmsg, or send for a single buffer) of a batch made of memory
/// segments only, gathered into `iov`.
fn write_run_now<'a>(
    head: &'a [u8],
    segs: &'a [Seg],
    stream: &mut Transport,
    iov: &mut [IoSlice<'a>],
) -> io::Result<RunNow> {
    let (n_iov, more_follows) = gather(head, segs, 0, 0, iov);
    if more_follows || n_iov < segs.len() {
        return Ok(RunNow::Untried);
    }
    let iov = &iov[..n_iov];
    let len: usize = iov.iter().map(|s| s.len()).sum();
    if len == 0 {
        return Ok(RunNow::Empty);
    }
    match stream.try_writev(iov, false) {
        Ok(0) => Err(io::ErrorKind::WriteZero.into()),
        Ok(n) => Ok(RunNow::Wrote { n, len }),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(RunNow::Untried),
        Err(e) => Err(e),
    }
}

/// The memory segments `write_vectored` sends, as `gather` finds them.
struct Run<'a> {
    head: &'a [u8],
    segs: &'a [Seg],
    from: usize,
    skip: usize,
}

/// One gathered sendmsg or send (with MSG_MORE when a file body follows, so the head and
/// the first file bytes share a packet) of a run of `len` bytes, waiting for writability
/// as needed.
async fn write_vectored(
    stream: &mut Transport,
    run: Run<'_>,
    len: u64,
    more_follows: bool,
    send_timeout: std::time::Duration,
) -> io::Result<usize> {
    if len == 0 {
        return Ok(0);
    }
    loop {
        let r = {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let (n_iov, _) = gather(run.head, run.segs, run.from, run.skip, &mut iov);
            stream.try_writev(&iov[..n_iov], more_follows)
        };
        match r {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                stream.writable(send_timeout).await?
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
