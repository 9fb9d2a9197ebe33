//! File-system side of serving: opening beneath the root, MIME types and which watch
//! events matter; the path
//! mapping itself is pure and lives in `skiff-http`.
pub mod chunk;
pub mod events;
pub mod mime;
pub mod open;

pub use skiff_http::path;
