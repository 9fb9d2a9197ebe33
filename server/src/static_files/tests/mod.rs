//! Handler tests without sockets: build a tree, call `respond`, inspect the Reply.

use super::*;
use crate::cache::CacheSettings;
use crate::fs::open::Root;
use std::path::Path;
use std::time::{Duration, SystemTime};

mod caching;
mod compression;
mod misses;
mod serving;

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

/// A site made by `setup`, its cache re-checking files every `revalidate`.
fn site_revalidating(revalidate: Duration, setup: impl FnOnce(&Path)) -> Site {
    site_with(
        default_options(),
        CacheSettings {
            revalidate,
            ..CacheSettings::default()
        },
        setup,
    )
}

/// The basic site, its cache re-checking files every `revalidate`.
fn basic_site_revalidating(revalidate: Duration) -> Site {
    site_revalidating(revalidate, basic)
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
