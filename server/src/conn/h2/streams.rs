//! A connection's streams: handlers at work, response bodies to send, request bodies arriving.

// Plain vectors polled in the connection's task: a connection has at most a few hundred
// streams, and no stream gets a task of its own.
use super::ctx::Ctx;
use super::reply::{self, Queued};
use super::request_body::{Inbound, RequestBody};
use crate::app::Routed;
use crate::conn::activity::Busy;
use crate::conn::hyper::{handle_routed, route_now, Routing};
use crate::conn::recorded_body::RecordedBody;
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body as _;
use skiff_http::h2::conn::{Connection, Event};
use skiff_http::h2::request::Head;
use skiff_http::h2::{Reason, StreamId};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Response bytes a connection's streams may have queued together before no body is
/// polled: zero windows on every stream would otherwise hold a chunk per stream.
const MAX_QUEUED: usize = 1 << 20;

/// Bytes of a stream's queue (or of the connection's DATA) that must leave to restart a
/// stall clock: a slow reader keeps its stream, a peer opening a window a few bytes at a
/// time (its stream's or the connection's) does not.
const PROGRESS: usize = 16 * 1024;

/// Whether `PROGRESS` bytes of the connection's DATA left since `mark` (`data_sent` then);
/// if so the mark moves to `sent`.
pub(super) fn connection_progressed(sent: u64, mark: &mut u64) -> bool {
    let went = sent >= *mark + PROGRESS as u64;
    if went {
        *mark = sent;
    }
    went
}

type Responding = Pin<Box<dyn Future<Output = Response<RecordedBody>> + Send>>;

/// Room made at once when a list given back by `shrink_if_idle` is used again: a burst
/// of streams in one allocation, not a doubling every few.
const BURST: usize = 16;

fn push_burst<T>(list: &mut Vec<T>, item: T) {
    if list.capacity() == 0 {
        list.reserve(BURST);
    }
    list.push(item);
}

#[derive(Default)]
pub(super) struct Streams {
    /// Handlers still working out a response (a pool's answer, basic auth).
    responding: Vec<(StreamId, Responding)>,
    /// Response bodies with more to send, and the stream's queue when its stall clock
    /// last (re)started.
    sending: Vec<(StreamId, RecordedBody, usize)>,
    /// Ended bodies' holds, kept while their last bytes wait in the stream's queue or its
    /// file source: each stream keeps its own stall clock until the peer has taken all of it.
    draining: Vec<(StreamId, Busy, usize)>,
    /// Request bodies still arriving or not yet given back to the windows.
    inbound: Vec<(StreamId, Arc<Inbound>)>,
    /// `Connection::data_sent` when the connection last made `PROGRESS`.
    data_sent: u64,
}

impl Streams {
    /// Gives back the lists' memory once every one is empty: an idle connection holds
    /// none (the body list of its last request kept about 300 bytes).
    pub fn shrink_if_idle(&mut self) {
        let idle = self.responding.is_empty()
            && self.sending.is_empty()
            && self.draining.is_empty()
            && self.inbound.is_empty();
        if idle {
            self.responding = Vec::new();
            self.sending = Vec::new();
            self.draining = Vec::new();
            self.inbound = Vec::new();
        }
    }

