//! What the server asks of its allocator (mimalloc): memory freed in bulk goes back to
//! the OS now, not after mimalloc's purge delay and its next allocation.
#![allow(unsafe_code)]

/// Returns the calling thread's empty pages, and the ones waiting for their purge delay,
/// to the OS.
pub fn give_back_free_pages() {
    // SAFETY: mi_collect takes no pointers; it only walks mimalloc's own structures.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
