//! Sockets and threads. Each worker thread runs its own current-thread tokio runtime with
//! its own SO_REUSEPORT listener, as nginx workers do: no work stealing, no cross-thread
//! wakeups on the hot path, and `--threads 1` really serves on one thread. Accepted
//! connections go to the connection layer (`conn`); nothing below imports this module.

mod scheduling;
mod worker;

pub use worker::run;
