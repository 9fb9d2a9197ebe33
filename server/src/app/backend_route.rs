//! A request a rule routes to a backend: the route the upstream layer serves it by, with
//! what an HTTP backend is told of the client rendered here, where the trusted proxies
//! and the rule's regex captures are known.

use super::modifiers::client_ip;
use super::rules::{render, Rule};
use crate::http::request::RequestHead;
use crate::upstream::{Backend, BackendRoute, Forwarded, Forwarding, HeaderEdit};
use http::HeaderValue;
use ipnet::IpNet;
use std::sync::Arc;

/// What the virtual server adds to every route.
pub(super) struct Site<'a> {
    pub root: &'a str,
    pub hsts: Option<&'a HeaderValue>,
    pub trusted_proxies: &'a [IpNet],
    pub use_forwarded_headers: bool,
}

/// The route for `req`, or `Err` when a rendered request header would not be a header
/// value (a regex capture of a path that held a control character): 400.
pub(super) fn backend_route(
    backend: Arc<Backend>,
    site: &Site<'_>,
    rule: &Rule,
    req: &RequestHead<'_>,
    path: &str,
    caps: Option<&regex::Captures<'_>>,
) -> Result<BackendRoute, ()> {
    let forwarded = match &backend.forwarding {
        Forwarding::Http {
            request_headers, ..
        } => {
            let client = client_ip(req, site.trusted_proxies);
            let edits = match request_headers {
                Some(h) => {
                    let value = |t| {
                        // Bytes: a capture of a path may hold UTF-8, which goes out as sent.
                        HeaderValue::from_bytes(render(t, req, path, caps, client).as_bytes())
                            .map_err(|_| {
                                tracing::debug!(
                                    path,
                                    "a request header for the backend would not be a header value"
                                );
                            })
                    };
                    let mut edits = Vec::with_capacity(h.remove.len() + h.set.len() + h.add.len());
                    edits.extend(h.remove.iter().cloned().map(HeaderEdit::Remove));
                    for (name, t) in &h.set {
                        edits.push(HeaderEdit::Set(name.clone(), value(t)?));
                    }
                    for (name, t) in &h.add {
                        edits.push(HeaderEdit::Add(name.clone(), value(t)?));
                    }
                    edits
                }
                None => Vec::new(),
            };
            Forwarded {
                client_ip: client,
                believe_peer: site.use_forwarded_headers
                    && req
                        .peer
                        .is_some_and(|p| site.trusted_proxies.iter().any(|n| n.contains(&p))),
                edits,
            }
        }
        Forwarding::Cgi { .. } => Forwarded::default(),
    };
    Ok(BackendRoute {
        backend,
        path: path.to_owned(),
        root: site.root.to_owned(),
        secure: req.secure,
        hsts: site.hsts.filter(|_| req.secure).cloned(),
        edits: rule.backend_edits.clone(),
        authorized: req.headers.get("authorization").is_some(),
        cors: rule.cors.as_ref().map(|c| {
            let mut fields = Vec::new();
            c.decorate_fields(req, &mut fields);
            fields
        }),
        forwarded,
    })
}
