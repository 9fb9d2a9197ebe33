//! The file cache: descriptors kept, no I/O on a hit, revalidation, bounds in bytes and files.

use super::*;

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

/// A sidecar that stats but cannot be served (here a link out of the root, which the
/// open refuses) is left out, and revalidation agrees with the loader: the file is not
/// read again at every interval as if it had changed.
#[test]
fn a_sidecar_that_cannot_be_opened_is_left_out_without_reloading_the_file_each_time() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("a.txt.gz"), "OUTSIDE").unwrap();
    let target = outside.path().join("a.txt.gz");
    let s = site_revalidating(Duration::from_millis(50), |p| {
        basic(p);
        std::os::unix::fs::symlink(&target, p.join("a.txt.gz")).unwrap();
    });
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

/// A directory served by its second index file (`index.htm`) switches to the first
/// (`index.html`) once that appears, at the next revalidation, for the root and a folder.
#[test]
fn an_index_file_tried_first_that_appears_later_is_served_after_the_interval() {
    let s = site_revalidating(Duration::from_millis(50), |p| {
        std::fs::write(p.join("index.htm"), "old root").unwrap();
        std::fs::create_dir(p.join("docs")).unwrap();
        std::fs::write(p.join("docs/index.htm"), "old docs").unwrap();
    });
    for (path, old) in [("/", "old root"), ("/docs/", "old docs")] {
        assert_eq!(body(&s.files.respond(&get(path))), old.as_bytes());
        assert!(s.files.respond(&get(path)).cache_hit);
    }
    std::fs::write(s.dir.path().join("index.html"), "new root").unwrap();
    std::fs::write(s.dir.path().join("docs/index.html"), "new docs").unwrap();
    std::thread::sleep(Duration::from_millis(80));
    for (path, new) in [("/", "new root"), ("/docs/", "new docs")] {
        let r = s.files.respond(&get(path));
        assert_eq!(body(&r), new.as_bytes(), "{path}");
        assert!(!r.cache_hit);
        // A later index (index.htm still there) does not make index.html reload each time.
        std::thread::sleep(Duration::from_millis(80));
        assert!(s.files.respond(&get(path)).cache_hit, "{path}");
    }
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
