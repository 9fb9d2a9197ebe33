//! Typed errors of starting and reloading: what went wrong, with the message an operator
//! reads on stderr or in the reload log line.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Why a configuration cannot be served (at start, by `skiff check`, or on reload, when
/// the old one keeps serving).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    /// Not valid YAML for the model; the message has line:column positions.
    #[error("{}:\n{message}", path.display())]
    Parse { path: PathBuf, message: String },
    /// Parsed, but refused by the validator or while compiling (a regex, a htpasswd
    /// file, a name server...); the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// As `Invalid`, for the file at `path`.
    #[error("{}: {message}", path.display())]
    InvalidFile { path: PathBuf, message: String },
    /// A command-line flag that does not make a valid configuration.
    #[error("{0}")]
    Flag(String),
}

/// Why `skiff serve` or `skiff run` could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot read the working directory: {0}")]
    WorkingDir(io::Error),
    #[error("cannot start the control runtime: {0}")]
    Runtime(io::Error),
    #[error("cannot listen on admin address {addr}: {source}")]
    AdminListen { addr: SocketAddr, source: io::Error },
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: io::Error },
}
