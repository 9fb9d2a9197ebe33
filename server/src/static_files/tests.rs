//! Handler tests without sockets: build a tree, call `respond`, inspect the Reply.

use super::*;
use crate::cache::CacheSettings;
use crate::fs::open::Root;
use std::path::Path;
use std::time::{Duration, SystemTime};

struct Site {
    dir: tempfile::TempDir,
    files: StaticFiles,
}

fn site_with(options: StaticOptions, cache: CacheSettings, setup: impl FnOnce(&Path)) -> Site {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let root = Arc::new(CacheRoot {
        id: 1,
        root: Root::open(dir.path(), false).unwrap(),
        index_files: vec!["index.html".into(), "index.htm".into()],
    });
    Site {
        files: StaticFiles::new(Arc::new(FileCache::new(cache)), root, options),
        dir,
    }
}

/// The basic site, its cache re-checking files every `revalidate`.
fn basic_site_revalidating(revalidate: Duration) -> Site {
    site_with(
        default_options(),
        CacheSettings {
            revalidate,
            ..CacheSettings::default()
        },
        basic,
    )
}

fn default_options() -> StaticOptions {
    StaticOptions {
        allow_hidden: false,
        listing: false,
        cache_control: Some(HeaderValue::from_static("public, max-age=60")),
        compression: None,
    }
}

fn site(setup: impl FnOnce(&Path)) -> Site {
    site_with(default_options(), CacheSettings::default(), setup)
}

fn get(path: &str) -> RequestHead<'_> {
    RequestHead {
        method: Method::GET,
        target: path,
        path,
        ..Default::default()
    }
}

fn header<'r>(r: &'r Reply, name: &str) -> Option<&'r str> {
    r.header_fields()
        .find(|(n, _)| n.as_str() == name)
        .map(|(_, v)| v.to_str().unwrap())
}

fn body(r: &Reply) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let read = |f: &FileSlice| {
        let mut v = vec![0; f.len as usize];
        f.file.read_exact_at(&mut v, f.offset).unwrap();
        v
    };
    match &r.body {
        Body::Empty => vec![],
        Body::Bytes(b) => b.to_vec(),
        Body::File(f) => read(f),
        Body::Mirrored(b, f) => {
            assert_eq!(b.to_vec(), read(f), "both copies agree");
            b.to_vec()
        }
        Body::Parts(parts) => parts
            .iter()
            .flat_map(|p| match p {
                Part::Bytes(b) => b.to_vec(),
                Part::File(f) => read(f),
            })
            .collect(),
    }
}

const TEXT: &str = "0123456789abcdefghijklmnopqrstuvwxyz";

fn basic(p: &Path) {
    std::fs::write(p.join("a.txt"), TEXT).unwrap();
    std::fs::create_dir(p.join("docs")).unwrap();
    std::fs::write(p.join("docs/index.html"), "<h1>docs</h1>").unwrap();
    std::fs::create_dir(p.join("empty")).unwrap();
    std::fs::write(p.join(".env"), "SECRET=1").unwrap();
}

#[test]
fn serves_a_file_with_representation_headers() {
    let s = site(basic);
    let r = s.files.respond(&get("/a.txt"));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(body(&r), TEXT.as_bytes());
    assert_eq!(
        header(&r, "content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(header(&r, "accept-ranges"), Some("bytes"));
    assert_eq!(header(&r, "cache-control"), Some("public, max-age=60"));
    let etag = header(&r, "etag").unwrap();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && !etag.starts_with("W/"),
        "strong etag: {etag}"
    );
    assert!(header(&r, "last-modified").unwrap().ends_with(" GMT"));
    assert!(header(&r, "vary").is_none(), "no sidecars, no Vary");
}

#[test]
fn directories_redirect_index_and_listing() {
    let s = site(basic);
    let r = s.files.respond(&RequestHead {
        query: Some("x=1"),
        ..get("/docs")
    });
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&r, "location"), Some("/docs/?x=1"));
    // The redirect is built from the cleaned path: never a scheme-relative URL.
    let r = s.files.respond(&get("//evil.example/../docs"));
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&r, "location"), Some("/docs/"));
    let r = s.files.respond(&get("/docs/"));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(body(&r), b"<h1>docs</h1>");
    assert_eq!(header(&r, "content-type"), Some("text/html; charset=utf-8"));
    // Listing is off by default.
    assert_eq!(
        s.files.respond(&get("/empty/")).status,
        StatusCode::FORBIDDEN
    );
    let listing = site_with(
        StaticOptions {
            listing: true,
            ..default_options()
        },
        CacheSettings::default(),
        basic,
    );
    let r = listing.files.respond(&get("/"));
    assert_eq!(r.status, StatusCode::OK);
    let html = String::from_utf8(body(&r)).unwrap();
    assert!(
        html.contains("a.txt") && html.contains("docs/") && !html.contains(".env"),
        "{html}"
    );
}

