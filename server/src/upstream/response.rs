//! What a pool answered, for either connection path: the status, the header fields
//! (hop-by-hop ones removed), and a body that is whole or still arriving.

use super::body::ChannelBody;
use crate::http::BoxedBody;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::BodyExt;
use skiff_codec::response_head::Fields;
use std::io;
use tokio::sync::mpsc;

pub fn error_response(status: StatusCode) -> UpstreamResponse {
    let reply = crate::http::reply::Reply::error(status);
    let body = match reply.body {
        crate::http::reply::Body::Bytes(b) => b,
        _ => Bytes::new(),
    };
    let mut fields = Fields::default();
    fields.push(b"Content-Type", b"text/html; charset=utf-8");
    UpstreamResponse {
        status,
        head: ResponseHead::Fields(fields),
        payload: Payload::Whole(body),
    }
}

/// What a pool answered, for either connection layer: the HTTP/1.1 fast path writes a
/// CGI backend's fields as they came; hyper takes [`UpstreamResponse::into_hyper`].
pub struct UpstreamResponse {
    pub status: StatusCode,
    pub head: ResponseHead,
    pub payload: Payload,
}

impl UpstreamResponse {
    /// The length of a body that is all in hand.
    pub fn whole_len(&self) -> Option<u64> {
        match &self.payload {
            Payload::Whole(b) => Some(b.len() as u64),
            Payload::Stream(_) => None,
        }
    }

    /// The body length the backend declared (what a HEAD response says).
    pub fn declared_len(&self) -> Option<u64> {
        match &self.head {
            ResponseHead::Fields(f) => f.content_length(),
            ResponseHead::Map(m) => m
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok()),
        }
    }

    /// As hyper's response, for `head_only` (a HEAD request) or not. A HEAD answer, a 1xx,
    /// 204 or 304 carries no body whatever the backend wrote (RFC 9110 §6.4.1; over HTTP/2
    /// DATA after it makes the response malformed). A HEAD answer of another status keeps
    /// the length the backend declared for GET, as the HTTP/1.1 fast path does; a 1xx or
    /// 204 has none (§8.6), nor has a 304 here, as on the fast path.
    pub fn into_hyper(self, head_only: bool) -> Response<BoxedBody> {
        let status = self.status;
        let bodiless = head_only
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED;
        let declared = self.declared_len();
        let mut headers = match self.head {
            ResponseHead::Fields(f) => f.into_header_map(),
            ResponseHead::Map(m) => m,
        };
        let body = match self.payload {
            _ if bodiless => {
                headers.remove(http::header::CONTENT_LENGTH);
                let keeps_length = head_only
                    && !status.is_informational()
                    && status != StatusCode::NO_CONTENT
                    && status != StatusCode::NOT_MODIFIED;
                if let (true, Some(n)) = (keeps_length, declared) {
                    headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(n));
                }
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed()
            }
            Payload::Whole(b) => {
                headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from(b.len()));
                http_body_util::Full::new(b)
                    .map_err(|never| match never {})
                    .boxed()
            }
            Payload::Stream(b) => b,
        };
        let mut resp = Response::new(body);
        *resp.status_mut() = self.status;
        *resp.headers_mut() = headers;
        resp
    }

    pub(super) fn from_hyper(resp: Response<BoxedBody>) -> UpstreamResponse {
        let (parts, body) = resp.into_parts();
        UpstreamResponse {
            status: parts.status,
            head: ResponseHead::Map(parts.headers),
            payload: Payload::Stream(body),
        }
    }
}

/// The response header fields, hop-by-hop ones already removed.
pub enum ResponseHead {
    /// From a FastCGI, uwsgi or SCGI backend, in wire form.
    Fields(Fields),
    /// From an HTTP backend (hyper's client).
    Map(HeaderMap),
}

impl ResponseHead {
    /// Whether the backend sent `name`.
    pub fn has(&self, name: &http::HeaderName) -> bool {
        match self {
            ResponseHead::Map(m) => m.contains_key(name),
            ResponseHead::Fields(f) => f.get(name.as_str()).is_some(),
        }
    }

    /// Drops every `name` field.
    pub fn remove(&mut self, name: &http::HeaderName) {
        match self {
            ResponseHead::Map(m) => {
                m.remove(name);
            }
            // A copy of the head only when the field is there.
            ResponseHead::Fields(f) if f.get(name.as_str()).is_some() => f.remove(name.as_str()),
            ResponseHead::Fields(_) => {}
        }
    }

    /// Adds a `name` field after any already there.
    pub fn append(&mut self, name: &http::HeaderName, value: &http::HeaderValue) {
        match self {
            ResponseHead::Map(m) => {
                m.append(name.clone(), value.clone());
            }
            ResponseHead::Fields(f) => f.push(name.as_str().as_bytes(), value.as_bytes()),
        }
    }

    /// Adds a field the backend did not send itself.
    pub fn set_if_absent(&mut self, name: http::HeaderName, value: &http::HeaderValue) {
        match self {
            ResponseHead::Map(m) => {
                m.entry(name).or_insert_with(|| value.clone());
            }
            ResponseHead::Fields(f) => {
                if !f
                    .iter()
                    .any(|(n, _)| n.eq_ignore_ascii_case(name.as_str().as_bytes()))
                {
                    f.push(name.as_str().as_bytes(), value.as_bytes());
                }
            }
        }
    }
}

pub enum Payload {
    /// The whole body, in hand: sent with a Content-Length.
    Whole(Bytes),
    /// A body still arriving from the backend.
    Stream(BoxedBody),
}

/// A response whose body is complete in memory: sent with a Content-Length in one write.
pub(super) fn whole(status: StatusCode, fields: Fields, body: Bytes) -> UpstreamResponse {
    UpstreamResponse {
        status,
        head: ResponseHead::Fields(fields),
        payload: Payload::Whole(body),
    }
}

/// A response whose body the reader task feeds through `rx`.
pub(super) fn streamed(
    status: StatusCode,
    fields: Fields,
    rx: mpsc::Receiver<io::Result<Bytes>>,
) -> UpstreamResponse {
    UpstreamResponse {
        status,
        head: ResponseHead::Fields(fields),
        payload: Payload::Stream(ChannelBody { rx }.boxed()),
    }
}
