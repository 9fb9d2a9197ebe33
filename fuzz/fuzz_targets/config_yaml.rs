//! The server config parser and validator on arbitrary text: a config or an error with a
//! message, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Err(e) = skiff_config::parse_yaml(text) {
        assert!(!e.to_string().is_empty());
    }
});
