//! A request bound for a backend: where it goes, who sent it, and its message, the one
//! type every connection path hands to `upstream::serve`.

pub use super::client_body::ClientBody;
use super::route::BackendRoute;
use http::Request;
use skiff_codec::cgi_env::Env;
use std::net::SocketAddr;

/// A request bound for a backend.
pub struct BackendRequest<'a> {
    pub route: &'a BackendRoute,
    /// The client's address (REMOTE_ADDR, X-Forwarded-For, IP-hash balancing).
    pub client: SocketAddr,
    /// The listener's port (SERVER_PORT).
    pub local_port: u16,
    pub message: Message<'a>,
}

/// A request for a pool.
// Passed by value once per request and never stored: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum Message<'a> {
    /// In the `http` types: the parts and the body (from hyper, or for an HTTP pool).
    Http(Request<ClientBody>),
    /// A request without a body to a FastCGI, uwsgi or SCGI pool, whose environment the
    /// HTTP/1.1 fast path built from its parser's view (`bodiless_cgi_env`).
    Cgi(&'a Env),
}
