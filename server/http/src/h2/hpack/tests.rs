use super::*;
use http::{HeaderMap, HeaderValue, StatusCode};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn decode_all(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    d.decode(block, usize::MAX, |n, v| {
        out.push((
            String::from_utf8(n.to_vec()).unwrap(),
            String::from_utf8(v.to_vec()).unwrap(),
        ))
    })?;
    Ok(out)
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn integers_c1() {
    let mut out = Vec::new();
    encode_int(&mut out, 10, 5, 0);
    assert_eq!(out, [0b01010]);
    out.clear();
    encode_int(&mut out, 1337, 5, 0);
    assert_eq!(out, [0b11111, 0b10011010, 0b00001010]);
    assert_eq!(decode_int(&out, 5), Ok((1337, 3)));
    out.clear();
    encode_int(&mut out, 42, 8, 0);
    assert_eq!(out, [42]);
    // The boundary: a value equal to the prefix mask needs a continuation byte of 0.
    out.clear();
    encode_int(&mut out, 31, 5, 0xe0);
    assert_eq!(out, [0xff, 0x00]);
    assert_eq!(decode_int(&out, 5), Ok((31, 2)));
}

#[test]
fn integer_overflow_and_truncation() {
    assert_eq!(decode_int(&[0x1f, 0x80], 5), Err(Error::Truncated));
    assert_eq!(decode_int(&[], 5), Err(Error::Truncated));
    // 2^32 and more: refused, not wrapped.
    assert_eq!(
        decode_int(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0x0f], 5),
        Err(Error::IntegerOverflow)
    );
    assert_eq!(
        decode_int(&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 5),
        Err(Error::IntegerOverflow)
    );
    let mut out = Vec::new();
    encode_int(&mut out, u32::MAX as usize, 7, 0);
    assert_eq!(decode_int(&out, 7), Ok((u32::MAX as usize, out.len())));
}

#[test]
fn fields_c2() {
    // C.2.1: literal with indexing.
    let mut d = Decoder::new(4096);
    let block = hex("400a637573746f6d2d6b65790d637573746f6d2d686561646572");
    assert_eq!(
        decode_all(&mut d, &block).unwrap(),
        pairs(&[("custom-key", "custom-header")])
    );
    assert_eq!(d.table_size(), 55);
    // C.2.2: literal without indexing, indexed name.
    let mut d = Decoder::new(4096);
    let block = hex("040c2f73616d706c652f70617468");
    assert_eq!(
        decode_all(&mut d, &block).unwrap(),
        pairs(&[(":path", "/sample/path")])
    );
    assert_eq!(d.table_size(), 0);
    // C.2.3: never indexed.
    let block = hex("100870617373776f726406736563726574");
    assert_eq!(
        decode_all(&mut d, &block).unwrap(),
        pairs(&[("password", "secret")])
    );
    assert_eq!(d.table_size(), 0);
    // C.2.4: indexed.
    assert_eq!(
        decode_all(&mut d, &[0x82]).unwrap(),
        pairs(&[(":method", "GET")])
    );
}

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    let first = [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
    ];
    assert_eq!(decode_all(&mut d, &hex(blocks[0])).unwrap(), pairs(&first));
    assert_eq!(d.table_size(), 57);
    let mut second = first.to_vec();
    second.push(("cache-control", "no-cache"));
    assert_eq!(decode_all(&mut d, &hex(blocks[1])).unwrap(), pairs(&second));
    assert_eq!(d.table_size(), 110);
    let third = [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ];
    assert_eq!(decode_all(&mut d, &hex(blocks[2])).unwrap(), pairs(&third));
    assert_eq!(d.table_size(), 164);
}

#[test]
fn requests_c3_and_c4() {
    requests([
        "828684410f7777772e6578616d706c652e636f6d",
        "828684be58086e6f2d6361636865",
        "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565",
    ]);
    requests([
        "828684418cf1e3c2e5f23a6ba0ab90f4ff",
        "828684be5886a8eb10649cbf",
        "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf",
    ]);
}

fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    let loc = ("location", "https://www.example.com");
    let first = [
        (":status", "302"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
        loc,
    ];
    assert_eq!(decode_all(&mut d, &hex(blocks[0])).unwrap(), pairs(&first));
    assert_eq!(d.table_size(), 222);
    let mut second = first;
    second[0] = (":status", "307");
    assert_eq!(decode_all(&mut d, &hex(blocks[1])).unwrap(), pairs(&second));
    assert_eq!(d.table_size(), 222);
    let third = [
        (":status", "200"),
        ("cache-control", "private"),
        ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        loc,
        ("content-encoding", "gzip"),
        (
            "set-cookie",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        ),
    ];
    assert_eq!(decode_all(&mut d, &hex(blocks[2])).unwrap(), pairs(&third));
    assert_eq!(d.table_size(), 215);
}

#[test]
fn responses_c5_and_c6() {
    responses([
        "4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
        "4803333037c1c0bf",
        "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31",
    ]);
    responses([
        "488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
        "4883640effc1c0bf",
        "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007",
    ]);
}

#[test]
fn garbage_is_rejected_precisely() {
    let mut d = Decoder::new(4096);
    // h2spec hpack 6.1: index 0.
    assert_eq!(decode_all(&mut d, &[0x80]), Err(Error::IndexZero));
    // h2spec hpack 2.3.3: past both tables.
    assert_eq!(decode_all(&mut d, &[0xbe]), Err(Error::IndexOutOfRange));
    assert_eq!(
        decode_all(&mut d, &[0x7e, 0x00]),
        Err(Error::IndexOutOfRange)
    );
    // A string longer than the block.
    assert_eq!(
        decode_all(&mut d, &[0x40, 0x05, b'a']),
        Err(Error::Truncated)
    );
    assert_eq!(decode_all(&mut d, &[0x40]), Err(Error::Truncated));
    // h2spec hpack 4.2: an update above our setting.
    assert_eq!(
        decode_all(&mut d, &[0x3f, 0xe2, 0x1f]),
        Err(Error::SizeUpdateTooLarge)
    );
    // h2spec hpack 6.3: an update after a field.
    assert_eq!(
        decode_all(&mut d, &[0x82, 0x20]),
        Err(Error::SizeUpdateLate)
    );
    // h2spec hpack 5.2: EOS, and bad padding in a Huffman literal.
    assert_eq!(
        decode_all(&mut d, &[0x00, 0x81, 0x1f, 0x84, 0xff, 0xff, 0xff, 0xff]).unwrap_err(),
        Error::HuffmanEos
    );
    assert_eq!(
        decode_all(&mut d, &[0x00, 0x81, 0x18, 0x00]),
        Err(Error::HuffmanPadding)
    );
}

#[test]
fn size_updates_before_fields_shrink_the_table() {
    let mut d = Decoder::new(4096);
    decode_all(
        &mut d,
        &hex("400a637573746f6d2d6b65790d637573746f6d2d686561646572"),
    )
    .unwrap();
    assert_eq!(d.table_size(), 55);
    // Two updates (0 then 4096) before a field: the table is emptied and the index gone.
    assert_eq!(
        decode_all(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x82])
            .unwrap()
            .len(),
        1
    );
    assert_eq!(d.table_size(), 0);
    assert_eq!(decode_all(&mut d, &[0xbe]), Err(Error::IndexOutOfRange));
}

#[test]
fn list_limit_stops_expansion_but_keeps_the_table_in_step() {
    // One 100-byte entry then 300 one-byte references to it: 40 KB of headers, past the
    // limit, within what is decoded to keep the table in step.
    let mut block = vec![0x40, 0x01, b'x', 0x64];
    block.extend(std::iter::repeat_n(b'v', 100));
    block.extend(std::iter::repeat_n(0xbe, 300));
    let mut d = Decoder::new(4096);
    let mut passed = 0;
    let r = d.decode(&block, 16 * 1024, |_, _| passed += 1).unwrap();
    assert!(r.over_limit);
    assert_eq!(r.list_size, 301 * 133);
    assert_eq!(passed, 16 * 1024 / 133);
    // The entry was still added: the next block can use it.
    assert_eq!(decode_all(&mut d, &[0xbe]).unwrap()[0].0, "x");
}

