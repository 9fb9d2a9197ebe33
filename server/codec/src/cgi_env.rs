//! The CGI/1.1 environment (RFC 3875) for FastCGI, uwsgi and SCGI backends, with the
//! variables php-fpm and uWSGI expect.

use skiff_http::text::push_decimal;

/// What the environment needs of a request: hyper's parts and the fast path's httparse
/// view both give it, so neither has to be turned into the other.
pub struct CgiRequest<'a, F> {
    pub method: &'a str,
    /// The target in origin form (`/path?query`), as the client sent it.
    pub target: &'a str,
    pub version: http::Version,
    /// The authority of an absolute-form target: the server name when there is no Host.
    pub authority: Option<&'a str>,
    /// The header fields in order; names in any case.
    pub fields: F,
}

impl<'a> CgiRequest<'a, ()> {
    /// The view of hyper's request parts.
    pub fn of_parts(
        parts: &'a http::request::Parts,
    ) -> CgiRequest<'a, impl Iterator<Item = (&'a [u8], &'a [u8])>> {
        CgiRequest {
            method: parts.method.as_str(),
            target: parts.uri.path_and_query().map_or("/", |pq| pq.as_str()),
            version: parts.version,
            authority: parts.uri.authority().map(|a| a.as_str()),
            fields: parts
                .headers
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
        }
    }
}

pub struct CgiContext<'a> {
    /// The decoded, normalized request path.
    pub path: &'a str,
    pub document_root: &'a str,
    /// PHP-style split of `/x.php/extra` (FastCGI); otherwise SCRIPT_NAME is empty and
    /// PATH_INFO is the whole path (the WSGI convention).
    pub php_split: bool,
    pub index: Option<&'a str>,
    pub remote_addr: std::net::SocketAddr,
    pub server_port: u16,
    pub content_length: Option<u64>,
    pub extra: &'a [(String, String)],
    /// Pass header names with `_` (nginx's `underscores_in_headers`). Off by default:
    /// `X_Forwarded_For` and `X-Forwarded-For` both become `HTTP_X_FORWARDED_FOR`, so one
    /// could overwrite the other, or a variable an auth proxy in front sets.
    pub underscores_in_headers: bool,
    /// The request came over TLS: `HTTPS=on` and `REQUEST_SCHEME=https`.
    pub secure: bool,
}

/// CGI variables, stored in one byte buffer with spans: two allocations for the whole
/// environment rather than two per variable.
#[derive(Debug, Default)]
pub struct Env {
    bytes: Vec<u8>,
    /// (name start, name end, value end); a removed variable has name start == usize::MAX.
    spans: Vec<(usize, usize, usize)>,
    /// What the access log wants of the request, as the client sent it.
    logged: Logged,
}

/// Spans (value start, value end) of REQUEST_URI, HTTP_REFERER and HTTP_USER_AGENT.
#[derive(Debug, Default, Clone, Copy)]
struct Logged {
    target: (usize, usize),
    referer: Option<(usize, usize)>,
    user_agent: Option<(usize, usize)>,
}

impl Env {
    pub fn with_capacity(vars: usize) -> Env {
        Env {
            bytes: Vec::with_capacity(vars * 32),
            spans: Vec::with_capacity(vars),
            logged: Logged::default(),
        }
    }

    /// Adds a variable; returns the span of its value.
    pub fn push(&mut self, name: &[u8], value: &[u8]) -> (usize, usize) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(name);
        let mid = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.spans.push((start, mid, self.bytes.len()));
        (mid, self.bytes.len())
    }

    /// Adds a variable whose value `write` appends to the arena (no temporary string).
    fn push_with(&mut self, name: &[u8], write: impl FnOnce(&mut Vec<u8>)) -> (usize, usize) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(name);
        let mid = self.bytes.len();
        write(&mut self.bytes);
        self.spans.push((start, mid, self.bytes.len()));
        (mid, self.bytes.len())
    }

    /// The request target as the client sent it (for the access log), even if a
    /// configured param replaced REQUEST_URI.
    pub fn logged_target(&self) -> &[u8] {
        let (a, b) = self.logged.target;
        &self.bytes[a..b]
    }

    pub fn logged_referer(&self) -> Option<&[u8]> {
        self.logged.referer.map(|(a, b)| &self.bytes[a..b])
    }

    pub fn logged_user_agent(&self) -> Option<&[u8]> {
        self.logged.user_agent.map(|(a, b)| &self.bytes[a..b])
    }

    /// Sets a variable, replacing any earlier value.
    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        for i in 0..self.spans.len() {
            let (s, m, _) = self.spans[i];
            if s != usize::MAX && &self.bytes[s..m] == name {
                self.spans[i].0 = usize::MAX;
            }
        }
        self.push(name, value);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        self.spans
            .iter()
            .filter(|(s, ..)| *s != usize::MAX)
            .map(|&(s, m, e)| (&self.bytes[s..m], &self.bytes[m..e]))
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| *n == name.as_bytes())
            .map(|(_, v)| v)
    }
}

