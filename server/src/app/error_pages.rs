//! A virtual server's own pages for error statuses (nginx's `error_page`).

use super::{App, VirtualHost};
use crate::http::reply::{Body, Reply};
use crate::http::request::RequestHead;
use http::{HeaderValue, Method, StatusCode};

impl App {
    /// Replaces an error's body with the virtual server's page for that status, if any.
    // Inline, with the page lookup apart: most replies pass through untouched, and a call
    // would move the whole reply in and out.
    #[inline]
    pub(super) fn error_page(
        &self,
        vh: &VirtualHost,
        req: &RequestHead<'_>,
        reply: Reply,
    ) -> Reply {
        if reply.status.as_u16() < 400 || vh.error_pages.is_empty() {
            return reply;
        }
        self.custom_error_page(vh, req, reply)
    }

    /// `error_page` for an error status on a virtual server with error pages.
    #[inline(never)]
    fn custom_error_page(&self, vh: &VirtualHost, req: &RequestHead<'_>, reply: Reply) -> Reply {
        let Some(page) = vh.error_pages.get(&reply.status.as_u16()) else {
            return reply;
        };
        let page_req = RequestHead {
            method: Method::GET,
            target: page,
            path: page,
            peer: req.peer,
            ..Default::default()
        };
        let found = vh.statics.respond(&page_req);
        if found.status != StatusCode::OK {
            return reply;
        }
        let ctype = found
            .header_fields()
            .find(|(n, _)| n == http::header::CONTENT_TYPE)
            .map(|(_, v)| v.clone())
            .unwrap_or(HeaderValue::from_static("text/html; charset=utf-8"));
        let body = match found.body {
            Body::Bytes(b) | Body::Mirrored(b, _) => Body::Bytes(b),
            other => other,
        };
        let mut out = Reply::new(reply.status);
        out.headers = reply
            .headers
            .into_iter()
            .filter(|(n, _)| n != http::header::CONTENT_TYPE)
            .collect();
        out.headers.push((http::header::CONTENT_TYPE, ctype));
        out.body = body;
        out
    }
}
