//! File-system side of serving: opening beneath the root and MIME types; the path
//! mapping itself is pure and lives in `skiff-http`.
pub mod mime;
pub mod open;

pub use skiff_http::path;
