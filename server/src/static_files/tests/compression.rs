//! Compressed codings: precompressed sidecars and on-the-fly compression.

use super::*;

fn set_mtime(path: &Path, t: SystemTime) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(t).unwrap();
}

#[test]
fn precompressed_sidecars() {
    let now = SystemTime::now();
    let s = site(|p| {
        std::fs::write(p.join("app.js"), "console.log(1)").unwrap();
        std::fs::write(p.join("app.js.br"), "BR").unwrap();
        std::fs::write(p.join("app.js.gz"), "GZ").unwrap();
        std::fs::write(p.join("old.css"), "body{}").unwrap();
        std::fs::write(p.join("old.css.gz"), "STALE").unwrap();
        set_mtime(&p.join("app.js"), now - Duration::from_secs(10));
        set_mtime(&p.join("old.css.gz"), now - Duration::from_secs(100));
        set_mtime(&p.join("old.css"), now - Duration::from_secs(10));
    });
    let mut req = get("/app.js");
    req.accept_encoding = Some(b"gzip, br");
    let br = s.files.respond(&req);
    assert_eq!(body(&br), b"BR");
    assert_eq!(header(&br, "content-encoding"), Some("br"));
    assert_eq!(header(&br, "vary"), Some("Accept-Encoding"));
    assert_eq!(
        header(&br, "content-type"),
        Some("text/javascript; charset=utf-8")
    );

    req.accept_encoding = Some(b"gzip");
    let gz = s.files.respond(&req);
    assert_eq!(body(&gz), b"GZ");
    assert_ne!(
        header(&gz, "etag"),
        header(&br, "etag"),
        "an ETag per encoding"
    );

    req.accept_encoding = Some(b"br;q=0, gzip;q=0");
    let plain = s.files.respond(&req);
    assert_eq!(body(&plain), b"console.log(1)");
    assert!(header(&plain, "content-encoding").is_none());
    assert_eq!(header(&plain, "vary"), Some("Accept-Encoding"));

    // A 304 for the br variant carries Vary too.
    let br_tag = header(&br, "etag").unwrap().to_owned();
    req.accept_encoding = Some(b"br");
    req.preconditions.if_none_match = Some(br_tag.as_bytes());
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    assert_eq!(header(&r, "vary"), Some("Accept-Encoding"));

    // A sidecar older than its original is ignored.
    let mut req = get("/old.css");
    req.accept_encoding = Some(b"gzip");
    let r = s.files.respond(&req);
    assert_eq!(body(&r), b"body{}");
    assert!(header(&r, "vary").is_none());
}

fn compressing_site(setup: impl FnOnce(&Path)) -> Site {
    site_with(
        StaticOptions {
            compression: Some(Arc::new(CompressionPolicy::from_config(
                &skiff_config::Compression::default(),
            ))),
            ..default_options()
        },
        CacheSettings {
            revalidate: Duration::from_millis(50),
            ..CacheSettings::default()
        },
        setup,
    )
}

fn with_accept<'a>(path: &'a str, accept: Option<&'a str>) -> RequestHead<'a> {
    RequestHead {
        accept_encoding: accept.map(str::as_bytes),
        ..get(path)
    }
}

const CSS: &str = "body { color: red; margin: 0 auto; }\n";

#[test]
fn on_the_fly_compression_negotiates_and_compresses_once() {
    let s = compressing_site(|p| {
        std::fs::write(p.join("site.css"), CSS.repeat(100)).unwrap();
        std::fs::write(p.join("tiny.css"), "a{}").unwrap();
        std::fs::write(p.join("photo.jpg"), vec![7u8; 10_000]).unwrap();
    });
    let br = s.files.respond(&with_accept("/site.css", Some("gzip, br")));
    assert_eq!(header(&br, "content-encoding"), Some("br"));
    assert_eq!(header(&br, "vary"), Some("Accept-Encoding"));
    assert!(br.body.len() < (CSS.len() * 100) as u64 / 4);
    let again = s.files.respond(&with_accept("/site.css", Some("br")));
    let ptr = |r: &Reply| match &r.body {
        Body::Bytes(b) => b.as_ptr(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        ptr(&br),
        ptr(&again),
        "compressed once, then served from the cache"
    );
    assert_eq!(header(&br, "etag"), header(&again, "etag"));

    let gz = s
        .files
        .respond(&with_accept("/site.css", Some("gzip;q=1, br;q=0")));
    assert_eq!(header(&gz, "content-encoding"), Some("gzip"));
    assert_ne!(
        header(&gz, "etag"),
        header(&br, "etag"),
        "an ETag per coding"
    );
    for accept in [
        None,
        Some("identity"),
        Some("br;q=0, gzip;q=0, zstd;q=0"),
        Some("*;q=0"),
    ] {
        let plain = s.files.respond(&with_accept("/site.css", accept));
        assert_eq!(header(&plain, "content-encoding"), None, "{accept:?}");
        assert_eq!(body(&plain), CSS.repeat(100).as_bytes());
        assert_eq!(header(&plain, "vary"), Some("Accept-Encoding"));
    }
    // Too small, or not a compressible type: sent as they are, with no Vary.
    for path in ["/tiny.css", "/photo.jpg"] {
        let r = s.files.respond(&with_accept(path, Some("br, gzip")));
        assert_eq!(header(&r, "content-encoding"), None, "{path}");
        assert_eq!(header(&r, "vary"), None, "{path}");
    }
}

/// A coding made for a request is a miss of its own entry, though the file was cached:
/// the exchange is then timed and counted as one.
#[test]
fn a_coding_compressed_for_this_request_is_a_miss() {
    let s = compressing_site(|p| std::fs::write(p.join("site.css"), CSS.repeat(100)).unwrap());
    let get_with = |accept| s.files.respond(&with_accept("/site.css", accept));
    assert!(!get_with(None).cache_hit, "the file's first read");
    assert!(get_with(None).cache_hit);
    let br = get_with(Some("br"));
    assert_eq!(header(&br, "content-encoding"), Some("br"));
    assert!(!br.cache_hit, "compressed for this request");
    assert!(get_with(Some("br")).cache_hit, "then from the cache");
}

#[test]
fn sidecars_win_over_on_the_fly_compression_and_changes_recompress() {
    let s = compressing_site(|p| {
        std::fs::write(p.join("app.js"), CSS.repeat(100)).unwrap();
        std::fs::write(p.join("app.js.gz"), "PRECOMPRESSED").unwrap();
        std::fs::write(p.join("site.css"), CSS.repeat(100)).unwrap();
    });
    let gz = s.files.respond(&with_accept("/app.js", Some("gzip")));
    assert_eq!(
        body(&gz),
        b"PRECOMPRESSED",
        "the sidecar, not a second compression"
    );
    let br = s.files.respond(&with_accept("/app.js", Some("br")));
    assert_eq!(
        header(&br, "content-encoding"),
        Some("br"),
        "other codings still on the fly"
    );

    let first = s.files.respond(&with_accept("/site.css", Some("br")));
    std::fs::write(s.dir.path().join("site.css"), CSS.repeat(200)).unwrap();
    std::thread::sleep(Duration::from_millis(80));
    let second = s.files.respond(&with_accept("/site.css", Some("br")));
    assert_ne!(header(&first, "etag"), header(&second, "etag"));
    assert!(!second.body.is_empty());
}
