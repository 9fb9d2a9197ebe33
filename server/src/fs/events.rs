//! Which file-system events can change a watched file: writes, creations, renames and
//! removals, never opens or reads (a reload's own read of the file would otherwise wake
//! the watcher again, for ever).

use notify::event::{AccessKind, AccessMode, EventKind};

/// Whether an event of this kind can have changed a file's contents or name.
pub fn may_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}
