//! uwsgi request encoding round-trips: the header carries modifier1 = 0 and the vars
//! size, and the vars block decodes back to the same pairs; oversize input is refused,
//! never truncated.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiff_codec::uwsgi::encode_request;

fuzz_target!(|pairs: Vec<(Vec<u8>, Vec<u8>)>| {
    let packet = match encode_request(pairs.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))) {
        Ok(p) => p,
        Err(_) => {
            let total: usize = pairs.iter().map(|(k, v)| 4 + k.len() + v.len()).sum();
            assert!(total > 65535, "refused a request of {total} bytes");
            return;
        }
    };
    assert_eq!(packet[0], 0, "modifier1");
    assert_eq!(packet[3], 0, "modifier2");
    let size = u16::from_le_bytes([packet[1], packet[2]]) as usize;
    assert_eq!(size, packet.len() - 4);
    let vars = &packet[4..];
    let mut decoded = Vec::new();
    let mut at = 0;
    let next = |at: &mut usize| {
        let n = u16::from_le_bytes([vars[*at], vars[*at + 1]]) as usize;
        let part = vars[*at + 2..*at + 2 + n].to_vec();
        *at += 2 + n;
        part
    };
    while at < vars.len() {
        let k = next(&mut at);
        let v = next(&mut at);
        decoded.push((k, v));
    }
    assert_eq!(decoded, pairs);
});
