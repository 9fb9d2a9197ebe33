//! The connection a request arrived on: the peer, the listener's port, and for HTTPS
//! the TLS session (which certificate it was given).

use crate::http::request::RequestHead;
use crate::state::Shared;
use std::net::SocketAddr;
use std::sync::Arc;

/// The connection requests arrive on.
#[derive(Debug, Clone)]
pub(super) struct Origin {
    pub peer: SocketAddr,
    pub local_port: u16,
    /// Set on TLS connections.
    pub tls: Option<TlsSession>,
}

/// What a request needs to know of its TLS connection.
#[derive(Debug, Clone)]
pub(super) struct TlsSession {
    /// The certificate slot the handshake's SNI chose (`None`: no certificate matched).
    pub slot: Option<Arc<str>>,
}

impl TlsSession {
    /// Marks a request as HTTPS, and as misdirected when its Host belongs to another
    /// certificate than the connection's (a browser reusing the connection for a name
    /// the certificate does not cover would otherwise be served another site's content).
    pub fn mark(&self, head: &mut RequestHead<'_>, shared: &Shared) {
        head.secure = true;
        if let Some(tls) = &shared.tls {
            head.misdirected = tls.misdirected(self.slot.as_deref(), head.host);
        }
    }
}
