//! `skiff copy-tree SRC DST`: copies a folder tree (files, folders, symlinks, modes), or
//! one file. It lets a content image with no shell (`FROM scratch`) fill a pod's emptyDir:
//! an init container copies this binary out of the skiff image (the one-file form), and
//! another runs the content image with that copy as its command.

use std::fs;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Copied {
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
}

/// Copies the contents of `src` into `dst` (created if missing), or, when `src` is a
/// regular file, that file to `dst` with its mode. Existing files are replaced; symlinks
/// are copied as links, never followed, so a link cannot pull in files from outside the
/// source tree.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<Copied> {
    let meta = fs::symlink_metadata(src)?;
    let mut copied = Copied::default();
    if meta.is_file() {
        copied.bytes = fs::copy(src, dst)?;
        copied.files = 1;
        return Ok(copied);
    }
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is neither a folder nor a regular file", src.display()),
        ));
    }
    fs::create_dir_all(dst)?;
    walk(src, dst, &mut copied)?;
    Ok(copied)
}

fn walk(src: &Path, dst: &Path, copied: &mut Copied) -> io::Result<()> {
    let mut entries: Vec<_> = fs::read_dir(src)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            let target = fs::read_link(&from)?;
            if fs::symlink_metadata(&to).is_ok() {
                fs::remove_file(&to)?;
            }
            symlink(target, &to)?;
            copied.symlinks += 1;
        } else if kind.is_dir() {
            fs::create_dir_all(&to)?;
            fs::set_permissions(
                &to,
                fs::Permissions::from_mode(entry.metadata()?.permissions().mode() & 0o7777),
            )?;
            copied.dirs += 1;
            walk(&from, &to, copied)?;
        } else if kind.is_file() {
            copied.bytes += fs::copy(&from, &to)?;
            copied.files += 1;
        }
        // Sockets, FIFOs and devices have no place in static content: skipped.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_folders_links_and_modes() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let s = src.path();
        fs::create_dir_all(s.join("css/deep")).unwrap();
        fs::write(s.join("index.html"), "home").unwrap();
        fs::write(s.join("css/deep/a.css"), "a{}").unwrap();
        fs::write(s.join("run.sh"), "#!").unwrap();
        fs::set_permissions(s.join("run.sh"), fs::Permissions::from_mode(0o750)).unwrap();
        symlink("index.html", s.join("alias.html")).unwrap();
        symlink("/etc/passwd", s.join("outside")).unwrap();
        let out = dst.path().join("www");
        let copied = copy_tree(s, &out).unwrap();
        assert_eq!(
            copied,
            Copied {
                files: 3,
                dirs: 2,
                symlinks: 2,
                bytes: 4 + 3 + 2
            }
        );
        assert_eq!(
            fs::read_to_string(out.join("css/deep/a.css")).unwrap(),
            "a{}"
        );
        assert_eq!(
            fs::metadata(out.join("run.sh"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o750
        );
        assert_eq!(
            fs::read_link(out.join("alias.html")).unwrap(),
            Path::new("index.html")
        );
        // A link is copied as a link, not followed: /etc/passwd is not pulled in.
        assert!(fs::symlink_metadata(out.join("outside"))
            .unwrap()
            .file_type()
            .is_symlink());
        // Running again replaces what is there.
        fs::write(s.join("index.html"), "new home").unwrap();
        copy_tree(s, &out).unwrap();
        assert_eq!(
            fs::read_to_string(out.join("index.html")).unwrap(),
            "new home"
        );
    }

    #[test]
    fn copies_one_file_with_its_mode() {
        // The operator's first init container: `/skiff copy-tree /skiff /tools/skiff`.
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let bin = src.path().join("skiff");
        fs::write(&bin, "\x7fELF").unwrap();
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
        let out = dst.path().join("skiff");
        let copied = copy_tree(&bin, &out).unwrap();
        assert_eq!(
            copied,
            Copied {
                files: 1,
                bytes: 4,
                ..Copied::default()
            }
        );
        assert_eq!(fs::read(&out).unwrap(), b"\x7fELF");
        assert_eq!(
            fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            0o755
        );
    }

    #[test]
    fn refuses_a_source_that_is_neither_a_folder_nor_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link");
        symlink("/etc/passwd", &link).unwrap();
        let err = copy_tree(&link, &dir.path().join("out")).unwrap_err();
        assert!(
            err.to_string()
                .contains("neither a folder nor a regular file"),
            "{err}"
        );
        assert!(copy_tree(Path::new("/nonexistent/skiff"), Path::new("/tmp/never")).is_err());
    }
}