#[test]
fn missing_hidden_and_bad_paths() {
    let s = site(basic);
    assert_eq!(
        s.files.respond(&get("/nope.txt")).status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        s.files.respond(&get("/a.txt/")).status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(s.files.respond(&get("/.env")).status, StatusCode::NOT_FOUND);
    assert_eq!(
        s.files.respond(&get("/../etc/passwd")).status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.files.respond(&get("/a.txt%00.html")).status,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        s.files.respond(&get("/docs%2findex.html")).status,
        StatusCode::BAD_REQUEST
    );
}

#[test]
fn symlinks_out_of_root_are_refused_inside_ones_served() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "top secret").unwrap();
    let target = outside.path().join("secret");
    let s = site(|p| {
        basic(p);
        std::os::unix::fs::symlink(&target, p.join("escape")).unwrap();
        std::os::unix::fs::symlink("/etc", p.join("etc")).unwrap();
        std::os::unix::fs::symlink("a.txt", p.join("alias.txt")).unwrap();
    });
    assert_eq!(
        s.files.respond(&get("/escape")).status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        s.files.respond(&get("/etc/passwd")).status,
        StatusCode::FORBIDDEN
    );
    let r = s.files.respond(&get("/alias.txt"));
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(body(&r), TEXT.as_bytes());
}

#[test]
fn methods() {
    let s = site(basic);
    let r = s.files.respond(&RequestHead {
        method: Method::OPTIONS,
        ..get("/a.txt")
    });
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(header(&r, "allow"), Some("GET, HEAD, OPTIONS"));
    let r = s.files.respond(&RequestHead {
        method: Method::DELETE,
        ..get("/a.txt")
    });
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(header(&r, "allow"), Some("GET, HEAD, OPTIONS"));
    let r = s.files.respond(&RequestHead {
        method: Method::HEAD,
        ..get("/a.txt")
    });
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.body.len(),
        TEXT.len() as u64,
        "HEAD keeps the length for Content-Length"
    );
}

#[test]
fn conditional_requests() {
    let s = site(basic);
    let first = s.files.respond(&get("/a.txt"));
    let etag = header(&first, "etag").unwrap().to_owned();
    let lm = header(&first, "last-modified").unwrap().to_owned();

    let mut req = get("/a.txt");
    req.preconditions.if_none_match = Some(etag.as_bytes());
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    assert_eq!(header(&r, "etag"), Some(etag.as_str()));
    assert_eq!(header(&r, "cache-control"), Some("public, max-age=60"));
    assert!(r.body.is_empty());

    let mut req = get("/a.txt");
    req.preconditions.if_modified_since = Some(lm.as_bytes());
    assert_eq!(s.files.respond(&req).status, StatusCode::NOT_MODIFIED);

    let mut req = get("/a.txt");
    req.preconditions.if_match = Some(b"\"something-else\"");
    assert_eq!(
        s.files.respond(&req).status,
        StatusCode::PRECONDITION_FAILED
    );

    let mut req = get("/a.txt");
    req.preconditions.if_unmodified_since = Some(b"Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(
        s.files.respond(&req).status,
        StatusCode::PRECONDITION_FAILED
    );

    let mut req = get("/a.txt");
    req.preconditions.if_match = Some(etag.as_bytes());
    assert_eq!(s.files.respond(&req).status, StatusCode::OK);
}

#[test]
fn ranges_single_multi_suffix_and_unsatisfiable() {
    let s = site(basic);
    let mut req = get("/a.txt");
    req.range = Some(b"bytes=2-5");
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(body(&r), b"2345");
    assert_eq!(header(&r, "content-range"), Some("bytes 2-5/36"));

    req.range = Some(b"bytes=-3");
    assert_eq!(body(&s.files.respond(&req)), b"xyz");
    req.range = Some(b"bytes=33-");
    assert_eq!(body(&s.files.respond(&req)), b"xyz");

    req.range = Some(b"bytes=0-1,10-11");
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::PARTIAL_CONTENT);
    let ctype = header(&r, "content-type").unwrap().to_owned();
    let boundary = ctype
        .strip_prefix("multipart/byteranges; boundary=")
        .unwrap();
    let text = String::from_utf8(body(&r)).unwrap();
    assert_eq!(
        text,
        format!(
            "\r\n--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 0-1/36\r\n\r\n01\
             \r\n--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 10-11/36\r\n\r\nab\
             \r\n--{boundary}--\r\n"
        )
    );

    req.range = Some(b"bytes=100-");
    let r = s.files.respond(&req);
    assert_eq!(r.status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(header(&r, "content-range"), Some("bytes */36"));

    // HEAD ignores Range, as does a failed If-Range.
    req.range = Some(b"bytes=0-1");
    req.method = Method::HEAD;
    assert_eq!(s.files.respond(&req).status, StatusCode::OK);
    req.method = Method::GET;
    req.if_range = Some(b"\"stale\"");
    assert_eq!(s.files.respond(&req).status, StatusCode::OK);
    let etag = header(&s.files.respond(&get("/a.txt")), "etag")
        .unwrap()
        .to_owned();
    req.if_range = Some(etag.as_bytes());
    assert_eq!(s.files.respond(&req).status, StatusCode::PARTIAL_CONTENT);
}

