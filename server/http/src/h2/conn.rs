//! The server side of an HTTP/2 connection as a state machine (RFC 9113): bytes in,
//! events out, responses in, bytes out. No I/O and no clock.
//!
//! A driver's loop, one batch at a time:
//!
//! ```text
//! let mut conn = Connection::new(Config::default());
//! loop {
//!     n = socket.read(&mut buf[filled..]); filled += n;
//!     let used = conn.recv(&buf[..filled])?;     // Err: write what poll_transmit gives, close
//!     buf.copy_within(used..filled, 0); filled -= used;
//!     while let Some(ev) = conn.poll_event() {
//!         match ev {
//!             Event::Request { stream, head, .. } => {
//!                 conn.send_response(stream, status, &headers, false)?;
//!                 conn.send_data(stream, body, true)?;
//!             }
//!             Event::Data { stream, data, .. } => conn.release_capacity(stream, data.len()),
//!             _ => {}
//!         }
//!     }
//!     conn.poll_transmit(&mut out, 64 * 1024);   // one write of `out`
//!     if conn.send_blocked() { /* arm the send timeout */ }
//! }
//! ```

mod config;
mod control;
mod frames;
mod send;
#[cfg(test)]
mod tests;

use super::frame::{
    self, Head, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, HEADER_LEN, MAX_MAX_FRAME_SIZE,
};
use super::hpack::{Decoder, Encoder, Precoded};
use super::source::{DataSource, Source};
use super::stream::{Stream, Streams};
use super::{Error, Reason, StreamId};
use bytes::Bytes;
pub use config::Config;
use http::{HeaderMap, StatusCode};
use std::collections::VecDeque;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the peer did, for the driver.
#[derive(Debug)]
pub enum Event {
    /// A new request. `end_stream`: it has no body.
    Request {
        stream: StreamId,
        head: super::request::Head,
        end_stream: bool,
    },
    /// Request body bytes; hand their length to `release_capacity` once consumed.
    Data {
        stream: StreamId,
        data: Bytes,
        end_stream: bool,
    },
    /// Request trailers; the request is complete.
    Trailers {
        stream: StreamId,
        headers: HeaderMap,
    },
    /// The stream is gone: reset by the peer (`by_peer`) or by us for its error. Stop
    /// working on it; `send_*` for it now fail with `SendError::Closed`.
    Reset {
        stream: StreamId,
        reason: Reason,
        by_peer: bool,
    },
    /// The peer is closing: it will start no streams above `last_stream`.
    GoAway {
        last_stream: StreamId,
        reason: Reason,
        debug: Bytes,
    },
    /// The peer acknowledged our SETTINGS.
    SettingsAcked,
    /// The answer to our `ping`.
    PingAck { payload: [u8; 8] },
}

/// A response's header block as `send_response_with` writes it, after `:status`.
pub struct ResponseBlock<'a> {
    encoder: &'a mut Encoder,
    out: &'a mut Vec<u8>,
}

impl ResponseBlock<'_> {
    /// A field, through the connection's encoder (connection-specific ones are dropped).
    pub fn field(&mut self, name: &http::HeaderName, value: &[u8]) {
        self.encoder.header(self.out, name, value);
    }

    /// Fields whose strings were coded ahead of time (`Precoded`).
    pub fn precoded(&mut self, fields: &Precoded) {
        self.encoder.precoded(self.out, fields);
    }
}

/// Why a response could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("stream is closed or was reset")]
    Closed,
    #[error("response headers already sent")]
    HeadersSent,
    #[error("response headers not sent yet")]
    NoHeaders,
    #[error("response already ended")]
    Ended,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for the client preface.
    Preface,
    /// Preface read; the next frame must be SETTINGS (§3.4).
    FirstSettings,
    Open,
    /// A connection error: GOAWAY is queued and nothing more is read or sent.
    Failed(Error),
}

