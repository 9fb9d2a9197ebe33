//! The Host/authority check and normaliser on arbitrary bytes: the quick check and the
//! parser always agree, a normalised name is lower-case ASCII of allowed bytes without a
//! port or a trailing dot, and normalising again changes nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiff_http::host::{is_valid, parse_authority};

fuzz_target!(|data: &[u8]| {
    let parsed = parse_authority(data);
    assert_eq!(
        is_valid(data),
        parsed.is_ok(),
        "quick check and parser disagree"
    );
    if let Ok(a) = parsed {
        let name = a.name.as_ref();
        assert!(!name.is_empty() && name.len() <= 253 + 2);
        assert!(!name.bytes().any(|b| b.is_ascii_uppercase()));
        if !name.starts_with('[') {
            assert!(name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')));
            assert!(!name.ends_with('.') && !name.starts_with('.') && !name.contains(".."));
        }
        let again = parse_authority(name.as_bytes()).expect("a normalised name parses");
        assert_eq!(again.name, a.name);
        assert_eq!(again.port, None);
    }
});
