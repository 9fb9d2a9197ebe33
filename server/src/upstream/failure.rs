//! Why a backend exchange failed: the reason label, and the status the client gets.

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
    #[error("request body over {0} bytes")]
    TooLarge(u64),
    /// A kept connection turned out closed before answering.
    #[error("kept connection was closed")]
    Stale,
}

impl Failure {
    pub(super) fn reason(&self) -> &'static str {
        match self {
            Failure::Connect(_) => "connect",
            Failure::Timeout => "timeout",
            Failure::Protocol(_) => "protocol",
            Failure::Io(_) => "io",
            Failure::TooLarge(_) => "body_too_large",
            Failure::Stale => "stale",
        }
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