/// A header block arriving across HEADERS and CONTINUATION frames.
struct Block {
    stream: StreamId,
    end_stream: bool,
    self_dependent: bool,
    bytes: Vec<u8>,
    frames: u32,
}

/// How many recently closed streams are remembered (see `Connection::recent`).
const RECENT: usize = 32;
/// Bytes of event queue capacity kept once it is drained while streams are open (none
/// is kept once no stream is open).
const KEEP_EVENTS: usize = 8 << 10;
/// Events room made at once when the queue starts again from nothing: a browser's or
/// load generator's burst, in one allocation instead of a doubling per few events.
const BURST_EVENTS: usize = 16;
/// How many runs of client stream ids skipped over are remembered (see `skipped`).
const SKIPPED: usize = 8;

pub struct Connection {
    config: Config,
    state: State,
    decoder: Decoder,
    encoder: Encoder,
    streams: Streams,
    /// The highest client stream id used: ids above are idle, those below closed unless
    /// in `streams` (§5.1.1).
    last_stream: StreamId,
    /// Recently closed streams and whether we reset them: frames still in flight for
    /// a stream we reset are ignored, others get STREAM_CLOSED (§5.1).
    recent: VecDeque<(StreamId, bool)>,
    /// Runs of ids (first, last) the client skipped: HEADERS there go backwards
    /// (§5.1.1), while other untracked ids below `last_stream` were used and forgotten.
    skipped: VecDeque<(StreamId, StreamId)>,
    block: Option<Block>,
    events: VecDeque<Event>,
    /// Frames to write, in order: control frames and response HEADERS. DATA is cut from
    /// stream queues at `poll_transmit` time, when the windows are known.
    pending: Vec<u8>,
    /// Bytes of peer-triggered frames in `pending` (see `Config::max_control_queued`).
    control_queued: usize,
    peer_initial_window: u32,
    peer_max_frame: u32,
    send_window: i64,
    recv_window: i64,
    recv_released: u32,
    settings_unacked: u32,
    pings_unacked: u32,
    reset_budget: i64,
    /// Resets for the peer's errors so far, against `config.error_reset_lifetime`.
    error_resets: u32,
    /// GOAWAY sent: streams above this id are ignored.
    going_away: Option<StreamId>,
    /// Where the DATA scheduler starts its next round, so no stream starves.
    next_stream: usize,
    /// DATA payload bytes put out so far (see `data_sent`).
    data_sent: u64,
}

impl Connection {
    /// A connection with our SETTINGS (and a larger connection window) already queued.
    pub fn new(mut config: Config) -> Connection {
        config.initial_window_size = config
            .initial_window_size
            .clamp(DEFAULT_WINDOW, frame::MAX_WINDOW);
        config.connection_window_size = config
            .connection_window_size
            .clamp(DEFAULT_WINDOW, frame::MAX_WINDOW);
        config.max_frame_size = config
            .max_frame_size
            .clamp(DEFAULT_MAX_FRAME_SIZE, MAX_MAX_FRAME_SIZE);
        // A block any encoder would send for a list we allow is no larger than the list:
        // the flood cap must not refuse what SETTINGS_MAX_HEADER_LIST_SIZE invites.
        config.max_header_block = config
            .max_header_block
            .max(config.max_header_list_size as usize);
        use frame::setting::*;
        let mut settings = vec![
            (MAX_CONCURRENT_STREAMS, config.max_concurrent_streams),
            (MAX_HEADER_LIST_SIZE, config.max_header_list_size),
            // A server never pushes; 0 says so (RFC 9113 §8.4 allows it from a server).
            (ENABLE_PUSH, 0),
        ];
        if config.initial_window_size != DEFAULT_WINDOW {
            settings.push((INITIAL_WINDOW_SIZE, config.initial_window_size));
        }
        if config.max_frame_size != DEFAULT_MAX_FRAME_SIZE {
            settings.push((MAX_FRAME_SIZE, config.max_frame_size));
        }
        if config.header_table_size != 4096 {
            settings.push((HEADER_TABLE_SIZE, config.header_table_size));
        }
        let mut pending = Vec::new();
        frame::encode_settings(&mut pending, &settings);
        if config.connection_window_size > DEFAULT_WINDOW {
            frame::encode_window_update(
                &mut pending,
                0,
                config.connection_window_size - DEFAULT_WINDOW,
            );
        }
        Connection {
            // Until our SETTINGS are acknowledged the peer may use the default 4096.
            decoder: Decoder::new((config.header_table_size as usize).max(4096)),
            encoder: Encoder::new(config.encoder_table_size as usize),
            streams: Streams::default(),
            last_stream: 0,
            recent: VecDeque::new(),
            skipped: VecDeque::new(),
            block: None,
            events: VecDeque::new(),
            pending,
            control_queued: 0,
            peer_initial_window: DEFAULT_WINDOW,
            peer_max_frame: DEFAULT_MAX_FRAME_SIZE,
            send_window: DEFAULT_WINDOW as i64,
            recv_window: config.connection_window_size as i64,
            recv_released: 0,
            settings_unacked: 1,
            pings_unacked: 0,
            reset_budget: config.reset_budget as i64,
            error_resets: 0,
            going_away: None,
            next_stream: 0,
            data_sent: 0,
            state: State::Preface,
            config,
        }
    }

