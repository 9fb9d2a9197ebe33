//! Directory listing: an HTML page, entries sorted by name, names escaped for HTML and
//! percent-encoded in links. Off by default.

use crate::fs::open::Root;
use std::fmt::Write;
use std::io;

/// Entries read for one page: the page is built on the worker thread, per request, and a
/// directory of a million files would otherwise be a 60 MB page each time.
const MAX_LISTED: usize = 10_000;

pub fn render(root: &Root, rel: &str, url_path: &str, allow_hidden: bool) -> io::Result<String> {
    render_at_most(root, rel, url_path, allow_hidden, MAX_LISTED)
}

fn render_at_most(
    root: &Root,
    rel: &str,
    url_path: &str,
    allow_hidden: bool,
    max: usize,
) -> io::Result<String> {
    let dir = root.open_file(rel)?;
    let mut entries: Vec<(String, bool)> = Vec::new();
    let (mut read, mut more) = (0, false);
    for item in rustix::fs::Dir::read_from(&dir).map_err(io::Error::from)? {
        let item = item.map_err(io::Error::from)?;
        let name = item.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        // Hidden entries count as read: a directory of dotfiles is bounded too.
        read += 1;
        if read > max {
            more = true;
            break;
        }
        if !allow_hidden && name.starts_with('.') {
            continue;
        }
        let is_dir = item.file_type() == rustix::fs::FileType::Directory;
        entries.push((name, is_dir));
    }
    entries.sort();
    let title = escape_html(url_path);
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<ul>\n"
    );
    if url_path != "/" {
        html.push_str("<li><a href=\"../\">../</a></li>\n");
    }
    for (name, is_dir) in &entries {
        let slash = if *is_dir { "/" } else { "" };
        let _ = writeln!(
            html,
            "<li><a href=\"{}{slash}\">{}{slash}</a></li>",
            encode_href(name),
            escape_html(name)
        );
    }
    html.push_str("</ul>\n");
    if more {
        let _ = writeln!(
            html,
            "<p>This directory holds more than the {max} entries a page reads: not all are listed.</p>"
        );
    }
    html.push_str("</body></html>\n");
    Ok(html)
}

pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes everything but unreserved characters, so a name is always one path segment.
fn encode_href(name: &str) -> String {
    skiff_http::path::percent_encode(name, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_encodes() {
        assert_eq!(
            escape_html("<a href='x'>&\""),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;"
        );
        assert_eq!(encode_href("a b/<c>?.txt"), "a%20b%2F%3Cc%3E%3F.txt");
    }

    #[test]
    fn lists_sorted_and_escaped_without_hidden_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.txt"), "b").unwrap();
        std::fs::write(dir.path().join("<script>.html"), "x").unwrap();
        std::fs::write(dir.path().join(".secret"), "x").unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        let root = Root::open(dir.path(), false).unwrap();
        let html = render(&root, ".", "/", false).unwrap();
        let a = html.find(">a/<").unwrap();
        let b = html.find(">b.txt<").unwrap();
        let s = html.find("&lt;script&gt;.html").unwrap();
        assert!(s < a && a < b, "sorted by name: {html}");
        assert!(!html.contains("secret"));
        assert!(html.contains("href=\"%3Cscript%3E.html\""));
        assert!(!html.contains("<script>"));
    }

    #[test]
    fn a_large_directory_lists_a_bounded_number_of_entries_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("f{i}")), "x").unwrap();
        }
        let root = Root::open(dir.path(), false).unwrap();
        let html = render_at_most(&root, ".", "/", false, 3).unwrap();
        assert_eq!(html.matches("<li>").count(), 3, "{html}");
        assert!(html.contains("more than the 3 entries a page reads"));
        let all = render_at_most(&root, ".", "/", false, 5).unwrap();
        assert_eq!(all.matches("<li>").count(), 5);
        assert!(!all.contains("more than the"));
    }
}
