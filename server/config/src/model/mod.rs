//! The configuration model. Every field is documented here; the documentation flows into
//! the JSON Schema (`config.schema.json`) and from there into editors and the operator.

mod defaults;
mod pools;
mod rules;
mod server;
mod tls;

pub use pools::*;
pub use rules::*;
pub use server::*;
pub use tls::*;