    /// Reads the frames at the start of `input` and returns how many bytes they took; a
    /// partial frame is left for the next call, with more bytes. A connection error is
    /// returned after queueing its GOAWAY: take the output, write it, close.
    pub fn recv(&mut self, input: &[u8]) -> Result<usize, Error> {
        if let State::Failed(e) = self.state {
            return Err(e);
        }
        let mut pos = 0;
        if self.state == State::Preface {
            let n = PREFACE.len().min(input.len());
            if input[..n] != PREFACE[..n] {
                return Err(self.fail(Error::conn(
                    Reason::PROTOCOL_ERROR,
                    "invalid connection preface",
                )));
            }
            if n < PREFACE.len() {
                return Ok(0);
            }
            pos = n;
            self.state = State::FirstSettings;
        }
        while input.len() - pos >= HEADER_LEN {
            let head = Head::parse(input[pos..pos + HEADER_LEN].try_into().unwrap_or(&[0; 9]));
            // Checked before the payload arrives, so an oversized frame is never buffered.
            if head.len > self.config.max_frame_size {
                return Err(self.fail(Error::conn(
                    Reason::FRAME_SIZE_ERROR,
                    "frame larger than SETTINGS_MAX_FRAME_SIZE",
                )));
            }
            let end = pos + HEADER_LEN + head.len as usize;
            if end > input.len() {
                break;
            }
            let payload = &input[pos + HEADER_LEN..end];
            pos = end;
            let result = self.frame(&head, payload);
            if let Err(e) = result.and_then(|()| self.check_control_queue()) {
                return Err(self.fail(e));
            }
        }
        Ok(pos)
    }

    /// The next event, in the order the frames arrived.
    pub fn poll_event(&mut self) -> Option<Event> {
        let ev = self.events.pop_front();
        // A burst's queue is given back once drained, and any queue once no stream is
        // open: an idle connection holds no event capacity (a few requests' worth, about
        // 800 bytes, was most of an idle connection's state).
        if ev.is_none()
            && self.events.capacity() > 0
            && (self.streams.len() == 0
                || self.events.capacity() * std::mem::size_of::<Event>() > KEEP_EVENTS)
        {
            self.events = VecDeque::new();
        }
        ev
    }

    /// Queues a response's HEADERS (and CONTINUATIONs past the peer's frame size).
    /// Connection-specific fields are dropped (RFC 9113 §8.2.2).
    pub fn send_response(
        &mut self,
        stream: StreamId,
        status: StatusCode,
        headers: &HeaderMap,
        end_stream: bool,
    ) -> Result<(), SendError> {
        self.send_response_with(stream, status, end_stream, |block| {
            for (name, value) in headers {
                block.field(name, value.as_bytes());
            }
        })
    }