#[test]
fn a_block_that_expands_far_past_the_limit_is_refused_early() {
    // A 4000-byte name, then 16,000 two-byte re-insertions of it (literal with incremental
    // indexing, indexed name): each would copy the name into the table, 64 MB in all.
    let rest = 4000 - 127;
    let mut block = vec![0x40, 0x7f, 0x80 | (rest & 0x7f) as u8, (rest >> 7) as u8];
    block.extend(std::iter::repeat_n(b'n', 4000));
    block.push(0);
    for _ in 0..16_000 {
        block.extend_from_slice(&[0x7e, 0]);
    }
    let mut d = Decoder::new(4096);
    let mut fields = 0;
    let r = d.decode(&block, 16 * 1024, |_, _| fields += 1);
    assert_eq!(r, Err(Error::ListTooLarge));
    // Refused at four times the limit: the fields passed on stop at the limit, and the
    // table holds the last insertion only.
    assert_eq!(fields, 16 * 1024 / 4032);
    assert_eq!(d.table_size(), 4032);
}

#[test]
fn huffman_and_raw_literals_pick_the_shorter() {
    let mut out = Vec::new();
    encode_str(&mut out, b"www.example.com");
    assert_eq!(out, hex("8cf1e3c2e5f23a6ba0ab90f4ff"));
    out.clear();
    // Bytes with long codes: raw is shorter.
    encode_str(&mut out, b"\x00\x01");
    assert_eq!(out, [0x02, 0, 1]);
    // After other bytes, at the one-byte prefix's edge (126), and past it (a two-byte
    // length), each decodes back to its string.
    for s in [
        vec![b'a'; 126],
        vec![0u8; 126],
        vec![b'z'; 300],
        vec![0xff; 200],
    ] {
        out.clear();
        out.extend_from_slice(b"prefix");
        encode_str(&mut out, &s);
        let (len, at) = super::primitive::decode_int(&out[6..], 7).unwrap();
        let body = &out[6 + at..];
        assert_eq!(body.len(), len, "{} bytes of {:#x}", s.len(), s[0]);
        let mut back = Vec::new();
        if out[6] & 0x80 != 0 {
            super::huffman::decode(body, &mut back).unwrap();
        } else {
            back.extend_from_slice(body);
        }
        assert_eq!(back, s);
    }
}

fn response_headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("server", HeaderValue::from_static("skiff"));
    h.insert(
        "content-type",
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert("content-length", HeaderValue::from_static("1234"));
    h.insert("etag", HeaderValue::from_static("\"abc\""));
    h.insert("connection", HeaderValue::from_static("close"));
    h.insert("set-cookie", HeaderValue::from_static("a=b"));
    h.insert("x-custom", HeaderValue::from_static("yes"));
    h
}

#[test]
fn response_round_trip_and_the_second_block_is_small() {
    let mut e = Encoder::new(4096);
    let mut d = Decoder::new(4096);
    let h = response_headers();
    let mut first = Vec::new();
    e.response(&mut first, StatusCode::OK, &h);
    let mut second = Vec::new();
    e.response(&mut second, StatusCode::OK, &h);
    let expected = pairs(&[
        (":status", "200"),
        ("server", "skiff"),
        ("content-type", "text/html; charset=utf-8"),
        ("content-length", "1234"),
        ("etag", "\"abc\""),
        ("set-cookie", "a=b"),
        ("x-custom", "yes"),
    ]);
    assert_eq!(decode_all(&mut d, &first).unwrap(), expected);
    assert_eq!(decode_all(&mut d, &second).unwrap(), expected);
    // Indexed: status, server, content-type, x-custom: one byte each. Literals with a
    // static name: content-length (1+1+3), etag (1+1+5 raw or Huffman), set-cookie (1+1+3).
    assert!(second.len() < 25, "second block is {} bytes", second.len());
    assert!(first.len() > second.len() + 20);
    // `connection` is never sent; `set-cookie` is never-indexed (0001 pattern, name 55).
    assert!(second.windows(2).any(|w| w == [0x1f, 55 - 15]));
}

