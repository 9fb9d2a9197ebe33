//! The CGI/1.1 environment (RFC 3875) for FastCGI, uwsgi and SCGI backends, with the
//! variables php-fpm and uWSGI expect.

use http::request::Parts;

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
}

/// CGI variables, stored in one byte buffer with spans: two allocations for the whole
/// environment rather than two per variable.
#[derive(Debug, Default)]
pub struct Env {
    bytes: Vec<u8>,
    /// (name start, name end, value end); a removed variable has name start == usize::MAX.
    spans: Vec<(usize, usize, usize)>,
}

impl Env {
    pub fn with_capacity(vars: usize) -> Env {
        Env {
            bytes: Vec::with_capacity(vars * 32),
            spans: Vec::with_capacity(vars),
        }
    }

    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(name);
        let mid = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.spans.push((start, mid, self.bytes.len()));
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

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
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
pub fn environment(parts: &Parts, cx: &CgiContext<'_>) -> Env {
    let mut env = Env::with_capacity(24 + parts.headers.len());
    let mut set = |k: &str, v: &[u8]| env.push(k.as_bytes(), v);
    let (script_name, path_info) = split_script(cx.path, cx.php_split, cx.index);
    let root = cx.document_root.trim_end_matches('/');
    set("GATEWAY_INTERFACE", b"CGI/1.1");
    set("SERVER_SOFTWARE", b"skiff");
    let protocol = match parts.version {
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        _ => "HTTP/1.1",
    };
    set("SERVER_PROTOCOL", protocol.as_bytes());
    set("REQUEST_METHOD", parts.method.as_str().as_bytes());
    set("REQUEST_SCHEME", b"http");
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    set("REQUEST_URI", target.as_bytes());
    set("QUERY_STRING", parts.uri.query().unwrap_or("").as_bytes());
    set("DOCUMENT_ROOT", root.as_bytes());
    set("SCRIPT_NAME", script_name.as_bytes());
    let mut filename = String::with_capacity(root.len() + script_name.len());
    filename.push_str(root);
    filename.push_str(&script_name);
    set("SCRIPT_FILENAME", filename.as_bytes());
    set("PATH_INFO", path_info.as_bytes());
    if !path_info.is_empty() && cx.php_split {
        set("PATH_TRANSLATED", format!("{root}{path_info}").as_bytes());
    }
    // php-fpm with cgi.force_redirect wants to see that a server sent the request.
    set("REDIRECT_STATUS", b"200");
    let host = parts
        .headers
        .get(http::header::HOST)
        .map(|h| h.as_bytes())
        .or_else(|| parts.uri.authority().map(|a| a.as_str().as_bytes()))
        .unwrap_or(b"localhost");
    let server_name = host.split(|&b| b == b':').next().unwrap_or(host);
    set("SERVER_NAME", server_name);
    set("SERVER_PORT", cx.server_port.to_string().as_bytes());
    set("REMOTE_ADDR", cx.remote_addr.ip().to_string().as_bytes());
    set("REMOTE_PORT", cx.remote_addr.port().to_string().as_bytes());
    if let Some(ct) = parts.headers.get(http::header::CONTENT_TYPE) {
        set("CONTENT_TYPE", ct.as_bytes());
    }
    set(
        "CONTENT_LENGTH",
        cx.content_length.unwrap_or(0).to_string().as_bytes(),
    );
    let mut key = Vec::with_capacity(64);
    for (name, value) in parts.headers.iter() {
        let n = name.as_str();
        // httpoxy: a client's Proxy header must never become HTTP_PROXY.
        if n == "content-type" || n == "content-length" || n == "proxy" {
            continue;
        }
        key.clear();
        key.extend_from_slice(b"HTTP_");
        key.extend(n.bytes().map(|b| {
            if b == b'-' {
                b'_'
            } else {
                b.to_ascii_uppercase()
            }
        }));
        env.push(&key, value.as_bytes());
    }
    for (k, v) in cx.extra {
        env.set(k.as_bytes(), v.as_bytes());
    }
    env
}

/// Splits a path into SCRIPT_NAME and PATH_INFO.
pub fn split_script<'a>(path: &'a str, php_split: bool, index: Option<&str>) -> (String, &'a str) {
    if !php_split {
        return (String::new(), path);
    }
    if let Some(i) = path.find(".php") {
        let end = i + 4;
        if end == path.len() || path.as_bytes()[end] == b'/' {
            return (path[..end].to_owned(), &path[end..]);
        }
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
        };
        let env = environment(&parts, &cx);
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
}
