//! A batch of output for one vectored write: frame bytes, with large DATA payloads
//! referenced from the stream queues rather than copied into it.

use bytes::Bytes;
use std::io::IoSlice;

/// DATA payload pieces at least this long are referenced, not copied: below it an iovec
/// costs more than the copy.
const REFERENCE_MIN: usize = 4096;

#[derive(Debug, Default)]
pub struct Batch {
    bytes: Vec<u8>,
    /// Payloads that go after `bytes[..at]`, in order of `at`.
    payloads: Vec<(usize, Bytes)>,
    /// Bytes in `payloads`.
    referenced: usize,
}

impl Batch {
    /// A batch whose frame bytes have room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Batch {
        Batch {
            bytes: Vec::with_capacity(capacity),
            ..Batch::default()
        }
    }

    /// Bytes to write, referenced payloads included.
    pub fn len(&self) -> usize {
        self.bytes.len() + self.referenced
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Room in the frame bytes' buffer.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Empties the batch, keeping its buffer; referenced payloads are let go.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.payloads.clear();
        self.referenced = 0;
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Appends a DATA payload piece: copied if short, else referenced.
    pub(crate) fn push_payload(&mut self, data: Bytes) {
        if data.len() < REFERENCE_MIN {
            self.bytes.extend_from_slice(&data);
        } else {
            self.referenced += data.len();
            self.payloads.push((self.bytes.len(), data));
        }
    }

    /// Fills `iov` with the batch's bytes from `skip` on (what a partial write left), in
    /// order; returns how many slices it filled. Fewer than all when `iov` is full.
    pub fn io_slices<'a>(&'a self, mut skip: usize, iov: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut start = 0;
        let mut add = |seg: &'a [u8]| {
            if n == iov.len() || seg.is_empty() {
                return;
            }
            if skip >= seg.len() {
                skip -= seg.len();
                return;
            }
            iov[n] = IoSlice::new(&seg[skip..]);
            skip = 0;
            n += 1;
        };
        for (at, payload) in &self.payloads {
            add(&self.bytes[start..*at]);
            add(payload);
            start = *at;
        }
        add(&self.bytes[start..]);
        n
    }

    /// The whole batch in one buffer (tests, fuzzing, `poll_transmit`).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        let mut iov = [IoSlice::new(&[]); 64];
        while out.len() < self.len() {
            let n = self.io_slices(out.len(), &mut iov);
            for s in &iov[..n] {
                out.extend_from_slice(s);
            }
        }
        out
    }

    /// The frame bytes' buffer, for a caller that keeps it; the batch is left empty.
    pub fn take_bytes(&mut self) -> Vec<u8> {
        self.payloads.clear();
        self.referenced = 0;
        std::mem::take(&mut self.bytes)
    }

    /// A batch around a buffer the caller kept.
    pub fn from_bytes(bytes: Vec<u8>) -> Batch {
        Batch {
            bytes,
            ..Batch::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_payloads_are_referenced_and_written_in_order_from_any_point() {
        let mut b = Batch::with_capacity(64);
        b.bytes_mut().extend_from_slice(b"head1");
        let big = Bytes::from(vec![b'x'; REFERENCE_MIN]);
        b.push_payload(big.clone());
        b.bytes_mut().extend_from_slice(b"head2");
        b.push_payload(Bytes::from_static(b"small"));
        b.push_payload(Bytes::from(vec![b'y'; REFERENCE_MIN + 1]));
        let mut want = b"head1".to_vec();
        want.extend_from_slice(&big);
        want.extend_from_slice(b"head2small");
        want.extend(std::iter::repeat_n(b'y', REFERENCE_MIN + 1));
        assert_eq!(b.len(), want.len());
        assert_eq!(b.to_vec(), want);
        // The big payloads were not copied: three pieces of frame bytes between them.
        let mut iov = [IoSlice::new(&[]); 8];
        assert_eq!(b.io_slices(0, &mut iov), 4);
        assert_eq!(iov[1].as_ptr(), big.as_ptr());
        // Resuming after a partial write, mid-payload and at a boundary.
        for skip in [0, 3, 5, 100, 5 + REFERENCE_MIN, want.len() - 1] {
            let n = b.io_slices(skip, &mut iov);
            let rest: Vec<u8> = iov[..n].iter().flat_map(|s| s.to_vec()).collect();
            assert_eq!(rest, want[skip..], "skip {skip}");
        }
        // A short iovec array takes what fits.
        let mut two = [IoSlice::new(&[]); 2];
        assert_eq!(b.io_slices(0, &mut two), 2);
        b.clear();
        assert!(b.is_empty() && b.capacity() >= 64);
    }
}
