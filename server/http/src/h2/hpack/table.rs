//! RFC 7541 §2.3 index space: the static table (Appendix A) and a dynamic table that
//! evicts oldest-first to stay within its size (§4).

use std::collections::VecDeque;

/// RFC 7541 Appendix A; index 1 is `STATIC[0]`.
pub const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The index of the first static entry with this name (a response's names only need
/// those past the pseudo-headers). A match, not a search: it runs for every header sent.
pub fn static_name_index(name: &[u8]) -> Option<usize> {
    Some(match name {
        b"accept-charset" => 15,
        b"accept-encoding" => 16,
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return None,
    })
}

/// §4.1: an entry's size is its name and value lengths plus 32.
pub const ENTRY_OVERHEAD: usize = 32;

/// One entry's name and value in a single allocation.
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }
    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }
}

/// The dynamic table: newest first, as the index space counts (§2.3.3).
#[derive(Default)]
pub struct Dynamic {
    entries: VecDeque<Entry>,
    size: usize,
    max_size: usize,
}

impl Dynamic {
    pub fn new(max_size: usize) -> Dynamic {
        Dynamic {
            entries: VecDeque::new(),
            size: 0,
            max_size,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// The entry at dynamic index `i` (0 is the newest, HPACK index 62).
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(i).map(|e| (e.name(), e.value()))
    }

    /// §4.3: a smaller maximum evicts at once.
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        self.evict_to(max_size);
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let Some(e) = self.entries.pop_back() else {
                break;
            };
            self.size -= e.bytes.len() + ENTRY_OVERHEAD;
        }
    }

    /// §4.4: an entry larger than the table empties it and is not added.
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        self.insert_entry([name, value].concat(), name.len());
    }

    /// [`Dynamic::insert`] of an entry already copied into one buffer, name first.
    pub fn insert_entry(&mut self, bytes: Vec<u8>, name_len: usize) {
        let size = bytes.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - size);
        self.entries.push_front(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len,
        });
        self.size += size;
    }

    /// The dynamic index of an entry equal to (`name`, `value`), else of one with `name`.
    pub fn find(&self, name: &[u8], value: &[u8]) -> (Option<usize>, Option<usize>) {
        let mut by_name = None;
        for (i, e) in self.entries.iter().enumerate() {
            if same(e.name(), name) {
                if same(e.value(), value) {
                    return (Some(i), Some(i));
                }
                by_name.get_or_insert(i);
            }
        }
        (None, by_name)
    }
}

/// Most entries differ in length or first byte: those are told apart without a call to
/// `memcmp`.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.first() == b.first() && a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_name_index_agrees_with_the_table() {
        for (i, (name, _)) in STATIC.iter().enumerate().skip(14) {
            let first = STATIC.iter().position(|(n, _)| n == name).unwrap();
            assert_eq!(
                static_name_index(name.as_bytes()),
                Some(first + 1),
                "{name}"
            );
            assert!(first <= i);
        }
        assert_eq!(static_name_index(b"x-unknown"), None);
    }

    #[test]
    fn eviction_keeps_the_size_bound() {
        let mut t = Dynamic::new(100);
        t.insert(b"aa", b"bb"); // 36
        t.insert(b"cc", b"dd"); // 72
        assert_eq!((t.len(), t.size()), (2, 72));
        t.insert(b"ee", b"ff"); // evicts "aa"
        assert_eq!((t.len(), t.size()), (2, 72));
        assert_eq!(t.get(0), Some((&b"ee"[..], &b"ff"[..])));
        assert_eq!(t.get(1), Some((&b"cc"[..], &b"dd"[..])));
        assert_eq!(t.find(b"cc", b"dd"), (Some(1), Some(1)));
        assert_eq!(t.find(b"cc", b"zz"), (None, Some(1)));
        t.set_max_size(40);
        assert_eq!((t.len(), t.size()), (1, 36));
        // Too large for the table: empties it.
        t.insert(b"a-long-name", b"a-long-value");
        assert_eq!((t.len(), t.size()), (0, 0));
    }
}
