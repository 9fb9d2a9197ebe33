//! Sockets and threads. Each worker thread runs its own current-thread tokio runtime with
//! its own SO_REUSEPORT listener, as nginx workers do: no work stealing, no cross-thread
//! wakeups on the hot path, and `--threads 1` really serves on one thread. The control
//! thread (main) runs the admin listener and signal handling.

mod body;
mod fast_h1;
mod hyper_conn;
mod rewind;
pub mod scheduling;
pub mod shutdown;
mod worker;

pub use scheduling::CpuScheduling;
pub use shutdown::{Phase, ShutdownControl};
pub use worker::{bind_listener, run, Shared};
