//! RFC 9218 priorities from the request's `priority` field: urgency and incremental.

/// A response's priority: lower urgency first; non-incremental responses of one urgency
/// go one after the other in stream order, incremental ones share the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    pub urgency: u8,
    pub incremental: bool,
}

impl Default for Priority {
    /// RFC 9218 §4: `u=3`, not incremental.
    fn default() -> Self {
        Priority {
            urgency: 3,
            incremental: false,
        }
    }
}

impl Priority {
    /// Reads a `priority` field value (a Structured Fields dictionary, RFC 8941). Members
    /// it does not know, and values out of range or of the wrong type, are ignored as
    /// §4 asks; a later member of the same name wins.
    pub fn parse(value: &[u8]) -> Priority {
        let mut p = Priority::default();
        for member in value.split(|&b| b == b',') {
            let member = member.trim_ascii();
            // Parameters (`;a=b`) on a member carry nothing for these two keys.
            let member = member.split(|&b| b == b';').next().unwrap_or_default();
            let (key, value) = match member.iter().position(|&b| b == b'=') {
                Some(i) => (&member[..i], Some(&member[i + 1..])),
                None => (member, None),
            };
            match (key.trim_ascii(), value.map(<[u8]>::trim_ascii)) {
                (b"u", Some([d])) if (b'0'..=b'7').contains(d) => p.urgency = d - b'0',
                (b"i", None) | (b"i", Some(b"?1")) => p.incremental = true,
                (b"i", Some(b"?0")) => p.incremental = false,
                _ => {}
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::Priority;

    fn p(urgency: u8, incremental: bool) -> Priority {
        Priority {
            urgency,
            incremental,
        }
    }

    #[test]
    fn reads_urgency_and_incremental_and_ignores_the_rest() {
        assert_eq!(Priority::parse(b""), p(3, false));
        assert_eq!(Priority::parse(b"u=0"), p(0, false));
        assert_eq!(Priority::parse(b"u=5, i"), p(5, true));
        assert_eq!(Priority::parse(b"i=?1,u=1"), p(1, true));
        assert_eq!(Priority::parse(b"u=2, i=?0"), p(2, false));
        // Out of range, wrong type, unknown members: ignored.
        assert_eq!(Priority::parse(b"u=8"), p(3, false));
        assert_eq!(Priority::parse(b"u=12"), p(3, false));
        assert_eq!(Priority::parse(b"u=?1, i=3"), p(3, false));
        assert_eq!(Priority::parse(b"x=1, u=1;a=b, zz"), p(1, false));
        // The last member of a name wins.
        assert_eq!(Priority::parse(b"u=1, u=6"), p(6, false));
        assert_eq!(Priority::parse(b"\xff\x00garbage"), p(3, false));
    }
}
