//! What leaves: response HEADERS encoded in order, DATA cut from the stream queues as
//! the windows allow, into the driver's one buffer per batch.

use super::{Connection, ResponseBlock, State};
use crate::h2::frame::{self, Head, HEADER_LEN};
use crate::h2::{Reason, StreamId};
use http::StatusCode;

impl Connection {
    /// Appends what is ready to send to `out`: control frames and HEADERS in order, then
    /// DATA as windows and the peer's frame size allow, until `out` holds about `max`
    /// bytes. Write it all with one write.
    ///
    /// DATA follows RFC 9218's priorities: lower urgency first; within one urgency,
    /// non-incremental responses one after the other in stream order, so each completes
    /// as early as it can, then incremental ones frame by frame in turn. A request that
    /// carried no `priority` field (browsers send one; curl, h2load and most non-browser
    /// clients do not) takes turns like an incremental one at the default urgency, as
    /// nginx and h2o share a connection among unprioritised streams: downloads of one
    /// client progress together, and one file's pages are read while still cached.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>, max: usize) {
        self.take_pending(out);
        if matches!(self.state, State::Failed(_)) {
            return;
        }
        let mut finished = Vec::new();
        let mut failed = Vec::new();
        let urgencies = self
            .streams
            .iter()
            .filter(|s| s.has_output())
            .fold(0u8, |m, s| m | 1 << s.priority.urgency);
        'urgency: for urgency in (0..8u8).filter(|u| urgencies & 1 << u != 0) {
            let n = self.streams.len();
            for k in 0..n {
                let s = self.streams.at(k);
                if s.priority.urgency != urgency || s.takes_turns() {
                    continue;
                }
                loop {
                    match self.data_frame(k, out, max, &mut finished, &mut failed) {
                        Step::Sent => {}
                        Step::Blocked => break,
                        Step::Full => break 'urgency,
                    }
                }
            }
            let mut progress = true;
            while progress {
                progress = false;
                for j in 0..n {
                    // The turn starts one stream further on each batch.
                    let k = (self.next_stream + j) % n;
                    let s = self.streams.at(k);
                    if s.priority.urgency != urgency || !s.takes_turns() {
                        continue;
                    }
                    match self.data_frame(k, out, max, &mut finished, &mut failed) {
                        Step::Sent => progress = true,
                        Step::Blocked => {}
                        Step::Full => break 'urgency,
                    }
                }
            }
        }
        self.next_stream = self.next_stream.wrapping_add(1);
        for id in finished {
            self.send_closed(id);
        }
        // A body whose source failed cannot be completed: the peer must not take the
        // stream's end for the response's (its content-length would say so anyway).
        for id in failed {
            self.reset(id, Reason::INTERNAL_ERROR);
        }
        self.take_pending(out);
    }

    /// One DATA frame from the `k`th stream, as large as its queue, both windows, the
    /// peer's frame size and the room left in `out` allow.
    fn data_frame(
        &mut self,
        k: usize,
        out: &mut Vec<u8>,
        max: usize,
        finished: &mut Vec<StreamId>,
        failed: &mut Vec<StreamId>,
    ) -> Step {
        // Room for a frame worth its header, or stop: tiny frames cost the peer more.
        let room = max.saturating_sub(out.len() + HEADER_LEN);
        if room < 512.min(max / 2) {
            return Step::Full;
        }
        let conn_window = self.send_window;
        let peer_max_frame = self.peer_max_frame as i64;
        let s = self.streams.at(k);
        if !s.has_output() {
            return Step::Blocked;
        }
        let unsent = s.unsent();
        let len = (unsent.min(i64::MAX as u64) as i64)
            .min(conn_window)
            .min(s.send_window)
            .min(peer_max_frame)
            .min(room as i64)
            .max(0) as usize;
        let last = s.end_queued && len as u64 == unsent;
        if len == 0 && !last {
            return Step::Blocked;
        }
        let at = out.len();
        frame::encode_data_head(out, s.id, len, last);
        if s.take(len, out).is_err() {
            out.truncate(at);
            s.abandon();
            failed.push(s.id);
            return Step::Blocked;
        }
        s.send_window -= len as i64;
        if last {
            s.send_closed = true;
            finished.push(s.id);
        }
        self.send_window -= len as i64;
        self.data_sent += len as u64;
        if last {
            Step::Blocked
        } else {
            Step::Sent
        }
    }

    /// Data is queued but no window lets any of it out: the driver's send timeout
    /// should run (a peer that never opens its window holds the stream forever).
    pub fn send_blocked(&self) -> bool {
        self.pending.is_empty()
            && self
                .streams
                .iter()
                .any(|s| s.has_output() && s.unsent() > 0)
            && !self.streams.iter().any(|s| {
                s.has_output() && (s.unsent() == 0 || (s.send_window > 0 && self.send_window > 0))
            })
    }

    /// DATA payload bytes `poll_transmit` has put out on all streams: while it grows the
    /// peer is taking data, however small its window steps, so a stall clock restarts.
    pub fn data_sent(&self) -> u64 {
        self.data_sent
    }

    /// Something is ready for `poll_transmit`.
    pub fn wants_write(&self) -> bool {
        !self.pending.is_empty()
            || (!matches!(self.state, State::Failed(_))
                && self.streams.iter().any(|s| {
                    s.has_output()
                        && (s.unsent() == 0 || (s.send_window > 0 && self.send_window > 0))
                }))
    }

    /// Encodes the block straight after a placeholder frame header, fixed up once its
    /// length is known: no buffer per response unless CONTINUATIONs are needed.
    pub(super) fn write_headers(
        &mut self,
        stream: StreamId,
        status: StatusCode,
        end_stream: bool,
        fields: impl FnOnce(&mut ResponseBlock<'_>),
    ) {
        // A batch's header blocks gather here: room for several at once, not a growth
        // from nothing (the buffer is dropped once sent).
        self.pending.reserve(1024);
        let start = self.pending.len();
        self.pending.extend_from_slice(&[0; HEADER_LEN]);
        self.encoder.begin_response(&mut self.pending, status);
        fields(&mut ResponseBlock {
            encoder: &mut self.encoder,
            out: &mut self.pending,
        });
        let len = self.pending.len() - start - HEADER_LEN;
        if len <= self.peer_max_frame as usize {
            let mut flags = frame::FLAG_END_HEADERS;
            if end_stream {
                flags |= frame::FLAG_END_STREAM;
            }
            let mut head = [0u8; HEADER_LEN];
            Head {
                len: len as u32,
                kind: frame::HEADERS,
                flags,
                stream,
            }
            .encode_into(&mut head);
            self.pending[start..start + HEADER_LEN].copy_from_slice(&head);
        } else {
            let block = self.pending.split_off(start + HEADER_LEN);
            self.pending.truncate(start);
            frame::encode_headers(
                &mut self.pending,
                stream,
                &block,
                end_stream,
                self.peer_max_frame as usize,
            );
        }
    }

    /// END_STREAM is in the output. A finished request closes the stream; one still
    /// sending its body is told to stop without error (§8.1).
    pub(super) fn send_closed(&mut self, id: StreamId) {
        let Some(s) = self.streams.get(id) else {
            return;
        };
        s.send_closed = true;
        if s.recv_closed {
            self.streams.remove(id);
            self.remember(id, false);
            self.reset_budget = (self.reset_budget + 1).min(self.config.reset_budget as i64);
        } else {
            self.streams.remove(id);
            frame::encode_rst_stream(&mut self.pending, id, Reason::NO_ERROR);
            self.remember(id, true);
        }
        self.streams.shrink_if_empty();
    }

    fn take_pending(&mut self, out: &mut Vec<u8>) {
        if self.pending.is_empty() {
            return;
        }
        if out.is_empty() && out.capacity() == 0 {
            std::mem::swap(out, &mut self.pending);
        } else {
            out.extend_from_slice(&self.pending);
            // No buffer is kept while there is nothing to send.
            self.pending = Vec::new();
        }
        self.control_queued = 0;
    }
}

/// What one attempt at a DATA frame did.
enum Step {
    /// A frame went out and the stream may have more.
    Sent,
    /// The stream has nothing more to send now (done, empty queue, or no window).
    Blocked,
    /// `out` is full for this batch.
    Full,
}
