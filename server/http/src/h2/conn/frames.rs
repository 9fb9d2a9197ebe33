//! What each received frame does to the connection (RFC 9113 §5-§6).

use super::{Block, Connection, Event, State, BURST_EVENTS};
use crate::h2::frame::{self, Frame, Head};
use crate::h2::priority::Priority;
use crate::h2::request::Fields;
use crate::h2::stream::Stream;
use crate::h2::{Error, Reason, StreamId};
use bytes::Bytes;
use http::StatusCode;

/// CONTINUATION frames one header block may take: a real client needs a handful; empty
/// ones cost nothing to send and would otherwise keep us parsing (CONTINUATION flood).
const MAX_BLOCK_FRAMES: u32 = 64;

fn conn_err(reason: Reason, why: &'static str) -> Error {
    Error::conn(reason, why)
}

/// Where a completed header block's stream stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    New,
    Trailers,
    HalfClosed,
    /// Reset by us, closed long ago or beyond our GOAWAY: decoded for HPACK, otherwise
    /// ignored (a late frame sent before our RST_STREAM arrived is legitimate, §5.1).
    Ignored,
    /// Closed by the peer (or both ends) and still remembered.
    Closed,
    /// Below the last id yet skipped by the client: ids must increase (§5.1.1).
    Backwards,
}

impl Connection {
    /// Handles one frame; stream errors become RST_STREAM here, connection errors are
    /// returned.
    pub(super) fn frame(&mut self, head: &Head, payload: &[u8]) -> Result<(), Error> {
        match self.dispatch(head, payload) {
            Err(Error::Stream {
                stream,
                reason,
                why,
            }) => self.stream_error(stream, reason, why),
            r => r,
        }
    }

