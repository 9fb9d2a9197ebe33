//! One request's exchange, protocol apart: the decisions every connection path shares
//! (`front`) and the record that turns a finished exchange into its access-log line and
//! its metrics (`record`). The connection layer (`conn`) calls these; they call the
//! configuration (`app`) and never the connection layer.

pub mod front;
pub mod record;

pub use record::{Exchange, Outcome, Protocol, RequestFields, CLIENT_CLOSED_REQUEST};