#[test]
fn other_statuses_are_literals() {
    let mut e = Encoder::new(4096);
    let mut out = Vec::new();
    e.status(&mut out, StatusCode::NOT_FOUND);
    assert_eq!(out, [0x8d]);
    out.clear();
    e.status(&mut out, StatusCode::PARTIAL_CONTENT);
    assert_eq!(out, [0x8a]);
    out.clear();
    e.status(&mut out, StatusCode::RANGE_NOT_SATISFIABLE);
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode_all(&mut d, &out).unwrap(),
        pairs(&[(":status", "416")])
    );
}

#[test]
fn encoder_follows_the_peers_table_size() {
    let mut e = Encoder::new(4096);
    let mut d = Decoder::new(4096);
    let h = response_headers();
    let mut out = Vec::new();
    e.response(&mut out, StatusCode::OK, &h);
    decode_all(&mut d, &out).unwrap();
    // The peer goes to 0 then back to 100: the block starts with both updates (§4.2).
    e.set_peer_table_size(0);
    e.set_peer_table_size(100);
    out.clear();
    e.response(&mut out, StatusCode::OK, &h);
    assert_eq!(&out[..3], [0x20, 0x3f, 100 - 31]);
    assert_eq!(decode_all(&mut d, &out).unwrap().len(), 7);
    assert!(d.table_size() <= 100);
    // A cap below the default is announced in the first block.
    let mut e = Encoder::new(256);
    out.clear();
    e.response(&mut out, StatusCode::OK, &HeaderMap::new());
    assert_eq!(out, [0x3f, 0xe1, 0x01, 0x88]);
}

/// A deterministic generator for the randomized tests.
fn xorshift(mut seed: u32) -> impl FnMut() -> u32 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    }
}

#[test]
fn random_fields_round_trip_with_a_small_table() {
    // Fields of every kind through a 200-byte table.
    let mut next = xorshift(0x1234_5678u32);
    let mut e = Encoder::new(200);
    e.set_peer_table_size(200);
    let mut d = Decoder::new(200);
    for _ in 0..200 {
        let mut block = Vec::new();
        let mut want = Vec::new();
        e.begin_block(&mut block);
        for _ in 0..(next() % 6) {
            let name = format!("n{}", next() % 8);
            let value: String = (0..next() % 20)
                .map(|_| (b'!' + (next() % 90) as u8) as char)
                .collect();
            let idx =
                [Indexing::Incremental, Indexing::Without, Indexing::Never][next() as usize % 3];
            e.field(&mut block, name.as_bytes(), value.as_bytes(), idx);
            want.push((name, value));
        }
        assert_eq!(decode_all(&mut d, &block).unwrap(), want);
        assert!(d.table_size() <= 200);
        assert_eq!(e.table_size(), d.table_size());
    }
}

/// Precoded fields mixed with ordinary ones, names in the static table or not, values
/// that repeat or not, and table size changes: every block decodes to what was sent,
/// and both tables hold the same bytes after each.
#[test]
fn precoded_fields_keep_both_tables_in_step() {
    let mut next = xorshift(0x9e37_79b9u32);
    let names = [
        http::header::ETAG,
        http::header::LAST_MODIFIED,
        http::header::CONTENT_LENGTH,
        http::header::HeaderName::from_static("x-a"),
        http::header::HeaderName::from_static("x-b"),
    ];
    let mut e = Encoder::new(300);
    let mut d = Decoder::new(300);
    for round in 0..400 {
        let mut block = Vec::new();
        let mut want = Vec::new();
        if next().is_multiple_of(10) {
            e.set_peer_table_size(next() % 301);
        }
        e.begin_block(&mut block);
        for _ in 0..(next() % 5) {
            let name = &names[next() as usize % names.len()];
            let value: String = (0..next() % 4 * 20)
                .map(|_| (b'a' + (next() % 3) as u8) as char)
                .collect();
            if next().is_multiple_of(2) {
                let mut pre = Precoded::default();
                pre.push(name, value.as_bytes());
                e.precoded(&mut block, &pre);
            } else {
                e.header(&mut block, name, value.as_bytes());
            }
            want.push((name.as_str().to_string(), value));
        }
        assert_eq!(decode_all(&mut d, &block).unwrap(), want, "round {round}");
        assert_eq!(e.table_size(), d.table_size(), "round {round}");
    }
}

