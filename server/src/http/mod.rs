//! HTTP pieces the handlers share: the reply they build here, and the I/O-free semantics
//! of the `skiff-http` crate under their usual names.
pub mod reply;

pub use skiff_http::{conditional, date, encoding, range, request, text};

/// A response body as hyper takes it, whatever made it (a reply, a backend).
pub type BoxedBody = http_body_util::combinators::BoxBody<bytes::Bytes, std::io::Error>;
