//! HTTP semantics with no I/O, shared by the fast path and the hyper path.
pub mod conditional;
pub mod date;
pub mod encoding;
pub mod range;
pub mod reply;
pub mod request;
pub mod text;
