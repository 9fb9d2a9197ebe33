//! A single-page app's fallback: answered for paths that name nothing, and only for them.

use super::*;

fn app(p: &Path) {
    basic(p);
    std::fs::create_dir(p.join("app")).unwrap();
    std::fs::write(p.join("app/index.html"), "<div id=app></div>").unwrap();
    std::fs::write(p.join("app/main.js"), "render()").unwrap();
    // A symlink out of the root is refused (403), not absent.
    std::os::unix::fs::symlink("/etc/hostname", p.join("outside")).unwrap();
}

fn clean(path: &str) -> CleanPath<'_> {
    crate::fs::path::clean_request_path(
        path,
        PathPolicy {
            allow_hidden: false,
        },
    )
    .unwrap()
}

fn fallback_get(s: &Site, path: &str, shell: &str) -> Reply {
    s.files
        .respond_or_fallback(&get(path), &clean(path), &clean(shell))
}

#[test]
fn a_path_that_names_nothing_gets_the_shell() {
    let s = site(app);
    for path in [
        "/app/settings",
        "/app/users/7/edit",
        "/app/gone/",
        "/nowhere",
    ] {
        let r = fallback_get(&s, path, "/app/index.html");
        assert_eq!(r.status, StatusCode::OK, "{path}");
        assert_eq!(body(&r), b"<div id=app></div>", "{path}");
        assert_eq!(header(&r, "content-type"), Some("text/html; charset=utf-8"));
    }
    // A fallback naming a folder serves its index.
    let r = fallback_get(&s, "/app/settings", "/app/");
    assert_eq!(body(&r), b"<div id=app></div>");
    let mut head = get("/app/settings");
    head.method = Method::HEAD;
    let r = s
        .files
        .respond_or_fallback(&head, &clean("/app/settings"), &clean("/app/index.html"));
    assert_eq!(r.status, StatusCode::OK);
}

#[test]
fn what_exists_or_is_refused_is_answered_as_without_a_fallback() {
    let s = site(app);
    let shell = "/app/index.html";
    assert_eq!(body(&fallback_get(&s, "/app/main.js", shell)), b"render()");
    assert_eq!(body(&fallback_get(&s, "/a.txt", shell)), TEXT.as_bytes());
    // A folder without an index stays refused, and a folder without its slash redirects.
    assert_eq!(
        fallback_get(&s, "/empty/", shell).status,
        StatusCode::FORBIDDEN
    );
    let r = fallback_get(&s, "/docs", shell);
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&r, "location"), Some("/docs/"));
    assert_eq!(
        fallback_get(&s, "/outside", shell).status,
        StatusCode::FORBIDDEN
    );
    // "/a.txt/" names no directory: absent, so the shell.
    assert_eq!(
        body(&fallback_get(&s, "/a.txt/", shell)),
        b"<div id=app></div>"
    );
    // Only GET and HEAD fall back: a POST to a client-side route is not the shell's.
    let mut post = get("/app/settings");
    post.method = Method::POST;
    let r = s
        .files
        .respond_or_fallback(&post, &clean("/app/settings"), &clean(shell));
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[test]
fn a_missing_shell_is_a_plain_404() {
    let s = site(app);
    let r = fallback_get(&s, "/app/settings", "/app/missing.html");
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

#[test]
fn the_shell_answers_conditionals_and_ranges_as_itself() {
    let s = site(app);
    let shell = "/app/index.html";
    let direct = s.files.respond(&get(shell));
    let etag = header(&direct, "etag").unwrap().to_owned();
    let routed = fallback_get(&s, "/app/settings", shell);
    assert_eq!(header(&routed, "etag"), Some(etag.as_str()));
    assert_eq!(
        header(&routed, "last-modified"),
        header(&direct, "last-modified")
    );
    let mut req = get("/app/profile");
    req.preconditions.if_none_match = Some(etag.as_bytes());
    let r = s
        .files
        .respond_or_fallback(&req, &clean("/app/profile"), &clean(shell));
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    let mut req = get("/app/profile");
    req.range = Some(b"bytes=0-3");
    let r = s
        .files
        .respond_or_fallback(&req, &clean("/app/profile"), &clean(shell));
    assert_eq!(r.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(body(&r), b"<div");
}

#[test]
fn a_file_created_later_is_served_instead_of_the_shell() {
    let s = site(app);
    let shell = "/app/index.html";
    assert_eq!(
        body(&fallback_get(&s, "/app/late.js", shell)),
        b"<div id=app></div>"
    );
    std::fs::write(s.dir.path().join("app/late.js"), "late()").unwrap();
    assert_eq!(body(&fallback_get(&s, "/app/late.js", shell)), b"late()");
}