/// The variables.
pub fn environment<'a>(
    req: CgiRequest<'a, impl Iterator<Item = (&'a [u8], &'a [u8])>>,
    cx: &CgiContext<'_>,
) -> Env {
    let mut env = Env::with_capacity(40);
    let (script_name, path_info) = split_script(cx.path, cx.php_split, cx.index);
    let root = cx.document_root.trim_end_matches('/');
    env.push(b"GATEWAY_INTERFACE", b"CGI/1.1");
    env.push(b"SERVER_SOFTWARE", b"skiff");
    let protocol = match req.version {
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        _ => "HTTP/1.1",
    };
    env.push(b"SERVER_PROTOCOL", protocol.as_bytes());
    env.push(b"REQUEST_METHOD", req.method.as_bytes());
    if cx.secure {
        env.push(b"REQUEST_SCHEME", b"https");
        // PHP's $_SERVER['HTTPS'] and WordPress's is_ssl() read this.
        env.push(b"HTTPS", b"on");
    } else {
        env.push(b"REQUEST_SCHEME", b"http");
    }
    env.logged.target = env.push(b"REQUEST_URI", req.target.as_bytes());
    let query = req.target.split_once('?').map_or("", |(_, q)| q);
    env.push(b"QUERY_STRING", query.as_bytes());
    env.push(b"DOCUMENT_ROOT", root.as_bytes());
    env.push(b"SCRIPT_NAME", script_name.as_bytes());
    env.push_with(b"SCRIPT_FILENAME", |b| {
        b.extend_from_slice(root.as_bytes());
        b.extend_from_slice(script_name.as_bytes());
    });
    env.push(b"PATH_INFO", path_info.as_bytes());
    if !path_info.is_empty() && cx.php_split {
        env.push(b"PATH_TRANSLATED", format!("{root}{path_info}").as_bytes());
    }
    // php-fpm with cgi.force_redirect wants to see that a server sent the request.
    env.push(b"REDIRECT_STATUS", b"200");
    env.push_with(b"SERVER_PORT", |b| push_decimal(b, cx.server_port.into()));
    env.push_with(b"REMOTE_ADDR", |b| push_ip(b, cx.remote_addr.ip()));
    env.push_with(b"REMOTE_PORT", |b| {
        push_decimal(b, cx.remote_addr.port().into())
    });
    env.push_with(b"CONTENT_LENGTH", |b| {
        push_decimal(b, cx.content_length.unwrap_or(0))
    });
    let mut host = None;
    let mut content_type = None;
    for (name, value) in req.fields {
        // httpoxy: a client's Proxy header must never become HTTP_PROXY.
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                // One HTTP_HOST, pushed below (the connection layer refuses two Hosts).
                host = host.or(Some(value));
                continue;
            }
            5 if name.eq_ignore_ascii_case(b"proxy") => continue,
            12 if name.eq_ignore_ascii_case(b"content-type") => {
                content_type = Some(value);
                continue;
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => continue,
            _ => {}
        }
        if !cx.underscores_in_headers && name.contains(&b'_') {
            continue;
        }
        let start = env.bytes.len();
        env.bytes.extend_from_slice(b"HTTP_");
        env.bytes.extend(name.iter().map(|&b| {
            if b == b'-' {
                b'_'
            } else {
                b.to_ascii_uppercase()
            }
        }));
        let mid = env.bytes.len();
        env.bytes.extend_from_slice(value);
        env.spans.push((start, mid, env.bytes.len()));
        let logged = Some((mid, env.bytes.len()));
        match name.len() {
            7 if name.eq_ignore_ascii_case(b"referer") => env.logged.referer = logged,
            10 if name.eq_ignore_ascii_case(b"user-agent") => env.logged.user_agent = logged,
            _ => {}
        }
    }
    // An absolute-form target's authority, or HTTP/2's :authority, stands for Host.
    let host = req.authority.map(str::as_bytes).or(host);
    if let Some(h) = host {
        env.push(b"HTTP_HOST", h);
    }
    env.push_with(b"SERVER_NAME", |b| push_server_name(b, host));
    if let Some(ct) = content_type {
        env.push(b"CONTENT_TYPE", ct);
    }
    for (k, v) in cx.extra {
        env.set(k.as_bytes(), v.as_bytes());
    }
    env
}

