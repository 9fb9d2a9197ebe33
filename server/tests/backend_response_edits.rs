//! A rule's `headers`, `cache` and `cors` on the responses of its backends, as on its
//! files: through the real binary, in front of php-fpm (FastCGI) and a Python HTTP backend,
//! over HTTP/1.1 and h2c.

mod common;
use common::backends::*;
use common::*;

/// Answers by path: a backend with its own caching and CORS policy, an error, and a plain
/// page.
const BACKEND: &str = r#"
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    disable_nagle_algorithm = True
    def do_GET(self):
        fields = {
            '/api/private': [('Cache-Control', 'private, no-store'),
                             ('Access-Control-Allow-Origin', '*'),
                             ('X-Frame-Options', 'SAMEORIGIN'), ('Vary', 'Cookie')],
            '/api/dated': [('Expires', 'Thu, 01 Jan 1970 00:00:00 GMT')],
            '/api/login': [('Location', '/signin')],
            '/api/session': [('Set-Cookie', 'id=1; HttpOnly')],
        }.get(self.path, [])
        status = {'/api/missing': 404, '/api/login': 302}.get(self.path, 200)
        body = b'from the backend\n'
        self.send_response(status)
        for k, v in fields:
            self.send_header(k, v)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
"#;

fn all<'a>(headers: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

#[test]
fn rule_headers_cache_and_cors_reach_backend_responses() {
    let site = php_site();
    let fpm_port = free_port();
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{fpm_port}"));
    let (_http, http_port) = python_backend(site.path(), "backend.py", BACKEND);
    let config = write_config(
        site.path(),
        &format!(
            r#"virtual_servers:
  - name: site
    default: true
    root: {root}
    rules:
      - match: {{ extensions: [php] }}
        action: {{ fastcgi: {{ pool: php }} }}
        headers: {{ remove: [X-Powered], set: {{ X-Frame-Options: DENY }}, add: {{ X-Served-By: skiff }} }}
        cache: {{ max_age: 60, visibility: public }}
      - match: {{ prefix: /api/ }}
        action: {{ proxy: {{ pool: api }} }}
        headers: {{ set: {{ X-Frame-Options: DENY }} }}
        cache: {{ max_age: 60 }}
        cors: {{ allow_origins: ["https://app.example"], expose_headers: [X-Total] }}
pools:
  - {{ name: php, protocol: fastcgi, endpoints: ["127.0.0.1:{fpm_port}"], read_timeout: 5s }}
  - {{ name: api, protocol: http, endpoints: ["127.0.0.1:{http_port}"], max_body_size: 16 }}
"#,
            root = site.path().display()
        ),
    );
    let srv = Server::run_config(&config);

    // FastCGI (wire-form fields), over the HTTP/1.1 fast path and over h2c (hyper's map).
    for proto in ["--http1.1", "--http2-prior-knowledge"] {
        let (status, h, body) = curl_i(&[proto, &srv.url("/echo.php")]);
        assert_eq!(status, 200, "{proto}");
        assert!(String::from_utf8_lossy(&body).contains("SCRIPT_NAME=/echo.php"));
        assert_eq!(all(&h, "x-powered"), Vec::<&str>::new(), "{proto}: removed");
        assert_eq!(all(&h, "x-frame-options"), ["DENY"], "{proto}");
        assert_eq!(all(&h, "x-served-by"), ["skiff"], "{proto}");
        assert_eq!(all(&h, "cache-control"), ["public, max-age=60"], "{proto}");
        assert_eq!(all(&h, "expires").len(), 1, "{proto}: {h:?}");
    }

    // HTTP: the rule's policy where the backend has none, with CORS for an allowed origin.
    let origin = ["-H", "Origin: https://app.example"];
    let (status, h, _) = curl_i(&[origin[0], origin[1], &srv.url("/api/plain")]);
    assert_eq!(status, 200);
    assert_eq!(all(&h, "x-frame-options"), ["DENY"]);
    assert_eq!(all(&h, "cache-control"), ["max-age=60"]);
    assert_eq!(all(&h, "expires").len(), 1);
    assert_eq!(
        all(&h, "access-control-allow-origin"),
        ["https://app.example"]
    );
    assert_eq!(all(&h, "access-control-expose-headers"), ["X-Total"]);
    assert_eq!(all(&h, "vary"), ["Origin"]);

    // The backend's own caching policy wins; its CORS and framing fields give way to the
    // rule's, so there is one of each.
    let (_, h, _) = curl_i(&[origin[0], origin[1], &srv.url("/api/private")]);
    assert_eq!(all(&h, "cache-control"), ["private, no-store"]);
    assert_eq!(all(&h, "expires"), Vec::<&str>::new());
    assert_eq!(all(&h, "x-frame-options"), ["DENY"]);
    assert_eq!(
        all(&h, "access-control-allow-origin"),
        ["https://app.example"]
    );
    assert_eq!(all(&h, "vary"), ["Cookie", "Origin"]);
    let (_, h, _) = curl_i(&[&srv.url("/api/dated")]);
    assert_eq!(
        all(&h, "cache-control"),
        Vec::<&str>::new(),
        "an Expires is a policy too"
    );
    assert_eq!(all(&h, "expires"), ["Thu, 01 Jan 1970 00:00:00 GMT"]);

    // Nor on an answer to a request with credentials: the backend's to mark cacheable.
    let (_, h, _) = curl_i(&["-u", "ann:secret", &srv.url("/api/plain")]);
    assert_eq!(all(&h, "cache-control"), Vec::<&str>::new());
    assert_eq!(all(&h, "x-frame-options"), ["DENY"]);

    // No policy of the rule on a redirect (a cached 302 to a sign-in page loops) or on a
    // response that sets a cookie (which shared caches must not keep); the rest still apply.
    for path in ["/api/login", "/api/session"] {
        let (_, h, _) = curl_i(&[&srv.url(path)]);
        assert_eq!(all(&h, "cache-control"), Vec::<&str>::new(), "{path}");
        assert_eq!(all(&h, "expires"), Vec::<&str>::new(), "{path}");
        assert_eq!(all(&h, "x-frame-options"), ["DENY"], "{path}");
    }

    // Errors keep the backend's fields (as files' errors do), but get CORS so a page can
    // read them.
    let (status, h, _) = curl_i(&[origin[0], origin[1], &srv.url("/api/missing")]);
    assert_eq!(status, 404);
    assert_eq!(all(&h, "x-frame-options"), Vec::<&str>::new());
    assert_eq!(all(&h, "cache-control"), Vec::<&str>::new());
    assert_eq!(
        all(&h, "access-control-allow-origin"),
        ["https://app.example"]
    );

    // So do answers refused before the backend is asked (a body over the pool's limit).
    let big = "x".repeat(100);
    let (status, h, _) = curl_i(&[
        origin[0],
        origin[1],
        "--data",
        &big,
        &srv.url("/api/upload"),
    ]);
    assert_eq!(status, 413);
    assert_eq!(
        all(&h, "access-control-allow-origin"),
        ["https://app.example"]
    );

    // An origin the rule does not allow cannot read the response, whatever the backend
    // says; caches keep answers apart by origin.
    let (_, h, _) = curl_i(&[
        "-H",
        "Origin: https://evil.example",
        &srv.url("/api/private"),
    ]);
    assert_eq!(all(&h, "access-control-allow-origin"), Vec::<&str>::new());
    assert_eq!(all(&h, "vary"), ["Cookie", "Origin"]);
    let (_, h, _) = curl_i(&[&srv.url("/api/plain")]);
    assert_eq!(all(&h, "vary"), ["Origin"], "also without an Origin");
}
