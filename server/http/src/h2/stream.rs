//! Per-stream state (RFC 9113 §5.1) and the open-stream table: a small Vec, since
//! MAX_CONCURRENT_STREAMS keeps it short and an idle connection then holds nothing.

use super::frame::MAX_WINDOW;
use super::priority::Priority;
use super::source::Source;
use super::StreamId;
use bytes::Bytes;
use std::collections::VecDeque;
use std::io;

/// A stream in the table is open or half-closed; idle and closed streams are not stored
/// (ids at or below the highest seen are closed, above it idle).
pub(crate) struct Stream {
    pub id: StreamId,
    /// The peer sent END_STREAM: half-closed (remote).
    pub recv_closed: bool,
    /// HEADERS were queued for the response.
    pub headers_sent: bool,
    /// The driver has given the last of the response (END_STREAM queued).
    pub end_queued: bool,
    /// END_STREAM is in the output: half-closed (local).
    pub send_closed: bool,
    /// What we may still send; negative after the peer lowers INITIAL_WINDOW_SIZE (§6.9.2).
    pub send_window: i64,
    /// What the peer may still send us.
    pub recv_window: i64,
    /// Bytes the driver consumed that no WINDOW_UPDATE has returned yet.
    pub recv_released: u32,
    /// The request's content-length, checked against the DATA received (§8.1.1).
    pub content_length: Option<u64>,
    pub received: u64,
    /// Response body chunks the windows have not let out yet.
    pub queue: VecDeque<Bytes>,
    pub queued: usize,
    /// The rest of the body, read as it is sent (after the queue).
    pub source: Option<Source>,
    /// From the request's `priority` field (RFC 9218), for the order DATA leaves in.
    pub priority: Priority,
    /// The request carried a `priority` field: without one, the response shares the
    /// connection in turns (`poll_transmit`).
    pub prioritised: bool,
}

impl Stream {
    pub fn new(id: StreamId, send_window: i64, recv_window: i64) -> Stream {
        Stream {
            id,
            recv_closed: false,
            headers_sent: false,
            end_queued: false,
            send_closed: false,
            send_window,
            recv_window,
            recv_released: 0,
            content_length: None,
            received: 0,
            queue: VecDeque::new(),
            queued: 0,
            source: None,
            priority: Priority::default(),
            prioritised: false,
        }
    }

    /// Whether its DATA shares the connection frame by frame with others of its urgency,
    /// rather than going out whole in stream order.
    pub fn takes_turns(&self) -> bool {
        self.priority.incremental || !self.prioritised
    }

    /// Whether DATA (or an empty END_STREAM) is waiting to be written.
    pub fn has_output(&self) -> bool {
        self.headers_sent && !self.send_closed && (self.unsent() > 0 || self.end_queued)
    }

    /// Body bytes given for this stream and not yet cut into frames: the queue's and
    /// what its source still owes.
    pub fn unsent(&self) -> u64 {
        self.queued as u64 + self.source.as_ref().map_or(0, |s| s.left)
    }

    /// Appends the next `n` bytes (at most `unsent`) to `out`: the queue's first, then
    /// the source's. A source that fails leaves `out` partly filled: the caller cuts it.
    pub fn take(&mut self, n: usize, out: &mut Vec<u8>) -> io::Result<()> {
        let from_queue = n.min(self.queued);
        self.take_queued(from_queue, out);
        let rest = n - from_queue;
        if rest == 0 {
            return Ok(());
        }
        let Some(source) = &mut self.source else {
            return Err(io::ErrorKind::UnexpectedEof.into());
        };
        let before = out.len();
        source.reader.read_into(out, rest)?;
        // The frame's header says `n`: a source that appended another length would
        // corrupt the framing of every stream on the connection.
        if out.len() != before + rest {
            return Err(io::Error::other("a data source appended the wrong length"));
        }
        source.left -= rest as u64;
        if source.left == 0 {
            // Done with it (the source is dropped, its exchange recorded) as its last
            // bytes go.
            self.source = None;
        }
        Ok(())
    }

    /// Drops everything still to send, after a failed source: the stream is reset.
    pub fn abandon(&mut self) {
        self.queue.clear();
        self.queued = 0;
        self.source = None;
        self.end_queued = false;
    }

    /// Takes `n` bytes off the front of the queue, as one or more chunks appended to `out`.
    fn take_queued(&mut self, mut n: usize, out: &mut Vec<u8>) {
        self.queued -= n;
        while n > 0 {
            let Some(front) = self.queue.front_mut() else {
                break;
            };
            if front.len() <= n {
                n -= front.len();
                out.extend_from_slice(front);
                self.queue.pop_front();
            } else {
                out.extend_from_slice(&front.split_to(n));
                n = 0;
            }
        }
    }
}

/// Adds a WINDOW_UPDATE increment to a window: `None` past 2^31-1 (§6.9.1).
pub(crate) fn grow(window: i64, increment: i64) -> Option<i64> {
    let w = window + increment;
    (w <= MAX_WINDOW as i64).then_some(w)
}

#[derive(Default)]
pub(crate) struct Streams {
    list: Vec<Stream>,
}

impl Streams {
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn get(&mut self, id: StreamId) -> Option<&mut Stream> {
        self.list.iter_mut().find(|s| s.id == id)
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.list.iter().any(|s| s.id == id)
    }

    pub fn insert(&mut self, s: Stream) {
        self.list.push(s);
    }

    pub fn remove(&mut self, id: StreamId) -> Option<Stream> {
        let i = self.list.iter().position(|s| s.id == id)?;
        // In order, not swapped: the list stays in stream-id order, the order
        // non-incremental responses of one urgency are sent in.
        Some(self.list.remove(i))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Stream> {
        self.list.iter_mut()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Stream> {
        self.list.iter()
    }

    pub fn at(&mut self, i: usize) -> &mut Stream {
        &mut self.list[i]
    }

    pub fn clear(&mut self) {
        self.list = Vec::new();
    }

    /// Releases the table's memory once empty: idle connections hold no allocation.
    pub fn shrink_if_empty(&mut self) {
        if self.list.is_empty() && self.list.capacity() > 0 {
            self.list = Vec::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_splits_chunks() {
        let mut s = Stream::new(1, 10, 10);
        s.headers_sent = true;
        s.queue.push_back(Bytes::from_static(b"abc"));
        s.queue.push_back(Bytes::from_static(b"defg"));
        s.queued = 7;
        let mut out = Vec::new();
        s.take(5, &mut out).unwrap();
        assert_eq!(out, b"abcde");
        assert_eq!((s.queued, s.queue.len()), (2, 1));
        s.take(2, &mut out).unwrap();
        assert_eq!(out, b"abcdefg");
        assert!(s.queue.is_empty() && !s.has_output());
    }

    #[test]
    fn window_growth_is_bounded() {
        assert_eq!(grow(65_535, 1), Some(65_536));
        assert_eq!(grow(MAX_WINDOW as i64, 1), None);
        assert_eq!(grow(-100, MAX_WINDOW as i64), Some(MAX_WINDOW as i64 - 100));
    }
}
