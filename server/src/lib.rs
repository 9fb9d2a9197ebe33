//! Skiff: a featherweight static edge server on hyper and tokio.
//!
//! Layers, each using only those below it (ARCHITECTURE.md; `scripts/check-module-cycles.py`
//! checks that no module cycle creeps in):
//! - process: `cli` (flags, commands), `lifecycle` (start, signals, drain), `reload`,
//!   `admin`;
//! - `listener` (threads, sockets, accept) and `conn` (the HTTP/1.1 fast path, hyper);
//! - `exchange`: what every connection path shares per request, and the record that
//!   becomes the access log and the metrics;
//! - `app`: one compiled configuration generation (virtual servers, rules, modifiers);
//! - handlers: `static_files` (with `cache` and `fs`) and `upstream` (backend pools);
//! - below them `http`, `shaping`, `metrics`, `access_log`, `state`, `settings`,
//!   `shutdown`, and the I/O-free crates `skiff-http` and `skiff-codec`.

mod access_log;
mod admin;
mod allocator;
mod app;
mod cache;
pub mod cli;
mod coarse_clock;
mod conn;
mod copy_tree;
pub mod copy_tuning;
mod error;
mod exchange;
mod fs;
mod http;
mod idle_reclaim;
mod lifecycle;
mod listener;
mod metrics;
mod reload;
mod settings;
mod shaping;
mod shutdown;
mod startup_pages;
mod state;
mod static_files;
mod tls;
mod upstream;