    /// `send_response` with the fields given one by one to `fields` (no `HeaderMap`).
    pub fn send_response_with(
        &mut self,
        stream: StreamId,
        status: StatusCode,
        end_stream: bool,
        fields: impl FnOnce(&mut ResponseBlock<'_>),
    ) -> Result<(), SendError> {
        let s = self.open_stream(stream)?;
        if s.headers_sent {
            return Err(SendError::HeadersSent);
        }
        s.headers_sent = true;
        s.end_queued = end_stream;
        self.write_headers(stream, status, end_stream, fields);
        if end_stream {
            self.send_closed(stream);
        }
        Ok(())
    }

    /// Queues response body bytes; they leave as the windows allow. `end_stream` with
    /// empty `data` ends the body.
    pub fn send_data(
        &mut self,
        stream: StreamId,
        data: Bytes,
        end_stream: bool,
    ) -> Result<(), SendError> {
        let s = self.open_body(stream)?;
        s.queued += data.len();
        if !data.is_empty() {
            s.queue.push_back(data);
        }
        s.end_queued = end_stream;
        Ok(())
    }

    /// Ends `stream`'s response with `len` bytes read from `source` as DATA frames are
    /// cut, after whatever `send_data` queued.
    pub fn send_source(
        &mut self,
        stream: StreamId,
        source: Box<dyn DataSource>,
        len: u64,
    ) -> Result<(), SendError> {
        let s = self.open_body(stream)?;
        if len > 0 {
            s.source = Some(Source {
                reader: source,
                left: len,
            });
        }
        s.end_queued = true;
        Ok(())
    }

    /// Response body bytes given for `stream` and not yet written (queued, or owed by its
    /// source); `None` once it is closed or reset. A driver reads more of a file while
    /// this is low.
    pub fn buffered(&self, stream: StreamId) -> Option<usize> {
        self.streams
            .iter()
            .find(|s| s.id == stream)
            .map(|s| usize::try_from(s.unsent()).unwrap_or(usize::MAX))
    }

    /// Whether `stream`'s own flow-control window lets data out: its queued data then
    /// waits for its turn or for the connection's window, not for the peer to open its own.
    pub fn stream_window_open(&self, stream: StreamId) -> bool {
        self.streams
            .iter()
            .find(|s| s.id == stream)
            .is_some_and(|s| s.send_window > 0)
    }

    /// Response body bytes queued in memory on all streams and not yet written (sources
    /// hold none): a driver bounds what the connection holds with it.
    pub fn queued_data(&self) -> usize {
        self.streams.iter().map(|s| s.queued).sum()
    }

    /// Abandons a stream (RST_STREAM with `reason`), e.g. when its file cannot be read.
    pub fn reset(&mut self, stream: StreamId, reason: Reason) {
        if self.streams.remove(stream).is_some() {
            frame::encode_rst_stream(&mut self.pending, stream, reason);
            self.remember(stream, true);
        }
    }

    /// Returns request body bytes the driver consumed to the peer's windows; WINDOW_UPDATE
    /// goes out once half a window has been consumed, not per frame.
    pub fn release_capacity(&mut self, stream: StreamId, n: usize) {
        let conn_target = self.config.connection_window_size as i64;
        let n = (n as i64)
            .min(conn_target - self.recv_window - self.recv_released as i64)
            .max(0);
        self.recv_released += n as u32;
        if self.recv_released as i64 >= conn_target / 2 {
            frame::encode_window_update(&mut self.pending, 0, self.recv_released);
            self.recv_window += self.recv_released as i64;
            self.recv_released = 0;
        }
        let target = self.config.initial_window_size as i64;
        if let Some(s) = self.streams.get(stream).filter(|s| !s.recv_closed) {
            let n = n
                .min(target - s.recv_window - s.recv_released as i64)
                .max(0);
            s.recv_released += n as u32;
            if s.recv_released as i64 >= target / 2 {
                frame::encode_window_update(&mut self.pending, stream, s.recv_released);
                s.recv_window += s.recv_released as i64;
                s.recv_released = 0;
            }
        }
    }

    /// Sends a PING (keep-alive or RTT probe); its ack arrives as `Event::PingAck`.
    pub fn ping(&mut self, payload: [u8; 8]) {
        frame::encode_ping(&mut self.pending, false, payload);
        self.pings_unacked += 1;
    }

    /// Starts closing: GOAWAY with the last stream taken, after which new streams are
    /// ignored. With NO_ERROR the open streams finish; with an error the connection ends.
    pub fn go_away(&mut self, reason: Reason) {
        if reason != Reason::NO_ERROR {
            self.fail(Error::conn(reason, "closed by the server"));
        } else if self.going_away.is_none() && !matches!(self.state, State::Failed(_)) {
            frame::encode_goaway(&mut self.pending, self.last_stream, reason, b"");
            self.going_away = Some(self.last_stream);
        }
    }

    /// After a connection error, or once a GOAWAY's streams are done: write what is
    /// pending, then close the socket.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Failed(_))
            || (self.going_away.is_some() && self.streams.len() == 0)
    }