#[test]
fn large_files_are_served_from_an_open_descriptor() {
    let big = vec![7u8; 300 * 1024];
    let s = site(|p| std::fs::write(p.join("big.bin"), &big).unwrap());
    let r = s.files.respond(&get("/big.bin"));
    assert!(
        matches!(r.body, Body::File(_)),
        "over the threshold: a file body for sendfile"
    );
    assert_eq!(body(&r).len(), big.len());
    let mut req = get("/big.bin");
    req.range = Some(b"bytes=1000-1009");
    let r = s.files.respond(&req);
    assert!(matches!(&r.body, Body::File(f) if f.offset == 1000 && f.len == 10));
}

fn set_mtime(path: &Path, t: SystemTime) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(t).unwrap();
}

#[test]
fn mid_size_cached_files_keep_a_descriptor_for_sendfile() {
    let s = site(|p| {
        std::fs::write(p.join("small.txt"), vec![b'a'; 1024]).unwrap();
        std::fs::write(p.join("mid.bin"), vec![b'b'; 100 * 1024]).unwrap();
    });
    assert!(matches!(
        s.files.respond(&get("/small.txt")).body,
        Body::Bytes(_)
    ));
    let r = s.files.respond(&get("/mid.bin"));
    assert!(matches!(r.body, Body::Mirrored(..)));
    assert_eq!(body(&r), vec![b'b'; 100 * 1024]);
    assert!(s.files.respond(&get("/mid.bin")).cache_hit);
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

#[test]
fn cache_hit_does_no_file_io() {
    // With a long revalidation interval, a hit must not read the disk: rewriting the
    // file in place (same inode) is invisible until revalidation.
    let s = basic_site_revalidating(Duration::from_secs(3600));
    let first = s.files.respond(&get("/a.txt"));
    assert!(!first.cache_hit);
    std::fs::write(s.dir.path().join("a.txt"), "changed").unwrap();
    let second = s.files.respond(&get("/a.txt"));
    assert!(second.cache_hit);
    assert_eq!(body(&second), TEXT.as_bytes());
}

/// A Unix socket in the root (whose open fails with ENXIO) is refused as a FIFO is, not
/// answered 500 with a warning per request.
#[test]
fn a_socket_in_the_root_is_forbidden() {
    let s = site(|p| {
        basic(p);
        // The socket file stays when the listener closes, and still refuses an open.
        drop(std::os::unix::net::UnixListener::bind(p.join("app.sock")).unwrap());
    });
    assert_eq!(
        s.files.respond(&get("/app.sock")).status,
        StatusCode::FORBIDDEN
    );
}

/// A sidecar that stats but cannot be served (here a link out of the root, which the
/// open refuses) is left out, and revalidation agrees with the loader: the file is not
/// read again at every interval as if it had changed.
#[test]
fn a_sidecar_that_cannot_be_opened_is_left_out_without_reloading_the_file_each_time() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("a.txt.gz"), "OUTSIDE").unwrap();
    let target = outside.path().join("a.txt.gz");
    let s = site_with(
        default_options(),
        CacheSettings {
            revalidate: Duration::from_millis(50),
            ..CacheSettings::default()
        },
        |p| {
            basic(p);
            std::os::unix::fs::symlink(&target, p.join("a.txt.gz")).unwrap();
        },
    );
    let mut req = get("/a.txt");
    req.accept_encoding = Some(b"gzip");
    let first = s.files.respond(&req);
    assert_eq!(body(&first), TEXT.as_bytes(), "the link out is not served");
    assert_eq!(header(&first, "content-encoding"), None);
    std::thread::sleep(Duration::from_millis(80));
    let again = s.files.respond(&req);
    assert_eq!(body(&again), TEXT.as_bytes());
    assert!(again.cache_hit, "revalidated, not read again");
}