    /// Acts on one event of the connection.
    pub fn event(&mut self, ev: Event, conn: &mut Connection, ctx: &Arc<Ctx>, cx: &Context<'_>) {
        match ev {
            Event::Request {
                stream,
                head,
                end_stream,
            } => {
                // Reset in the same read, or the connection failed after it: no file is
                // looked up, no backend asked, and no answer logged as sent.
                if conn.buffered(stream).is_none() {
                    return;
                }
                // A request for another scheme is answered 400 at once (`route_now`), body
                // or not: a body's stream is then reset with NO_ERROR (§8.1).
                let other_scheme = head.scheme().is_some_and(|s| {
                    !s.eq_ignore_ascii_case("http") && !s.eq_ignore_ascii_case("https")
                });
                if end_stream || other_scheme {
                    self.request_without_body(stream, head, conn, ctx);
                    return;
                }
                let Some(head) = into_parts(head, stream, conn) else {
                    return;
                };
                let inbound = Arc::new(Inbound::default());
                self.inbound.push((stream, inbound.clone()));
                let length = head
                    .headers
                    .get(http::header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok()?.parse().ok());
                let body = RequestBody::new(inbound, length);
                let busy = ctx.activity.begin();
                let req = Request::from_parts(head, body);
                self.responding
                    .push((stream, Box::pin(respond(req, ctx.clone(), busy, None))));
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => {
                let n = data.len();
                let taken = self
                    .inbound(stream)
                    .is_some_and(|i| i.push(data, end_stream, cx.waker()));
                if !taken {
                    conn.release_capacity(stream, n);
                }
            }
            Event::Trailers { stream, headers } => {
                if let Some(i) = self.inbound(stream) {
                    i.trailers(headers);
                }
            }
            Event::Reset { stream, reason, .. } => self.reset(stream, reason, conn),
            // The peer starts no more streams: the connection closes once these finish.
            Event::GoAway { .. } => conn.go_away(Reason::NO_ERROR),
            Event::SettingsAcked | Event::PingAck { .. } => {}
        }
    }

    /// A request with no body is routed at once: what the configuration answers in place
    /// is queued now (`reply.rs`); a pool or basic auth's check gets a handler, which
    /// takes the routing as it is (a rate limit counts the request once).
    fn request_without_body(
        &mut self,
        stream: StreamId,
        head: Head,
        conn: &mut Connection,
        ctx: &Arc<Ctx>,
    ) {
        let busy = ctx.activity.begin();
        let routing = route_now(&head, &ctx.origin, &ctx.shared);
        let routing = match routing.routed {
            Routed::Reply { reply, vhost } => {
                let room = MAX_QUEUED.saturating_sub(conn.queued_data());
                let started = routing.started;
                match reply::send(conn, stream, head, reply, vhost, started, ctx, busy, room) {
                    Queued::Finished => {}
                    Queued::Draining(busy) => {
                        let n = conn.buffered(stream).unwrap_or(0);
                        push_burst(&mut self.draining, (stream, busy, n));
                    }
                    Queued::Sending(body) => push_burst(&mut self.sending, (stream, body, 0)),
                }
                return;
            }
            routed => Routing { routed, ..routing },
        };
        let Some(head) = into_parts(head, stream, conn) else {
            return;
        };
        let req = Request::from_parts(head, RequestBody::empty());
        self.responding.push((
            stream,
            Box::pin(respond(req, ctx.clone(), busy, Some(routing))),
        ));
    }

    fn inbound(&self, stream: StreamId) -> Option<&Arc<Inbound>> {
        self.inbound
            .iter()
            .find(|(id, _)| *id == stream)
            .map(|(_, i)| i)
    }

    /// The stream is gone: its handler and body are dropped (a pool request in flight is
    /// abandoned with them), its request body's reader gets an error.
    fn reset(&mut self, stream: StreamId, reason: Reason, conn: &mut Connection) {
        self.responding.retain(|(id, _)| *id != stream);
        self.sending.retain(|(id, ..)| *id != stream);
        self.draining.retain(|(id, ..)| *id != stream);
        if let Some(k) = self.inbound.iter().position(|(id, _)| *id == stream) {
            let (_, i) = self.inbound.swap_remove(k);
            let unread = i.reset(reason);
            conn.release_capacity(stream, unread);
        }
    }

    /// Polls the handlers; a finished one's HEADERS are queued and its body joins
    /// `sending`. Returns whether any finished.
    pub fn poll_responses(&mut self, conn: &mut Connection, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        let mut k = 0;
        while k < self.responding.len() {
            let (id, fut) = &mut self.responding[k];
            let Poll::Ready(resp) = fut.as_mut().poll(cx) else {
                k += 1;
                continue;
            };
            let id = *id;
            drop(self.responding.swap_remove(k));
            progress = true;
            let (parts, body) = resp.into_parts();
            // Connection-specific fields (connection, keep-alive, transfer-encoding,
            // upgrade) are dropped by the encoder (RFC 9113 §8.2.2).
            let end = body.is_end_stream();
            if conn
                .send_response(id, parts.status, &parts.headers, end)
                .is_ok()
                && !end
            {
                push_burst(&mut self.sending, (id, body, 0));
            }
        }
        progress
    }

    /// Feeds response bodies to the connection: a stream's body is polled again only
    /// once its queue is empty, so each poll means the peer took a whole chunk (a byte of
    /// window at a time keeps no stream alive), and none while the connection has
    /// `MAX_QUEUED` bytes queued (zero windows on every stream hold no more than that).
    /// Returns whether any frame was taken.
    pub fn poll_bodies(&mut self, conn: &mut Connection, cx: &mut Context<'_>) -> bool {
        // A queue that waits with its own window open waits for its turn behind other
        // streams (RFC 9218 order) or for the connection's window (the driver's clock):
        // while the connection's data moves, that is not this stream's stall.
        let moved = connection_progressed(conn.data_sent(), &mut self.data_sent);
        self.draining
            .retain_mut(|(id, busy, mark)| match conn.buffered(*id) {
                Some(n) if n > 0 => {
                    if progressed(n, mark) || (moved && conn.stream_window_open(*id)) {
                        busy.progressed();
                    }
                    true
                }
                _ => false,
            });
        let mut queued = conn.queued_data();
        let mut progress = false;
        let mut k = 0;
        // Each body is looked at once; one that got data goes to the back of the line, so
        // streams take turns under the connection's cap.
        for _ in 0..self.sending.len() {
            let (id, body, mark) = &mut self.sending[k];
            let mut fed = false;
            let done = loop {
                match conn.buffered(*id) {
                    None => break true,
                    Some(0) if queued < MAX_QUEUED => {}
                    Some(0) => {
                        // Its peer took it all: the wait for room is not its stall.
                        body.taken();
                        break false;
                    }
                    Some(n) => {
                        if progressed(n, mark) || (moved && conn.stream_window_open(*id)) {
                            body.progressed();
                        }
                        break false;
                    }
                }
                match Pin::new(&mut *body).poll_frame(cx) {
                    Poll::Pending => break false,
                    Poll::Ready(Some(Ok(frame))) => {
                        progress = true;
                        // Trailers are not sent (no pool answers with them over HTTP/2
                        // today); the body's end ends the stream.
                        if let Ok(data) = frame.into_data() {
                            let end = body.is_end_stream();
                            queued += data.len();
                            fed |= !data.is_empty();
                            if conn.send_data(*id, data, end).is_err() || end {
                                break true;
                            }
                            // The frame restarted its clock (`RecordedBody::poll_frame`).
                            *mark = conn.buffered(*id).unwrap_or(0);
                        }
                    }
                    Poll::Ready(None) => {
                        progress = true;
                        let _ = conn.send_data(*id, Bytes::new(), true);
                        break true;
                    }
                    Poll::Ready(Some(Err(e))) => {
                        progress = true;
                        tracing::debug!(stream = *id, error = %e, "response body failed");
                        conn.reset(*id, Reason::INTERNAL_ERROR);
                        break true;
                    }
                }
            };
            if done {
                let (id, mut body, _) = self.sending.remove(k);
                // The body (its file) goes; its stall clock stays while bytes wait.
                if let Some(n) = conn.buffered(id).filter(|&n| n > 0) {
                    if let Some(mut busy) = body.take_busy() {
                        busy.handed();
                        push_burst(&mut self.draining, (id, busy, n));
                    }
                }
            } else if fed {
                let e = self.sending.remove(k);
                self.sending.push(e);
            } else {
                k += 1;
            }
        }
        progress
    }

    /// Gives the request body bytes read since the last call back to the windows, and
    /// forgets bodies that need nothing more; a body whose stream closed under it (the
    /// response ended first) fails its reader instead of waiting for bytes that never come.
    pub fn release(&mut self, conn: &mut Connection) {
        self.inbound.retain(|(id, i)| {
            let (n, done) = i.take_consumed();
            if n > 0 {
                conn.release_capacity(*id, n);
            }
            if !done && conn.buffered(*id).is_none() {
                let unread = i.reset(Reason::CANCEL);
                conn.release_capacity(*id, unread);
                return false;
            }
            !done
        });
    }
}

/// A head for a handler, as `http` types. The connection checked it as they would, so
/// this never fails; if it did, the stream would be reset rather than answered.
fn into_parts(head: Head, stream: StreamId, conn: &mut Connection) -> Option<http::request::Parts> {
    match head.into_parts() {
        Ok(parts) => Some(parts),
        Err(why) => {
            tracing::debug!(stream, why, "HTTP/2 request head not convertible");
            conn.reset(stream, Reason::PROTOCOL_ERROR);
            None
        }
    }
}

/// Whether `PROGRESS` bytes of a stream's queue (now `left`) went since `mark`; if so
/// the mark moves to here.
fn progressed(left: usize, mark: &mut usize) -> bool {
    let went = left + PROGRESS <= *mark;
    if went {
        *mark = left;
    }
    went
}

/// One request's handler, with the connection's activity held until its body is dropped.
async fn respond(
    req: Request<RequestBody>,
    ctx: Arc<Ctx>,
    busy: Busy,
    routing: Option<Routing>,
) -> Response<RecordedBody> {
    let mut resp = handle_routed(req, &ctx.origin, &ctx.shared, routing).await;
    resp.body_mut().hold(busy);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::activity::Activity;

    #[test]
    fn an_idle_connection_gives_its_lists_back_and_a_busy_one_keeps_them() {
        let activity = Activity::new();
        let mut s = Streams::default();
        s.draining.push((1, activity.begin(), 0));
        s.sending.reserve(4);
        s.shrink_if_idle();
        assert_eq!(s.draining.len(), 1, "a stream still draining was dropped");
        assert!(
            s.sending.capacity() >= 4,
            "lists shrank while a stream was open"
        );
        s.draining.clear();
        s.shrink_if_idle();
        assert_eq!(s.sending.capacity() + s.draining.capacity(), 0);
    }
}
