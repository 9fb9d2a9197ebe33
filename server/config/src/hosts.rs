//! Host name patterns for virtual servers.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// `www.example.com`, lower-cased.
    Exact(String),
    /// `*.example.com`: stored as the suffix `.example.com`; matches one or more labels.
    Wildcard(String),
}

impl HostPattern {
    pub fn parse(text: &str) -> Result<HostPattern, String> {
        let lower = text.to_ascii_lowercase();
        let (wild, name) = match lower.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, lower.as_str()),
        };
        if name.is_empty() {
            return Err(format!("{text:?} is not a host name"));
        }
        if name.contains('*') {
            return Err(format!(
                "{text:?}: a wildcard is only allowed as the first label (`*.example.com`)"
            ));
        }
        if name.contains(':') {
            return Err(format!("{text:?}: give the host without a port"));
        }
        for label in name.split('.') {
            if label.is_empty()
                || label.len() > 63
                || !label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            {
                return Err(format!(
                    "{text:?} is not a valid host name (labels of letters, digits and '-', separated by '.')"
                ));
            }
        }
        Ok(if wild {
            HostPattern::Wildcard(format!(".{name}"))
        } else {
            HostPattern::Exact(name.to_owned())
        })
    }

    /// Whether a request host (lower-cased, port removed) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(h) => h == host,
            HostPattern::Wildcard(suffix) => {
                host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_wildcard() {
        let w = HostPattern::parse("*.Example.com").unwrap();
        assert!(w.matches("a.example.com") && w.matches("a.b.example.com"));
        assert!(!w.matches("example.com") && !w.matches("aexample.com"));
        assert!(HostPattern::parse("WWW.example.com")
            .unwrap()
            .matches("www.example.com"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(HostPattern::parse("a.*.com")
            .unwrap_err()
            .contains("first label"));
        assert!(HostPattern::parse("example.com:80")
            .unwrap_err()
            .contains("without a port"));
        assert!(HostPattern::parse("bad_name.com")
            .unwrap_err()
            .contains("not a valid host name"));
        assert!(HostPattern::parse("").is_err());
    }
}