#[test]
fn changed_and_deleted_files_are_noticed_after_the_interval() {
    let s = basic_site_revalidating(Duration::from_millis(50));
    assert_eq!(body(&s.files.respond(&get("/a.txt"))), TEXT.as_bytes());
    std::fs::write(s.dir.path().join("a.txt"), "changed!").unwrap();
    std::thread::sleep(Duration::from_millis(80));
    let r = s.files.respond(&get("/a.txt"));
    assert_eq!(body(&r), b"changed!");
    assert!(!r.cache_hit, "reloaded after the change");
    assert!(s.files.respond(&get("/a.txt")).cache_hit);

    std::fs::remove_file(s.dir.path().join("a.txt")).unwrap();
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(
        s.files.respond(&get("/a.txt")).status,
        StatusCode::NOT_FOUND
    );
}

/// Each worker keeps recent entries in a front of its own: a change another worker found
/// retires the entry there too, though that worker's revalidation marked it checked now.
#[test]
fn a_change_found_on_one_thread_is_served_on_every_thread() {
    let s = basic_site_revalidating(Duration::from_millis(50));
    let files = &s.files;
    let on_other_thread = |expected: &[u8]| {
        std::thread::scope(|scope| {
            scope
                .spawn(|| assert_eq!(body(&files.respond(&get("/a.txt"))), expected))
                .join()
                .unwrap()
        })
    };
    assert_eq!(body(&files.respond(&get("/a.txt"))), TEXT.as_bytes());
    assert!(files.respond(&get("/a.txt")).cache_hit);
    on_other_thread(TEXT.as_bytes());
    std::fs::write(s.dir.path().join("a.txt"), "changed!").unwrap();
    std::thread::sleep(Duration::from_millis(80));
    on_other_thread(b"changed!");
    let r = files.respond(&get("/a.txt"));
    assert_eq!(
        body(&r),
        b"changed!",
        "the old entry was served from this thread's front"
    );
    assert!(r.cache_hit, "the other thread's reload is shared");
}

#[test]
fn cache_is_bounded_in_bytes() {
    let s = site_with(
        default_options(),
        CacheSettings {
            max_file_size: 64 * 1024,
            max_bytes: 256 * 1024,
            revalidate: Duration::from_secs(60),
            ..CacheSettings::default()
        },
        |p| {
            for i in 0..40 {
                std::fs::write(p.join(format!("f{i}.bin")), vec![i as u8; 60 * 1024]).unwrap();
            }
        },
    );
    for i in 0..40 {
        assert_eq!(
            s.files.respond(&get(&format!("/f{i}.bin"))).status,
            StatusCode::OK
        );
    }
    assert!(
        s.files.cache().weight() <= 256 * 1024,
        "weight {}",
        s.files.cache().weight()
    );
}

/// Files too large to hold in memory keep only a descriptor, which the budget charges as
/// 4 KiB: a walk over many such files leaves a bounded number of them open.
#[test]
fn open_descriptors_are_bounded_by_the_budget() {
    let s = site_with(
        default_options(),
        CacheSettings {
            max_file_size: 1024,
            max_bytes: 64 * 1024,
            revalidate: Duration::from_secs(60),
            ..CacheSettings::default()
        },
        |p| {
            for i in 0..100 {
                std::fs::write(p.join(format!("f{i}.bin")), vec![1u8; 2048]).unwrap();
            }
        },
    );
    for i in 0..100 {
        let r = s.files.respond(&get(&format!("/f{i}.bin")));
        assert_eq!(r.status, StatusCode::OK);
    }
    let held = s.files.cache().len();
    assert!(held <= 64 * 1024 / 4096, "{held} files held open");
}

/// A file of `max_file_size` is kept whatever the CPU count: quick_cache splits the budget
/// into shards and silently refuses an entry heavier than one shard's part, so with its
/// default of 4 shards per CPU a file of half the budget was read again on every request.
#[test]
fn a_file_of_the_largest_size_is_kept_in_the_cache() {
    let s = site_with(
        default_options(),
        CacheSettings {
            max_file_size: 1024 * 1024,
            max_bytes: 2 * 1024 * 1024 + 4096,
            revalidate: Duration::from_secs(60),
            ..CacheSettings::default()
        },
        |p| std::fs::write(p.join("big.bin"), vec![7u8; 1024 * 1024]).unwrap(),
    );
    assert_eq!(s.files.respond(&get("/big.bin")).status, StatusCode::OK);
    assert!(
        s.files.cache().weight() >= 1024 * 1024,
        "the file was not kept: weight {}",
        s.files.cache().weight()
    );
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
