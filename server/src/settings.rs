//! What the serving machinery needs that only a restart can change: listeners, threads,
//! cache sizing, limits and send-path tuning. Everything per virtual server lives in the
//! reloadable `App`.

use crate::access_log::LogFormat;
use crate::cache::CacheSettings;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// Request head (request line plus headers) bytes; past this: 431.
    pub max_header_bytes: usize,
    /// Request-line bytes; past this: 414.
    pub max_request_line: usize,
    /// Time allowed to receive a complete request head once it has begun (slowloris).
    pub header_timeout: Duration,
    /// Time an idle keep-alive connection is kept open.
    pub keepalive_timeout: Duration,
    pub max_connections: usize,
    /// Longest silence within a request body, and the window `body_min_rate` is held over.
    pub body_timeout: Duration,
    /// Bytes per second each `body_timeout` window of a request body must bring.
    pub body_min_rate: u64,
    /// Longest a client may take no response bytes before it is disconnected.
    pub send_timeout: Duration,
}

/// The TLS listener's restart-only settings (its certificates reload with the config).
#[derive(Debug, Clone)]
pub struct TlsSettings {
    pub listen: SocketAddr,
    /// Accept TLS 1.3 only.
    pub tls13_only: bool,
    /// Try to move sessions into the kernel (kTLS) after the handshake.
    pub ktls: bool,
    pub handshake_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct Settings {
    /// Plain HTTP; `None` serves HTTPS only.
    pub listen: Option<SocketAddr>,
    pub tls: Option<TlsSettings>,
    pub admin_listen: Option<SocketAddr>,
    pub threads: usize,
    pub cache: CacheSettings,
    pub limits: ConnLimits,
    pub access_log: LogFormat,
    pub access_log_destination: crate::access_log::Destination,
    /// Bodies of at least this many bytes go out with sendfile(2) on plaintext HTTP/1.1;
    /// smaller ones from memory or with pread(2)+write. Chosen by measurement (BENCHMARKS.md).
    pub sendfile_min_bytes: u64,
    /// Bodies at least this large go back to pread+write (0: never). On loopback the
    /// receiver drains 4 KiB page-cache fragments from sendfile more slowly than the 32 KiB
    /// fragments write() builds, so huge bodies move faster with pread (BENCHMARKS.md).
    pub sendfile_max_bytes: u64,
    /// Largest single sendfile(2) call. A connection sends one per turn, then lets the
    /// worker's other connections go: fair, and cheaper for the kernel (BENCHMARKS.md).
    pub sendfile_chunk_bytes: usize,
    /// SO_SNDBUF for client sockets; 0 leaves the kernel's autotuning alone.
    pub send_buffer_bytes: usize,
    /// Set TCP_CORK while a file body streams.
    pub tcp_cork: bool,
    /// Buffer size for the pread path.
    pub read_chunk_bytes: usize,
    /// After SIGTERM, /readyz fails at once; listening stops after this delay.
    pub shutdown_delay: Duration,
    /// In-flight responses get this long to finish before the process exits anyway.
    pub shutdown_grace: Duration,
    /// The serving threads' CPU scheduling policy (server/scheduling.rs says why batch).
    pub cpu_scheduling: CpuScheduling,
    /// Which implementation serves HTTP/2 connections.
    pub h2_engine: H2Engine,
}

/// The HTTP/2 implementation, chosen with `--h2-engine` (`SKIFF_H2_ENGINE`): Skiff's own
/// driver (conn/h2) or hyper's, kept so the two can be compared on the same build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum H2Engine {
    /// skiff-http's HTTP/2 state machine, driven by one task per connection.
    #[default]
    Skiff,
    /// hyper's (the h2 crate), a task per stream.
    Hyper,
}

/// The CPU scheduling policy for serving threads (applied by `listener::scheduling`), chosen with `--cpu-scheduling` (`SKIFF_CPU_SCHEDULING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum CpuScheduling {
    /// SCHED_BATCH: no wake-up preemption; events are handled in batches under contention.
    #[default]
    Batch,
    /// SCHED_OTHER, the kernel's default: every wake-up may preempt the running task.
    Normal,
}