#[test]
fn a_large_huffman_block_leaves_no_large_scratch() {
    let mut enc = Encoder::new(4096);
    let mut block = Vec::new();
    enc.begin_block(&mut block);
    let value = "a".repeat(40_000);
    enc.field(&mut block, b"x-big", value.as_bytes(), Indexing::Never);
    // Huffman-coded (shorter): decoded through the scratch.
    assert!(block.len() < value.len());
    let mut d = Decoder::new(4096);
    let got = decode_all(&mut d, &block).unwrap();
    assert_eq!(got[0].1.len(), 40_000);
    assert!(d.scratch_capacity() <= 8 << 10, "{}", d.scratch_capacity());
}

/// Fields coded ahead of time read back the same in any block, whatever either table
/// holds; once sent on a connection they go out as one-byte indices.
#[test]
fn precoded_fields_read_the_same_in_any_block_then_as_indices() {
    let mut pre = Precoded::default();
    pre.push(&http::header::ETAG, b"\"5f-1a2b\"");
    pre.push(
        &http::header::LAST_MODIFIED,
        b"Tue, 24 Nov 2026 10:00:00 GMT",
    );
    pre.push(&http::header::CONTENT_LENGTH, b"1795");
    pre.push(&http::header::HeaderName::from_static("x-unlisted"), b"v");
    pre.push(&http::header::CONNECTION, b"close");
    let mut e = Encoder::new(4096);
    let mut d = Decoder::new(4096);
    let h = response_headers();
    let mut sizes = Vec::new();
    for round in 0..4 {
        if round == 2 {
            // The peer shrinks its table to nothing and grows it back: every entry goes.
            e.set_peer_table_size(0);
            e.set_peer_table_size(4096);
        }
        let mut block = Vec::new();
        e.begin_response(&mut block, StatusCode::OK);
        e.header(&mut block, &http::header::SERVER, b"skiff");
        let at = block.len();
        e.precoded(&mut block, &pre);
        sizes.push(block.len() - at);
        for (name, value) in &h {
            e.header(&mut block, name, value.as_bytes());
        }
        let fields = decode_all(&mut d, &block).unwrap();
        assert_eq!(
            fields[..6],
            pairs(&[
                (":status", "200"),
                ("server", "skiff"),
                ("etag", "\"5f-1a2b\""),
                ("last-modified", "Tue, 24 Nov 2026 10:00:00 GMT"),
                ("content-length", "1795"),
                ("x-unlisted", "v"),
            ])[..],
            "round {round}"
        );
        assert_eq!(fields.len(), 6 + 6, "connection dropped, round {round}");
    }
    // First sent as literals, then a byte each; after the table emptied, literals again.
    assert_eq!(sizes[1], 4, "{sizes:?}");
    assert!(
        sizes[0] > 30 && sizes[2] == sizes[0] && sizes[3] == 4,
        "{sizes:?}"
    );
    assert!(varies_per_response(&http::header::ETAG));
    assert!(!varies_per_response(&http::header::CONTENT_TYPE));
}

/// A precoded field larger than a quarter of the table goes as a literal without
/// indexing, as `header` would send it: it would only evict what repeats.
#[test]
fn a_large_precoded_field_is_not_indexed() {
    let mut pre = Precoded::default();
    let etag = format!("\"{}\"", "7".repeat(1200));
    pre.push(&http::header::ETAG, etag.as_bytes());
    let mut e = Encoder::new(4096);
    let mut d = Decoder::new(4096);
    for _ in 0..2 {
        let mut block = Vec::new();
        e.begin_response(&mut block, StatusCode::OK);
        e.precoded(&mut block, &pre);
        // Literal without indexing, static name 34 (etag): 0x0f then 34 - 15.
        assert_eq!(block[1..3], [0x0f, 34 - 15]);
        let fields = decode_all(&mut d, &block).unwrap();
        assert_eq!(fields[1], ("etag".to_string(), etag.clone()));
    }
    assert_eq!(d.table_size(), 0);
}