    /// Whether the peer acknowledged our SETTINGS; a driver that waits too long for it
    /// may `go_away(Reason::SETTINGS_TIMEOUT)` (RFC 9113 §6.5.3): there is no clock here.
    pub fn settings_acked(&self) -> bool {
        self.settings_unacked == 0
    }

    /// Bytes of frames queued for `poll_transmit` besides DATA (control frames, HEADERS,
    /// our own 431s): a driver reads no more while these and its unwritten batch are
    /// large, or a peer that asks without reading grows them without bound.
    pub fn pending_output(&self) -> usize {
        self.pending.len()
    }

    /// Open or half-closed streams.
    pub fn active_streams(&self) -> usize {
        self.streams.len()
    }

    /// A stream whose response HEADERS went and whose body has not ended: more of the
    /// body may be given.
    fn open_body(&mut self, stream: StreamId) -> Result<&mut Stream, SendError> {
        let s = self.open_stream(stream)?;
        if !s.headers_sent {
            return Err(SendError::NoHeaders);
        }
        if s.end_queued {
            return Err(SendError::Ended);
        }
        Ok(s)
    }

    fn open_stream(&mut self, stream: StreamId) -> Result<&mut Stream, SendError> {
        if matches!(self.state, State::Failed(_)) {
            return Err(SendError::Closed);
        }
        self.streams.get(stream).ok_or(SendError::Closed)
    }

    fn remember(&mut self, id: StreamId, reset_by_us: bool) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back((id, reset_by_us));
    }

    fn check_control_queue(&self) -> Result<(), Error> {
        if self.control_queued > self.config.max_control_queued {
            return Err(Error::conn(
                Reason::ENHANCE_YOUR_CALM,
                "control frames queued faster than read",
            ));
        }
        Ok(())
    }

    /// Queues GOAWAY for a connection error, once, and stops the connection.
    fn fail(&mut self, e: Error) -> Error {
        if let State::Failed(first) = self.state {
            return first;
        }
        let why = match e {
            Error::Connection { why, .. } | Error::Stream { why, .. } => why,
        };
        // Never above a GOAWAY already sent (RFC 9113 §6.8): streams the peer opened
        // after it were ignored, and `last_stream` moved past them.
        frame::encode_goaway(
            &mut self.pending,
            self.going_away.unwrap_or(self.last_stream),
            e.reason(),
            why.as_bytes(),
        );
        self.state = State::Failed(e);
        self.streams.clear();
        self.block = None;
        e
    }
}
