//! The HPACK decoder on arbitrary header blocks, two in a row (the second sees the
//! table the first left): never a panic; the table stays within its size; the fields
//! passed on stay within the list limit; and what decodes re-encodes (through our
//! encoder) into a block that decodes to the same fields.
//!
//! Input: the first byte is the length of the first block; the rest are the blocks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skiff_http::h2::hpack::{Decoder, Encoder, Indexing};

const TABLE: usize = 512;
const LIST: usize = 4096;

fn fields(d: &mut Decoder, block: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut passed = 0;
    let r = d.decode(block, LIST, |n, v| {
        passed += n.len() + v.len() + 32;
        out.push((n.to_vec(), v.to_vec()));
    });
    assert!(d.table_size() <= TABLE);
    let r = r.ok()?;
    assert!(passed <= LIST);
    assert_eq!(r.over_limit, r.list_size > LIST);
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, data)) = data.split_first() else {
        return;
    };
    let (first, second) = data.split_at((cut as usize).min(data.len()));
    let mut d = Decoder::new(TABLE);
    let mut e = Encoder::new(TABLE);
    let mut check = Decoder::new(TABLE);
    for block in [first, second] {
        let Some(fs) = fields(&mut d, block) else {
            return;
        };
        let mut re = Vec::new();
        e.begin_block(&mut re);
        for (i, (n, v)) in fs.iter().enumerate() {
            let idx = [Indexing::Incremental, Indexing::Without, Indexing::Never][i % 3];
            e.field(&mut re, n, v, idx);
        }
        let mut again = Vec::new();
        check
            .decode(&re, usize::MAX, |n, v| again.push((n.to_vec(), v.to_vec())))
            .expect("our own encoding decodes");
        assert_eq!(again, fs);
    }
});
