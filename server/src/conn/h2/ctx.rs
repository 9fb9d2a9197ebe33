//! What every request of an HTTP/2 connection shares.

use crate::conn::activity::Activity;
use crate::conn::origin::Origin;
use crate::state::Shared;
use std::sync::Arc;

/// Held by the connection and by each request's handler (one reference count each).
pub(super) struct Ctx {
    pub shared: Arc<Shared>,
    pub origin: Origin,
    pub activity: Arc<Activity>,
}
