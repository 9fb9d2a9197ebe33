//! Skiff: a featherweight static edge server on hyper and tokio.
//!
//! Layout: `http` holds protocol pieces with no I/O (request view, reply, conditionals,
//! ranges, negotiation); `fs` maps paths and opens files safely; `cache` is the I/O cache;
//! `static_files` is the file handler; `server` owns sockets (the HTTP/1.1 fast path with
//! sendfile, the hyper path for everything else, workers, shutdown); `admin` serves health
//! and metrics.

pub mod access_log;
pub mod admin;
pub mod app;
pub mod cache;
pub mod cli;
pub mod copy_tree;
pub mod fs;
pub mod http;
pub mod metrics;
pub mod reload;
pub mod server;
pub mod settings;
pub mod shaping;
pub mod static_files;
pub mod upstream;
