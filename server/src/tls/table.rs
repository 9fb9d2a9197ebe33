//! Which certificate answers which name: exact names, `*.` wildcards one label deep
//! (RFC 6125 §6.4.3), and a default for clients that send no SNI or an unknown name.
//! Each certificate is a slot named by its certificate file, a name that survives reloads
//! of the files, so a connection can tell whether a request's Host belongs to the
//! certificate it was given (else 421).

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::sync::Arc;

/// One certificate in the table.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The certificate file's path: stable across reloads of its contents.
    pub id: Arc<str>,
    pub key: Arc<CertifiedKey>,
    pub not_before: i64,
    pub not_after: i64,
    /// The leaf's serial number in hex.
    pub serial: String,
}

/// Names to certificates; immutable, replaced whole on reload.
#[derive(Debug, Default)]
pub struct CertTable {
    slots: Vec<Slot>,
    exact: HashMap<Box<str>, usize>,
    /// `*.example.com` is stored under `example.com`.
    wildcard: HashMap<Box<str>, usize>,
    default: Option<usize>,
}

impl CertTable {
    /// Adds a certificate (or finds the slot it already has) and returns its index.
    pub fn slot(&mut self, slot: Slot) -> usize {
        if let Some(i) = self.slots.iter().position(|s| s.id == slot.id) {
            return i;
        }
        self.slots.push(slot);
        self.slots.len() - 1
    }

    /// Serves `name` (exact, or `*.parent`) from slot `i`, unless an earlier entry already
    /// claimed the name: virtual servers' own certificates are added first and win.
    pub fn claim(&mut self, name: &str, i: usize) {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        match name.strip_prefix("*.") {
            Some(parent) => self.wildcard.entry(parent.into()).or_insert(i),
            None => self.exact.entry(name.into()).or_insert(i),
        };
    }

    /// Slot `i` answers clients without SNI, unless a default was set before.
    pub fn default_to(&mut self, i: usize) {
        self.default.get_or_insert(i);
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    #[cfg(test)]
    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    /// The certificate for a server name (SNI, or a Host without its port); `None` with
    /// no match and no default.
    pub fn find(&self, name: Option<&str>) -> Option<&Slot> {
        let i = match name.map(|n| n.trim_end_matches('.')) {
            None => self.default,
            Some(name) if name.bytes().any(|b| b.is_ascii_uppercase()) => {
                self.find_lower(&name.to_ascii_lowercase())
            }
            Some(name) => self.find_lower(name),
        };
        i.map(|i| &self.slots[i])
    }

    fn find_lower(&self, name: &str) -> Option<usize> {
        if let Some(&i) = self.exact.get(name) {
            return Some(i);
        }
        let parent = name.split_once('.').map(|(_, p)| p);
        parent
            .and_then(|p| self.wildcard.get(p).copied())
            .or(self.default)
    }
}

/// The rustls side of the table: the live table behind an `ArcSwap`, so one
/// `ServerConfig` (with its session cache and ticket keys) lives for the whole process.
#[derive(Debug)]
pub struct Resolver {
    pub table: Arc<arc_swap::ArcSwap<CertTable>>,
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.table
            .load()
            .find(hello.server_name())
            .map(|s| s.key.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::test_certs::issue;

    fn slot(id: &str) -> Slot {
        let issued = issue(&[id], false);
        let pair = crate::tls::pair::from_pem(
            issued.cert.as_bytes(),
            issued.key.as_bytes(),
            &crate::tls::policy::provider(),
        )
        .unwrap();
        Slot {
            id: id.into(),
            key: pair.key,
            not_before: pair.not_before,
            not_after: pair.not_after,
            serial: pair.serial,
        }
    }

    fn table() -> CertTable {
        let mut t = CertTable::default();
        let www = t.slot(slot("www"));
        let wild = t.slot(slot("wild"));
        let fallback = t.slot(slot("fallback"));
        t.claim("www.example.com", www);
        t.claim("*.example.com", wild);
        t.claim("*.example.com", www); // a later claim loses
        t.default_to(fallback);
        t.default_to(www); // so does a later default
        t
    }

    fn id<'a>(t: &'a CertTable, name: Option<&str>) -> Option<&'a str> {
        t.find(name).map(|s| &*s.id)
    }

    #[test]
    fn exact_names_win_over_wildcards_case_and_trailing_dot_aside() {
        let t = table();
        assert_eq!(id(&t, Some("www.example.com")), Some("www"));
        assert_eq!(id(&t, Some("WWW.Example.COM.")), Some("www"));
        assert_eq!(id(&t, Some("api.example.com")), Some("wild"));
    }

    #[test]
    fn a_wildcard_covers_one_label_only() {
        let t = table();
        assert_eq!(id(&t, Some("a.b.example.com")), Some("fallback"));
        assert_eq!(id(&t, Some("example.com")), Some("fallback"));
    }

    #[test]
    fn no_sni_and_unknown_names_get_the_default() {
        let t = table();
        assert_eq!(id(&t, None), Some("fallback"));
        assert_eq!(id(&t, Some("other.test")), Some("fallback"));
        assert_eq!(id(&CertTable::default(), None), None);
    }

    #[test]
    fn one_certificate_file_is_one_slot() {
        let mut t = CertTable::default();
        let a = t.slot(slot("same"));
        let b = t.slot(slot("same"));
        assert_eq!(a, b);
        assert_eq!(t.slots().len(), 1);
    }
}
