//! Why a backend exchange failed: the reason label, and the status the client gets.

use super::client_body::ClientBodyError;
use http::StatusCode;
use std::io;

#[derive(Debug, thiserror::Error)]
pub(super) enum Failure {
    #[error("connect: {0}")]
    Connect(io::Error),
    #[error("timed out")]
    Timeout,
    #[error("{0}")]
    Protocol(String),
    #[error("i/o: {0}")]
    Io(io::Error),
    /// A kept connection turned out closed before answering.
    #[error("kept connection was closed")]
    Stale,
    /// The script a PHP-style path names does not exist (404, the backend is not asked).
    #[error("no script {0}")]
    NoScript(String),
    /// The client, not the backend: its body stalled, grew too large or broke off.
    #[error("{0}")]
    Client(ClientBodyError),
}

impl Failure {
    pub(super) fn reason(&self) -> &'static str {
        match self {
            Failure::Connect(_) => "connect",
            Failure::Timeout => "timeout",
            Failure::Protocol(_) => "protocol",
            Failure::Io(_) => "io",
            Failure::Stale => "stale",
            Failure::NoScript(_) => "no_script",
            Failure::Client(ClientBodyError::Timeout) => "client_timeout",
            Failure::Client(ClientBodyError::TooLarge(_)) => "body_too_large",
            Failure::Client(ClientBodyError::Io(_)) => "client_body",
            Failure::Client(ClientBodyError::Buffer(_)) => "body_buffer",
            Failure::Client(ClientBodyError::BufferFull) => "body_memory",
        }
    }

    /// The status the client gets.
    pub(super) fn status(&self) -> StatusCode {
        match self {
            Failure::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Failure::NoScript(_) => StatusCode::NOT_FOUND,
            Failure::Client(ClientBodyError::TooLarge(_)) => StatusCode::PAYLOAD_TOO_LARGE,
            Failure::Client(ClientBodyError::Timeout) => StatusCode::REQUEST_TIMEOUT,
            Failure::Client(ClientBodyError::Io(_)) => StatusCode::BAD_REQUEST,
            // The server's own disk (full, or failing), not the client.
            Failure::Client(ClientBodyError::Buffer(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            // Too many bodies gathered in memory at once: try again later.
            Failure::Client(ClientBodyError::BufferFull) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_GATEWAY,
        }
    }

    /// A failure found by hyper's client while it sent the request body: the client's
    /// body error, if that is what it was, is in the error's sources.
    pub(super) fn of_proxy_error(e: &(dyn std::error::Error + 'static)) -> Failure {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = source {
            // The body went to hyper's client as an io::Error wrapping ours.
            let inner = err
                .downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|i| i.downcast_ref::<ClientBodyError>());
            if let Some(c) = err.downcast_ref::<ClientBodyError>().or(inner) {
                return Failure::Client(c.clone());
            }
            source = err.source();
        }
        Failure::Protocol(e.to_string())
    }
}

pub(super) fn io_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::TimedOut {
        Failure::Timeout
    } else {
        Failure::Io(e)
    }
}

pub(super) async fn within<T>(
    d: std::time::Duration,
    f: impl std::future::Future<Output = io::Result<T>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(d, f).await {
        Ok(r) => r.map_err(io_failure),
        Err(_) => Err(Failure::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::UPSTREAM_FAILURE_REASONS;

    /// The reasons a pool's counters start at 0 with cover every failure.
    #[test]
    fn every_failure_reason_is_one_the_metrics_start_at_zero() {
        let failures = [
            Failure::Connect(io::Error::other("refused")),
            Failure::Timeout,
            Failure::Protocol("bad".into()),
            Failure::Io(io::Error::other("reset")),
            Failure::Stale,
            Failure::NoScript("/x.php".into()),
            Failure::Client(ClientBodyError::Timeout),
            Failure::Client(ClientBodyError::TooLarge(1)),
            Failure::Client(ClientBodyError::Io("gone".into())),
            Failure::Client(ClientBodyError::Buffer("full".into())),
            Failure::Client(ClientBodyError::BufferFull),
        ];
        for f in &failures {
            assert!(
                UPSTREAM_FAILURE_REASONS.contains(&f.reason()),
                "{} is not in UPSTREAM_FAILURE_REASONS",
                f.reason()
            );
        }
    }
}
