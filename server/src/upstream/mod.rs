//! Backend pools: FastCGI, uwsgi, SCGI and HTTP. By stage: `route` says where a rule
//! sends requests and `request` is a request bound there; `serve` gathers its body
//! (`client_body`, under a deadline; a CGI upload whole, in a file: `body_spill`), admits it and
//! dispatches to the CGI exchanges (`cgi`) or the HTTP proxy (`proxy`, with `upgrade`);
//! `failover` orders the endpoints to try; `pool` is the endpoint policy (no I/O),
//! `connection` and `dns` do the I/O; `gather`, `body` and `response` shape what comes
//! back. The wire codecs live in the `skiff-codec` crate.

mod body;
mod body_spill;
mod cgi;
mod client_body;
mod connection;
pub mod dns;
mod edits;
mod failover;
mod failure;
mod gather;
mod kept;
pub mod pool;
mod proxy;
mod request;
mod response;
mod route;
mod serve;
mod upgrade;
mod upload;

pub use cgi::bodiless_cgi_env;
pub use client_body::{BodyDeadline, ClientBodyError};
pub use edits::ResponseEdits;
pub use request::{BackendRequest, ClientBody, Message};
pub use response::{Payload, ResponseHead, UpstreamResponse};
pub use route::{
    Backend, BackendRoute, Forwarded, Forwarding, HeaderEdit, RequestHeaderRule, Rewrite,
};
pub use serve::serve;
pub use skiff_codec::cgi_env;
pub use upgrade::TunnelHold;

/// Request body bytes buffered in files for CGI backends now (`body_spill`).
pub fn buffered_body_bytes() -> u64 {
    body_spill::FILES.held()
}
