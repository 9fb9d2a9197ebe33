//! What revalidation compares: the stat keys of a file and of its precompressed sidecars,
//! and for a directory's index file, whether one tried before it has appeared.

use super::StatKey;
use crate::fs::open::Root;
use crate::http::encoding::Encoding;

/// The stat key of a regular file, following links as stat(2) does.
pub(super) fn stat_key(root: &Root, rel: &str) -> Option<StatKey> {
    root.stat(rel)
        .ok()
        .filter(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
        })
        .map(|st| StatKey::of(&st))
}

/// Stat keys of the possible sidecars of `rel`, in [`Encoding::ALL`]'s order; a sidecar
/// older than its original is stale and ignored.
pub(super) fn sidecar_keys(
    root: &Root,
    rel: &str,
    original: Option<StatKey>,
) -> [Option<StatKey>; 3] {
    let mut keys = [None; 3];
    for (i, enc) in Encoding::ALL.iter().enumerate() {
        let side = stat_key(root, &format!("{rel}{}", enc.suffix()));
        keys[i] = side.filter(|s| original.is_some_and(|o| s.mtime_ns >= o.mtime_ns));
    }
    keys
}

/// Stat keys of a file and its possible sidecars.
pub(super) fn fingerprint(root: &Root, rel: &str) -> [Option<StatKey>; 4] {
    let original = stat_key(root, rel);
    let sides = sidecar_keys(root, rel, original);
    [original, sides[0], sides[1], sides[2]]
}

/// The index file `index` of the directory `dir` (`.` for the root).
pub(super) fn index_candidate(dir: &str, index: &str) -> String {
    if dir == "." {
        index.to_owned()
    } else {
        format!("{dir}/{index}")
    }
}

/// Whether `chosen`, served for the directory `dir`, has been overtaken by an index file
/// tried before it that is a regular file now (a site adding `index.html` beside the
/// `index.htm` served). Not an index (`chosen` is `dir` itself): never.
pub(super) fn index_overtaken(
    root: &Root,
    index_files: &[String],
    dir: &str,
    chosen: &str,
) -> bool {
    if chosen == dir {
        return false;
    }
    for index in index_files {
        let candidate = index_candidate(dir, index);
        if candidate == chosen {
            return false;
        }
        if stat_key(root, &candidate).is_some() {
            return true;
        }
    }
    false
}
