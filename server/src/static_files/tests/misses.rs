//! What a path that names nothing tries: its `.html` page, then a single-page app's
//! shell; and nothing else changes.

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

fn shell(path: &str) -> Misses {
    Misses {
        html_extension: false,
        fallback: Some(clean(path).into_owned()),
    }
}

fn fallback_get(s: &Site, path: &str, shell_path: &str) -> Reply {
    s.files
        .respond_or_try(&get(path), &clean(path), &shell(shell_path))
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
        .respond_or_try(&head, &clean("/app/settings"), &shell("/app/index.html"));
    assert_eq!(r.status, StatusCode::OK);
}

#[test]
fn what_exists_or_is_refused_is_answered_as_without_a_fallback() {
    let s = site(app);
    let shell_path = "/app/index.html";
    assert_eq!(
        body(&fallback_get(&s, "/app/main.js", shell_path)),
        b"render()"
    );
    assert_eq!(
        body(&fallback_get(&s, "/a.txt", shell_path)),
        TEXT.as_bytes()
    );
    // A folder without an index stays refused, and a folder without its slash redirects.
    assert_eq!(
        fallback_get(&s, "/empty/", shell_path).status,
        StatusCode::FORBIDDEN
    );
    let r = fallback_get(&s, "/docs", shell_path);
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(header(&r, "location"), Some("/docs/"));
    assert_eq!(
        fallback_get(&s, "/outside", shell_path).status,
        StatusCode::FORBIDDEN
    );
    // "/a.txt/" names no directory: absent, so the shell.
    assert_eq!(
        body(&fallback_get(&s, "/a.txt/", shell_path)),
        b"<div id=app></div>"
    );
    // Only GET and HEAD fall back: a POST to a client-side route is not the shell's.
    let mut post = get("/app/settings");
    post.method = Method::POST;
    let r = s
        .files
        .respond_or_try(&post, &clean("/app/settings"), &shell(shell_path));
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
    let shell_path = "/app/index.html";
    let direct = s.files.respond(&get(shell_path));
    let etag = header(&direct, "etag").unwrap().to_owned();
    let routed = fallback_get(&s, "/app/settings", shell_path);
    assert_eq!(header(&routed, "etag"), Some(etag.as_str()));
    assert_eq!(
        header(&routed, "last-modified"),
        header(&direct, "last-modified")
    );
    let mut req = get("/app/profile");
    req.preconditions.if_none_match = Some(etag.as_bytes());
    let r = s
        .files
        .respond_or_try(&req, &clean("/app/profile"), &shell(shell_path));
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    let mut req = get("/app/profile");
    req.range = Some(b"bytes=0-3");
    let r = s
        .files
        .respond_or_try(&req, &clean("/app/profile"), &shell(shell_path));
    assert_eq!(r.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(body(&r), b"<div");
}

#[test]
fn a_file_created_later_is_served_instead_of_the_shell() {
    let s = site(app);
    let shell_path = "/app/index.html";
    assert_eq!(
        body(&fallback_get(&s, "/app/late.js", shell_path)),
        b"<div id=app></div>"
    );
    std::fs::write(s.dir.path().join("app/late.js"), "late()").unwrap();
    assert_eq!(
        body(&fallback_get(&s, "/app/late.js", shell_path)),
        b"late()"
    );
}

fn pages(p: &Path) {
    app(p);
    std::fs::write(p.join("about.html"), "about page").unwrap();
    // A static export's page beside the folder of its sub-pages.
    std::fs::write(p.join("blog.html"), "blog page").unwrap();
    std::fs::create_dir(p.join("blog")).unwrap();
    std::fs::write(p.join("blog/first.html"), "first post").unwrap();
}

fn pretty_get(s: &Site, path: &str, fallback: Option<&str>) -> Reply {
    let misses = Misses {
        html_extension: true,
        fallback: fallback.map(|f| clean(f).into_owned()),
    };
    s.files.respond_or_try(&get(path), &clean(path), &misses)
}

#[test]
fn a_page_is_found_by_its_name_without_html() {
    let s = site(pages);
    assert_eq!(body(&pretty_get(&s, "/about", None)), b"about page");
    assert_eq!(body(&pretty_get(&s, "/blog/first", None)), b"first post");
    // The page wins over the folder's redirect, as try_files $uri $uri.html $uri/.
    assert_eq!(body(&pretty_get(&s, "/blog", None)), b"blog page");
    // Without a page, the folder still redirects, and the file itself is served as is.
    let r = pretty_get(&s, "/docs", None);
    assert_eq!(header(&r, "location"), Some("/docs/"));
    assert_eq!(body(&pretty_get(&s, "/about.html", None)), b"about page");
    assert_eq!(body(&pretty_get(&s, "/a.txt", None)), TEXT.as_bytes());
    // Not for a path ending in '/': that would look for "/about/.html".
    assert_eq!(
        pretty_get(&s, "/about/", None).status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        pretty_get(&s, "/nothing", None).status,
        StatusCode::NOT_FOUND
    );
    // Then the shell, for what has no page either.
    assert_eq!(
        body(&pretty_get(&s, "/nothing", Some("/app/index.html"))),
        b"<div id=app></div>"
    );
    assert_eq!(
        body(&pretty_get(&s, "/about", Some("/app/index.html"))),
        b"about page"
    );
}

#[test]
fn a_page_answers_conditionals_as_itself() {
    let s = site(pages);
    let direct = s.files.respond(&get("/about.html"));
    let pretty = pretty_get(&s, "/about", None);
    assert_eq!(header(&pretty, "etag"), header(&direct, "etag"));
    let mut req = get("/about");
    req.preconditions.if_none_match = header(&direct, "etag").map(str::as_bytes);
    let misses = Misses {
        html_extension: true,
        fallback: None,
    };
    let r = s.files.respond_or_try(&req, &clean("/about"), &misses);
    assert_eq!(r.status, StatusCode::NOT_MODIFIED);
    assert_eq!(
        header(&pretty, "content-type"),
        Some("text/html; charset=utf-8")
    );
}

#[test]
fn a_fallback_that_serves_no_file_is_told_apart_for_the_load_time_warning() {
    let s = site(app);
    let why = |p: &str| s.files.serves_no_file(&clean(p));
    assert_eq!(why("/app/index.html"), None);
    assert_eq!(why("/app/"), None, "a folder's index");
    assert_eq!(
        why("/app/typo.html").as_deref(),
        Some("names no file under the root")
    );
    assert_eq!(
        why("/app").as_deref(),
        Some("names a folder: end it with '/' to serve the folder's index")
    );
    assert_eq!(
        why("/empty/").as_deref(),
        Some("names a folder without an index file")
    );
    assert!(why("/outside").unwrap().starts_with("is refused"));
}

fn odd_pages(p: &Path) {
    pages(p);
    // `/.well-known` plus .html is a hidden name, served by no request.
    std::fs::write(p.join(".well-known.html"), "hidden").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", p.join("secret.html")).unwrap();
    std::fs::create_dir(p.join("folder.html")).unwrap();
}

#[test]
fn a_page_that_is_hidden_refused_or_a_folder_is_not_served() {
    let s = site(odd_pages);
    let shell = Some("/app/index.html");
    for path in ["/.well-known", "/secret", "/folder"] {
        assert_eq!(
            pretty_get(&s, path, None).status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
        assert_eq!(
            body(&pretty_get(&s, path, shell)),
            b"<div id=app></div>",
            "{path}"
        );
    }
    // A folder without its page still redirects rather than getting the shell.
    let r = pretty_get(&s, "/docs", shell);
    assert_eq!(r.status, StatusCode::MOVED_PERMANENTLY);
    // With hidden files served, the hidden page is too.
    let open = site_with(
        StaticOptions {
            allow_hidden: true,
            ..default_options()
        },
        CacheSettings::default(),
        odd_pages,
    );
    assert_eq!(body(&pretty_get(&open, "/.well-known", None)), b"hidden");
}

#[test]
fn a_page_or_shell_counts_as_the_cached_file_it_is() {
    let s = site(pages);
    let shell = Some("/app/index.html");
    // The first answer reads the file; the next ones come from the cache.
    assert!(!pretty_get(&s, "/about", None).cache_hit);
    assert!(pretty_get(&s, "/about", None).cache_hit);
    assert!(!pretty_get(&s, "/route", shell).cache_hit);
    assert!(pretty_get(&s, "/route", shell).cache_hit);
}
