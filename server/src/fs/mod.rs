//! File-system side of serving: safe path mapping, opening beneath the root, MIME types.
pub mod mime;
pub mod open;
pub mod path;