/// SERVER_NAME: the host without its port, lower-cased, without a trailing dot (the name
/// the request was routed on); `localhost` when the request named none.
fn push_server_name(out: &mut Vec<u8>, host: Option<&[u8]>) {
    let Some(host) = host else {
        out.extend_from_slice(b"localhost");
        return;
    };
    let name = if host.first() == Some(&b'[') {
        host.iter()
            .position(|&b| b == b']')
            .map_or(host, |i| &host[..=i])
    } else {
        host.split(|&b| b == b':').next().unwrap_or(host)
    };
    let name = name.strip_suffix(b".").unwrap_or(name);
    out.extend(name.iter().map(u8::to_ascii_lowercase));
}

/// Appends an address as text; IPv4 (the common case) without the formatting machinery.
fn push_ip(out: &mut Vec<u8>, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                push_decimal(out, octet.into());
            }
        }
        std::net::IpAddr::V6(v6) => {
            use std::io::Write;
            // Writing to a Vec cannot fail.
            let _ = write!(out, "{v6}");
        }
    }
}

/// Whether a path (component) ends in `.php`, in any case: rules match extensions
/// without regard to case, so `/x.jpg/a.PHP` reaches the pool like `a.php` does.
pub fn names_php(path: impl AsRef<[u8]>) -> bool {
    let p = path.as_ref();
    p.len() >= 4 && p[p.len() - 4..].eq_ignore_ascii_case(b".php")
}

