//! HTTP semantics with no I/O, shared by every connection path: the request view handlers
//! see, preconditions, ranges, content negotiation, dates, decimal text, path safety, the
//! Host, and HTTP/2's frames, HPACK and connection state machine.
//! Everything here works on bytes and strings, so it is unit-tested and fuzzed without
//! sockets.

pub mod conditional;
pub mod date;
pub mod encoding;
pub mod h1_head;
pub mod h2;
pub mod host;
pub mod path;
pub mod range;
pub mod request;
pub mod text;
