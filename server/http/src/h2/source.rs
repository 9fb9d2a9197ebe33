//! Response bytes a stream reads only as its DATA frames are cut (a file), straight into
//! the batch being written: no chunk in memory between the file and the socket.

use std::io;

/// Where a stream's remaining response bytes come from once its in-memory queue is empty.
/// The connection does no I/O: the driver supplies the reading.
pub trait DataSource: Send {
    /// Appends exactly `n` more bytes of the body to `out`. An error (a file cut short,
    /// an I/O failure) resets the stream; `out` is cut back by the caller.
    fn read_into(&mut self, out: &mut Vec<u8>, n: usize) -> io::Result<()>;
}

/// A stream's source and the bytes it still owes.
pub(crate) struct Source {
    pub reader: Box<dyn DataSource>,
    pub left: u64,
}