/// Splits a path into SCRIPT_NAME and PATH_INFO.
pub fn split_script<'a>(path: &'a str, php_split: bool, index: Option<&str>) -> (String, &'a str) {
    if !php_split {
        return (String::new(), path);
    }
    // The first path component that names a script ends SCRIPT_NAME (`/a.phpx/b.php/c`
    // runs `/a.phpx/b.php`); the caller checks the script exists before php-fpm sees it.
    let mut start = 0;
    while start < path.len() {
        let end = path[start + 1..]
            .find('/')
            .map_or(path.len(), |i| start + 1 + i);
        if names_php(&path[start..end]) {
            return (path[..end].to_owned(), &path[end..]);
        }
        start = end;
    }
    match (path.ends_with('/'), index) {
        (true, Some(ix)) => (format!("{path}{ix}"), ""),
        _ => (path.to_owned(), ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn php_style_split() {
        assert_eq!(
            split_script("/index.php", true, None),
            ("/index.php".into(), "")
        );
        assert_eq!(
            split_script("/app.php/users/7", true, None),
            ("/app.php".into(), "/users/7")
        );
        assert_eq!(
            split_script("/blog/", true, Some("index.php")),
            ("/blog/index.php".into(), "")
        );
        assert_eq!(
            split_script("/x.phpx/y", true, None),
            ("/x.phpx/y".into(), "")
        );
        assert_eq!(
            split_script("/a.phpx/b.php/c.php/d", true, None),
            ("/a.phpx/b.php".into(), "/c.php/d")
        );
        assert_eq!(
            split_script("/uploads/x.jpg/a.php", true, None),
            ("/uploads/x.jpg/a.php".into(), "")
        );
        assert_eq!(
            split_script("/wsgi/path", false, None),
            ("".into(), "/wsgi/path")
        );
    }

    #[test]
    fn environment_has_cgi_variables_and_no_httpoxy() {
        let req = http::Request::builder()
            .method("POST")
            .uri("/app.php/extra?a=1")
            .header("host", "shop.example.com:8080")
            .header("content-type", "text/plain")
            .header("x-custom-thing", "v")
            .header("proxy", "http://evil")
            .body(())
            .unwrap();
        let (parts, _) = req.into_parts();
        let extra = vec![("APP_ENV".to_owned(), "test".to_owned())];
        let cx = CgiContext {
            path: "/app.php/extra",
            document_root: "/srv/app/",
            php_split: true,
            index: None,
            remote_addr: "192.0.2.5:4444".parse().unwrap(),
            server_port: 8080,
            content_length: Some(5),
            extra: &extra,
            underscores_in_headers: false,
            secure: false,
        };
        let env = environment(CgiRequest::of_parts(&parts), &cx);
        let get = |k: &str| env.get(k).map(|v| String::from_utf8(v.to_vec()).unwrap());
        assert_eq!(get("SCRIPT_FILENAME").as_deref(), Some("/srv/app/app.php"));
        assert_eq!(get("SCRIPT_NAME").as_deref(), Some("/app.php"));
        assert_eq!(get("PATH_INFO").as_deref(), Some("/extra"));
        assert_eq!(get("QUERY_STRING").as_deref(), Some("a=1"));
        assert_eq!(get("REQUEST_URI").as_deref(), Some("/app.php/extra?a=1"));
        assert_eq!(get("SERVER_NAME").as_deref(), Some("shop.example.com"));
        assert_eq!(get("REMOTE_ADDR").as_deref(), Some("192.0.2.5"));
        assert_eq!(get("REMOTE_PORT").as_deref(), Some("4444"));
        assert_eq!(get("CONTENT_LENGTH").as_deref(), Some("5"));
        assert_eq!(get("CONTENT_TYPE").as_deref(), Some("text/plain"));
        assert_eq!(get("HTTP_X_CUSTOM_THING").as_deref(), Some("v"));
        assert_eq!(get("HTTP_PROXY"), None);
        assert_eq!(get("APP_ENV").as_deref(), Some("test"));
    }

    #[test]
    fn httparse_view_and_hyper_parts_give_the_same_environment() {
        let raw = b"GET /shop/index.php/item?id=7 HTTP/1.1\r\nHost: shop.example.com\r\n\
                    User-Agent: curl/8\r\nReferer: /from\r\nX-Request-ID: abc\r\n\
                    Content-Type: text/plain\r\nProxy: evil\r\nAccept: */*\r\n\r\n";
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut req = httparse::Request::new(&mut headers);
        assert!(req.parse(raw).unwrap().is_complete());
        let mut builder = http::Request::builder().uri(req.path.unwrap());
        for h in req.headers.iter() {
            builder = builder.header(h.name, h.value);
        }
        let (parts, ()) = builder.body(()).unwrap().into_parts();
        let cx = CgiContext {
            path: "/shop/index.php/item",
            document_root: "/srv",
            php_split: true,
            index: None,
            remote_addr: "[2001:db8::1]:5555".parse().unwrap(),
            server_port: 80,
            content_length: Some(0),
            extra: &[],
            underscores_in_headers: false,
            secure: false,
        };
        let from_parts = environment(CgiRequest::of_parts(&parts), &cx);
        let view = CgiRequest {
            method: req.method.unwrap(),
            target: req.path.unwrap(),
            version: http::Version::HTTP_11,
            authority: None,
            fields: req.headers.iter().map(|h| (h.name.as_bytes(), h.value)),
        };
        let from_view = environment(view, &cx);
        let sorted = |env: &Env| {
            let mut v: Vec<(Vec<u8>, Vec<u8>)> =
                env.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&from_parts), sorted(&from_view));
        let get = |k: &str| {
            from_view
                .get(k)
                .map(|v| String::from_utf8(v.to_vec()).unwrap())
        };
        assert_eq!(get("HTTP_X_REQUEST_ID").as_deref(), Some("abc"));
        assert_eq!(get("HTTP_PROXY"), None);
        assert_eq!(get("HTTP_CONTENT_TYPE"), None);
        assert_eq!(get("CONTENT_TYPE").as_deref(), Some("text/plain"));
        assert_eq!(get("REMOTE_ADDR").as_deref(), Some("2001:db8::1"));
        assert_eq!(get("PATH_TRANSLATED").as_deref(), Some("/srv/item"));
        assert_eq!(from_view.logged_target(), b"/shop/index.php/item?id=7");
        assert_eq!(from_view.logged_referer(), Some(&b"/from"[..]));
        assert_eq!(from_view.logged_user_agent(), Some(&b"curl/8"[..]));
    }

    fn env_of(parts: &http::request::Parts, underscores: bool) -> Env {
        let cx = CgiContext {
            path: "/a.php",
            document_root: "/srv",
            php_split: true,
            index: None,
            remote_addr: "192.0.2.1:1".parse().unwrap(),
            server_port: 80,
            content_length: None,
            extra: &[],
            underscores_in_headers: underscores,
            secure: false,
        };
        environment(CgiRequest::of_parts(parts), &cx)
    }

    #[test]
    fn header_names_with_underscores_are_dropped_unless_allowed() {
        let (parts, ()) = http::Request::builder()
            .uri("/a.php")
            .header("host", "a.test")
            .header("x-forwarded-for", "203.0.113.5")
            .header("x_forwarded_for", "10.1.1.1")
            .header("x_remote_user", "admin")
            .body(())
            .unwrap()
            .into_parts();
        let env = env_of(&parts, false);
        let all = |k: &str| {
            env.iter()
                .filter(|(n, _)| *n == k.as_bytes())
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(all("HTTP_X_FORWARDED_FOR"), ["203.0.113.5"]);
        assert!(all("HTTP_X_REMOTE_USER").is_empty());
        let env = env_of(&parts, true);
        assert_eq!(env.get("HTTP_X_REMOTE_USER"), Some(&b"admin"[..]));
    }

    #[test]
    fn the_authority_stands_for_host_and_server_name_is_the_normalised_name() {
        // HTTP/2: no Host field, only :authority.
        let (parts, ()) = http::Request::builder()
            .uri("http://Shop.Example.COM.:8443/a.php")
            .version(http::Version::HTTP_2)
            .body(())
            .unwrap()
            .into_parts();
        let env = env_of(&parts, false);
        assert_eq!(env.get("HTTP_HOST"), Some(&b"Shop.Example.COM.:8443"[..]));
        assert_eq!(env.get("SERVER_NAME"), Some(&b"shop.example.com"[..]));
        // An absolute-form target's authority replaces the Host field.
        let (parts, ()) = http::Request::builder()
            .uri("http://b.test/a.php")
            .header("host", "a.test")
            .body(())
            .unwrap()
            .into_parts();
        let env = env_of(&parts, false);
        assert_eq!(env.get("HTTP_HOST"), Some(&b"b.test"[..]));
        assert_eq!(env.iter().filter(|(k, _)| *k == b"HTTP_HOST").count(), 1);
        assert_eq!(env.get("SERVER_NAME"), Some(&b"b.test"[..]));
    }

    #[test]
    fn a_configured_param_replaces_a_variable_but_not_the_logged_target() {
        let (parts, ()) = http::Request::builder()
            .uri("/a?b")
            .body(())
            .unwrap()
            .into_parts();
        let extra = vec![("REQUEST_URI".to_owned(), "/rewritten".to_owned())];
        let cx = CgiContext {
            path: "/a",
            document_root: "/srv",
            php_split: false,
            index: None,
            remote_addr: "192.0.2.1:1".parse().unwrap(),
            server_port: 80,
            content_length: None,
            extra: &extra,
            underscores_in_headers: false,
            secure: false,
        };
        let env = environment(CgiRequest::of_parts(&parts), &cx);
        assert_eq!(env.get("REQUEST_URI"), Some(&b"/rewritten"[..]));
        assert_eq!(env.iter().filter(|(k, _)| *k == b"REQUEST_URI").count(), 1);
        assert_eq!(env.logged_target(), b"/a?b");
        assert_eq!(env.get("SERVER_NAME"), Some(&b"localhost"[..]));
    }
}
