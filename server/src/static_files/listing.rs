//! Directory listing: an HTML page, entries sorted by name, names escaped for HTML and
//! percent-encoded in links. Off by default.

use crate::fs::open::Root;
use std::fmt::Write;
use std::io;

pub fn render(root: &Root, rel: &str, url_path: &str, allow_hidden: bool) -> io::Result<String> {
    let dir = root.open_file(rel)?;
    let mut entries: Vec<(String, bool)> = Vec::new();
    for item in rustix::fs::Dir::read_from(&dir).map_err(io::Error::from)? {
        let item = item.map_err(io::Error::from)?;
        let name = item.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." || (!allow_hidden && name.starts_with('.')) {
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
    html.push_str("</ul></body></html>\n");
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
}