    fn dispatch(&mut self, head: &Head, payload: &[u8]) -> Result<(), Error> {
        // §6.10: nothing but the block's own CONTINUATIONs until END_HEADERS.
        if let Some(b) = &self.block {
            if head.kind != frame::CONTINUATION || head.stream != b.stream {
                return Err(conn_err(
                    Reason::PROTOCOL_ERROR,
                    "frame inside a header block",
                ));
            }
        }
        let f = frame::parse(head, payload)?;
        if self.state == State::FirstSettings {
            if !matches!(f, Frame::Settings { ack: false, .. }) {
                return Err(conn_err(
                    Reason::PROTOCOL_ERROR,
                    "preface not followed by SETTINGS",
                ));
            }
            self.state = State::Open;
        }
        match f {
            Frame::Data {
                stream,
                data,
                end_stream,
                flow_len,
            } => self.data(stream, data, end_stream, flow_len),
            Frame::Headers {
                stream,
                fragment,
                end_stream,
                end_headers,
                priority,
            } => {
                if stream.is_multiple_of(2) {
                    return Err(conn_err(
                        Reason::PROTOCOL_ERROR,
                        "even stream id from a client",
                    ));
                }
                let block = Block {
                    stream,
                    end_stream,
                    self_dependent: priority.is_some_and(|p| p.depends_on == stream),
                    bytes: Vec::new(),
                    frames: 0,
                };
                if end_headers {
                    // The usual case: decoded in place, never copied.
                    self.end_block(block, fragment)
                } else {
                    self.block = Some(block);
                    self.continuation(fragment, false)
                }
            }
            Frame::Continuation {
                fragment,
                end_headers,
                ..
            } => {
                if self.block.is_none() {
                    return Err(conn_err(
                        Reason::PROTOCOL_ERROR,
                        "CONTINUATION without HEADERS",
                    ));
                }
                self.continuation(fragment, end_headers)
            }
            // Deprecated (§5.3.2) and ignored; parse already refused self-dependence.
            Frame::Priority { .. } => Ok(()),
            Frame::RstStream { stream, reason } => self.rst_stream(stream, reason),
            Frame::Settings { ack, params } => self.settings(ack, params),
            Frame::PushPromise { .. } => Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "PUSH_PROMISE from a client",
            )),
            Frame::Ping {
                ack: false,
                payload,
            } => {
                frame::encode_ping(&mut self.pending, true, payload);
                self.control_queued += HEADER_LEN_PING;
                Ok(())
            }
            Frame::Ping { ack: true, payload } => {
                if self.pings_unacked > 0 {
                    self.pings_unacked -= 1;
                    self.events.push_back(Event::PingAck { payload });
                }
                Ok(())
            }
            Frame::GoAway {
                last_stream,
                reason,
                debug,
            } => {
                self.events.push_back(Event::GoAway {
                    last_stream,
                    reason,
                    debug: Bytes::copy_from_slice(debug),
                });
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => self.window_update(stream, increment),
            Frame::Unknown { .. } => Ok(()),
        }
    }

    /// Sends RST_STREAM for a stream error and forgets the stream. On an idle stream it is a
    /// connection error instead: RST_STREAM may not be sent there (§6.4).
    pub(super) fn stream_error(
        &mut self,
        id: StreamId,
        reason: Reason,
        why: &'static str,
    ) -> Result<(), Error> {
        if id > self.last_stream {
            return Err(conn_err(Reason::PROTOCOL_ERROR, why));
        }
        frame::encode_rst_stream(&mut self.pending, id, reason);
        self.control_queued += 13;
        if self.streams.remove(id).is_some() {
            self.events.push_back(Event::Reset {
                stream: id,
                reason,
                by_peer: false,
            });
        }
        self.remember(id, true);
        self.spend_budget_for_error()
    }

    /// [`Self::spend_budget`] for a stream ended because the peer erred (a malformed
    /// request, a head too large, empty DATA): these also count against the connection's
    /// lifetime cap, which completed streams do not refill (MadeYouReset, CVE-2025-8671).
    fn spend_budget_for_error(&mut self) -> Result<(), Error> {
        self.error_resets = self.error_resets.saturating_add(1);
        if self.error_resets > self.config.error_reset_lifetime {
            return Err(conn_err(
                Reason::ENHANCE_YOUR_CALM,
                "too many streams reset for errors",
            ));
        }
        self.spend_budget()
    }

    fn spend_budget(&mut self) -> Result<(), Error> {
        self.reset_budget -= 1;
        if self.reset_budget < 0 {
            return Err(conn_err(
                Reason::ENHANCE_YOUR_CALM,
                "too many streams reset or refused",
            ));
        }
        Ok(())
    }

    fn recently(&self, id: StreamId) -> Option<bool> {
        self.recent
            .iter()
            .find(|(s, _)| *s == id)
            .map(|&(_, by_us)| by_us)
    }

    /// A frame on a stream at or below the last that is gone: one we reset, or one
    /// closed so long ago it is forgotten. Such frames may still be in flight from a
    /// legitimate peer, so they are dropped without a reset (§5.1, §6.4).
    fn late(&self, id: StreamId) -> bool {
        match self.recently(id) {
            Some(by_us) => by_us,
            None => {
                id <= self.last_stream
                    && !self.streams.contains(id)
                    && !self.skipped.iter().any(|&(a, b)| (a..=b).contains(&id))
            }
        }
    }

    /// A new client stream: ids skipped on the way stay closed, never used (§5.1.1).
    fn advance(&mut self, id: StreamId) {
        let next = if self.last_stream == 0 {
            1
        } else {
            self.last_stream + 2
        };
        if id > next {
            if self.skipped.len() == super::SKIPPED {
                self.skipped.pop_front();
            }
            self.skipped.push_back((next, id - 2));
        }
        self.last_stream = id;
    }

    fn continuation(&mut self, fragment: &[u8], end_headers: bool) -> Result<(), Error> {
        let Some(b) = self.block.as_mut() else {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "CONTINUATION without HEADERS",
            ));
        };
        b.frames += 1;
        if b.bytes.len() + fragment.len() > self.config.max_header_block
            || b.frames > MAX_BLOCK_FRAMES
        {
            return Err(conn_err(
                Reason::ENHANCE_YOUR_CALM,
                "header block too large",
            ));
        }
        b.bytes.extend_from_slice(fragment);
        if !end_headers {
            return Ok(());
        }
        let mut b = self.block.take().unwrap_or_else(|| unreachable!());
        let bytes = std::mem::take(&mut b.bytes);
        self.end_block(b, &bytes)
    }

    fn end_block(&mut self, b: Block, bytes: &[u8]) -> Result<(), Error> {
        if bytes.len() > self.config.max_header_block {
            return Err(conn_err(
                Reason::ENHANCE_YOUR_CALM,
                "header block too large",
            ));
        }
        let id = b.stream;
        let target = match self.streams.get(id).map(|s| s.recv_closed) {
            Some(true) => Target::HalfClosed,
            Some(false) => Target::Trailers,
            None if id > self.last_stream => match self.going_away {
                Some(last) if id > last => Target::Ignored,
                _ => Target::New,
            },
            None if self.late(id) => Target::Ignored,
            None if self.recently(id).is_some() => Target::Closed,
            None => Target::Backwards,
        };
        // Always decoded to the end, whatever becomes of the stream: HPACK state is shared.
        let mut fields = if target == Target::Trailers {
            Fields::trailers()
        } else {
            Fields::request()
        };
        let keep = matches!(target, Target::New | Target::Trailers);
        let max_list = self.config.max_header_list_size as usize;
        let decoded = self
            .decoder
            .decode(bytes, max_list, |n, v| {
                if keep {
                    fields.field(n, v)
                }
            })
            .map_err(|_| conn_err(Reason::COMPRESSION_ERROR, "invalid header block"))?;
        match target {
            Target::Ignored => {
                if id > self.last_stream {
                    self.advance(id);
                    self.remember(id, true);
                }
                Ok(())
            }
            Target::Closed => Err(conn_err(
                Reason::STREAM_CLOSED,
                "HEADERS on a closed stream",
            )),
            Target::Backwards => Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "stream id lower than one used",
            )),
            Target::HalfClosed => Err(Error::stream(
                id,
                Reason::STREAM_CLOSED,
                "HEADERS after END_STREAM",
            )),
            Target::Trailers => self.trailers(id, b.end_stream, decoded.over_limit, fields),
            Target::New => {
                self.advance(id);
                if b.self_dependent {
                    return Err(Error::stream(
                        id,
                        Reason::PROTOCOL_ERROR,
                        "stream depends on itself",
                    ));
                }
                if self.streams.len() >= self.config.max_concurrent_streams as usize {
                    return Err(Error::stream(
                        id,
                        Reason::REFUSED_STREAM,
                        "too many concurrent streams",
                    ));
                }
                if decoded.over_limit {
                    return self.too_large(id, b.end_stream);
                }
                let content_length = fields.content_length();
                let head = fields
                    .into_request()
                    .map_err(|why| Error::stream(id, Reason::PROTOCOL_ERROR, why))?;
                if b.end_stream && content_length.is_some_and(|n| n != 0) {
                    return Err(Error::stream(
                        id,
                        Reason::PROTOCOL_ERROR,
                        "content-length without DATA",
                    ));
                }
                let mut s = Stream::new(
                    id,
                    self.peer_initial_window as i64,
                    self.config.initial_window_size as i64,
                );
                s.recv_closed = b.end_stream;
                s.content_length = content_length;
                if let Some(v) = head.priority() {
                    s.priority = Priority::parse(v);
                    s.prioritised = true;
                }
                self.streams.insert(s);
                if self.events.capacity() == 0 {
                    self.events.reserve(BURST_EVENTS);
                }
                self.events.push_back(Event::Request {
                    stream: id,
                    head,
                    end_stream: b.end_stream,
                });
                Ok(())
            }
        }
    }

    /// A head past SETTINGS_MAX_HEADER_LIST_SIZE is answered 431 (RFC 6585) by us,
    /// without the driver.
    fn too_large(&mut self, id: StreamId, end_stream: bool) -> Result<(), Error> {
        let mut s = Stream::new(id, 0, 0);
        s.recv_closed = end_stream;
        s.headers_sent = true;
        s.end_queued = true;
        self.streams.insert(s);
        self.write_headers(
            id,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            true,
            |_| {},
        );
        self.send_closed(id);
        self.spend_budget_for_error()
    }

    fn trailers(
        &mut self,
        id: StreamId,
        end_stream: bool,
        over_limit: bool,
        fields: Fields,
    ) -> Result<(), Error> {
        if !end_stream {
            return Err(Error::stream(
                id,
                Reason::PROTOCOL_ERROR,
                "second HEADERS without END_STREAM",
            ));
        }
        if over_limit {
            return Err(Error::stream(
                id,
                Reason::PROTOCOL_ERROR,
                "trailers over the header list size",
            ));
        }
        let headers = fields
            .into_trailers()
            .map_err(|why| Error::stream(id, Reason::PROTOCOL_ERROR, why))?;
        let s = self
            .streams
            .get(id)
            .ok_or(conn_err(Reason::INTERNAL_ERROR, "lost stream"))?;
        if s.content_length.is_some_and(|n| n != s.received) {
            return Err(Error::stream(
                id,
                Reason::PROTOCOL_ERROR,
                "content-length does not match the DATA",
            ));
        }
        s.recv_closed = true;
        self.events.push_back(Event::Trailers {
            stream: id,
            headers,
        });
        self.recv_done(id);
        Ok(())
    }

    /// The request is complete; the stream closes if the response is too.
    fn recv_done(&mut self, id: StreamId) {
        if self.streams.get(id).is_some_and(|s| s.send_closed) {
            self.send_closed(id);
        }
    }

    fn data(
        &mut self,
        id: StreamId,
        data: &[u8],
        end_stream: bool,
        flow_len: u32,
    ) -> Result<(), Error> {
        if id > self.last_stream || id.is_multiple_of(2) && !self.streams.contains(id) {
            return Err(conn_err(Reason::PROTOCOL_ERROR, "DATA on an idle stream"));
        }
        // The connection window counts every DATA frame, whatever its stream (§6.9).
        if flow_len as i64 > self.recv_window {
            return Err(conn_err(
                Reason::FLOW_CONTROL_ERROR,
                "DATA beyond the connection window",
            ));
        }
        self.recv_window -= flow_len as i64;
        let padding = (flow_len as usize - data.len()) as u32;
        let Some(s) = self.streams.get(id).filter(|s| !s.recv_closed) else {
            // Nobody will consume it: given back at once.
            self.release_capacity(0, flow_len as usize);
            if self.late(id) {
                return Ok(());
            }
            return Err(Error::stream(
                id,
                Reason::STREAM_CLOSED,
                "DATA on a closed stream",
            ));
        };
        if flow_len as i64 > s.recv_window {
            self.release_capacity(0, flow_len as usize);
            return Err(Error::stream(
                id,
                Reason::FLOW_CONTROL_ERROR,
                "DATA beyond the stream window",
            ));
        }
        s.recv_window -= flow_len as i64;
        s.received += data.len() as u64;
        if let Some(n) = s.content_length {
            if s.received > n || (end_stream && s.received != n) {
                // The stream is reset and its DATA never consumed: given back at once.
                self.release_capacity(0, flow_len as usize);
                return Err(Error::stream(
                    id,
                    Reason::PROTOCOL_ERROR,
                    "content-length does not match the DATA",
                ));
            }
        }
        s.recv_closed = end_stream;
        if data.is_empty() && !end_stream {
            // Free to send, work to receive: counted like a reset.
            self.spend_budget_for_error()?;
        }
        if !data.is_empty() || end_stream {
            self.events.push_back(Event::Data {
                stream: id,
                data: Bytes::copy_from_slice(data),
                end_stream,
            });
        }
        if padding > 0 {
            self.release_capacity(id, padding as usize);
        }
        if end_stream {
            self.recv_done(id);
        }
        Ok(())
    }

    fn rst_stream(&mut self, id: StreamId, reason: Reason) -> Result<(), Error> {
        if id > self.last_stream || id.is_multiple_of(2) && !self.streams.contains(id) {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "RST_STREAM on an idle stream",
            ));
        }
        if self.streams.remove(id).is_some() {
            self.events.push_back(Event::Reset {
                stream: id,
                reason,
                by_peer: true,
            });
            self.remember(id, false);
            self.streams.shrink_if_empty();
            // The response was not finished: work started for nothing (Rapid Reset).
            return self.spend_budget();
        }
        Ok(())
    }
}

/// What a PING ack adds to the control frames queued.
const HEADER_LEN_PING: usize = frame::HEADER_LEN + 8;
