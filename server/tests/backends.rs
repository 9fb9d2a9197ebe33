//! CGI pools against real backends: php-fpm (TCP and unix socket), uWSGI (a WSGI app, a
//! Django /login with CSRF, and SCGI mode), and FastCGI connections kept for reuse.
//! Installed by scripts/install-deps.sh.

mod common;
use common::backends::*;
use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn check_php(srv: &Server, site: &Path) {
    // CGI parameters.
    let out = curl(&[
        "-H",
        "X-Test: yes",
        "-H",
        "Host: shop.example.com",
        &srv.url("/echo.php/extra/path?a=1&b=2"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let root = site.display().to_string();
    for want in [
        format!("SCRIPT_FILENAME={root}/echo.php"),
        "SCRIPT_NAME=/echo.php".into(),
        "PATH_INFO=/extra/path".into(),
        "QUERY_STRING=a=1&b=2".into(),
        "REQUEST_METHOD=GET".into(),
        format!("DOCUMENT_ROOT={root}"),
        "SERVER_NAME=shop.example.com".into(),
        "REMOTE_ADDR=127.0.0.1".into(),
        "REQUEST_URI=/echo.php/extra/path?a=1&b=2".into(),
        "HTTP_X_TEST=yes".into(),
    ] {
        assert!(
            text.lines().any(|l| l == want),
            "missing {want:?} in:\n{text}"
        );
    }
    let (_, h, _) = curl_i(&[&srv.url("/echo.php")]);
    assert_eq!(get_header(&h, "x-powered"), Some("fpm"));
    // A POST upload of several MiB, checked by hash.
    let upload: Vec<u8> = (0..6 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let file = site.join("upload.bin");
    std::fs::write(&file, &upload).unwrap();
    let out = curl(&[
        "--data-binary",
        &format!("@{}", file.display()),
        "-H",
        "Content-Type: application/octet-stream",
        &srv.url("/upload.php"),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{} {}", upload.len(), sha256_hex(&upload))
    );
    // Chunked uploads (no Content-Length) are read first, then sent with one.
    let out = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        "hello",
        &srv.url("/upload.php"),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("5 {}", sha256_hex(b"hello"))
    );
    // A streamed response: the first bytes arrive well before the last.
    let out = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{time_starttransfer} %{time_total} %{size_download}",
        &srv.url("/stream.php"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let f: Vec<f64> = text.split(' ').map(|x| x.parse().unwrap()).collect();
    assert!(f[1] - f[0] > 0.5, "not streamed: {text}");
    assert!(f[2] > 50_000.0, "{text}");
    // A script that exits early.
    let (st, _, body) = curl_i(&[&srv.url("/exit.php")]);
    assert_eq!((st, body.as_slice()), (418, &b"partial"[..]));
    // Static files beside the scripts are still served by skiff.
    assert_eq!(curl(&[&srv.url("/static.txt")]).stdout, b"served by skiff");
}

#[test]
fn php_fpm_over_tcp() {
    let (site, _fpm, srv) = php_over_tcp();
    check_php(&srv, site.path());
    // Backend stderr reaches the error log.
    assert_eq!(curl(&[&srv.url("/stderr.php")]).stdout, b"ok");
    let end = Instant::now() + Duration::from_secs(5);
    while !srv.stderr_text().contains("skiff-stderr-marker") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        srv.stderr_text().contains("skiff-stderr-marker"),
        "{}",
        srv.stderr_text()
    );
    assert!(
        srv.metric("skiff_upstream_requests_total{pool=\"php\",code=\"200\"}")
            .unwrap()
            >= 3.0
    );
}

#[test]
fn php_fpm_over_a_unix_socket() {
    let site = php_site();
    let sock = site.path().join("fpm.sock");
    let _fpm = php_fpm(site.path(), sock.to_str().unwrap());
    let config = write_config(
        site.path(),
        &php_config(site.path(), &format!("unix:{}", sock.display())),
    );
    let srv = Server::run_config(&config);
    check_php(&srv, site.path());
}

#[test]
fn uwsgi_plain_wsgi_and_scgi_mode() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("app.py"), WSGI_APP).unwrap();
    let (up, sp) = (free_port(), free_port());
    let app = dir.path().join("app.py");
    let _a = uwsgi(
        &[
            "--socket",
            &format!("127.0.0.1:{up}"),
            "--wsgi-file",
            app.to_str().unwrap(),
        ],
        &format!("127.0.0.1:{up}"),
    );
    let _b = uwsgi(
        &[
            "--scgi-socket",
            &format!("127.0.0.1:{sp}"),
            "--wsgi-file",
            app.to_str().unwrap(),
        ],
        &format!("127.0.0.1:{sp}"),
    );
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: py\n    default: true\n    root: .\n    rules:\n      - match: {{ prefix: /scgi/ }}\n        action: {{ scgi: {{ pool: scgi }} }}\n      - action: {{ uwsgi: {{ pool: wsgi }} }}\npools:\n  - {{ name: wsgi, protocol: uwsgi, endpoints: [\"127.0.0.1:{up}\"] }}\n  - {{ name: scgi, protocol: scgi, endpoints: [\"127.0.0.1:{sp}\"] }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    let (st, h, body) = curl_i(&["--data-binary", "twelve bytes", &srv.url("/some/where?x=1")]);
    let text = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(st, 201, "{text}");
    assert_eq!(get_header(&h, "x-app"), Some("wsgi"));
    assert!(
        text.contains("method=POST\npath=/some/where\nquery=x=1\nlen=12\nscript=\n"),
        "{text}"
    );
    let (st, _, body) = curl_i(&[&srv.url("/scgi/path")]);
    let text = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(st, 201, "{text}");
    assert!(text.contains("method=GET\npath=/scgi/path\n"), "{text}");
}

#[test]
fn django_login_get_and_post_with_csrf() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("mysite");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("__init__.py"), "").unwrap();
    std::fs::write(
        site.join("settings.py"),
        "SECRET_KEY = 'skiff-test'\nDEBUG = False\nALLOWED_HOSTS = ['*']\nROOT_URLCONF = 'mysite.urls'\nINSTALLED_APPS = []\nMIDDLEWARE = ['django.middleware.csrf.CsrfViewMiddleware']\nTEMPLATES = [{'BACKEND': 'django.template.backends.django.DjangoTemplates', 'DIRS': [], 'OPTIONS': {'context_processors': ['django.template.context_processors.csrf']}}]\nDATABASES = {}\nUSE_TZ = True\n",
    )
    .unwrap();
    std::fs::write(
        site.join("urls.py"),
        "from django.urls import path\nfrom django.http import HttpResponse\nfrom django.template import engines\nfrom django.views.decorators.csrf import ensure_csrf_cookie\n\n@ensure_csrf_cookie\ndef login(request):\n    if request.method == 'POST':\n        return HttpResponse('welcome ' + request.POST.get('user', ''))\n    form = engines['django'].from_string('<form method=\"post\">{% csrf_token %}<input name=\"user\"></form>')\n    return HttpResponse(form.render({}, request))\n\nurlpatterns = [path('login', login)]\n",
    )
    .unwrap();
    std::fs::write(
        site.join("wsgi.py"),
        "import os\nos.environ.setdefault('DJANGO_SETTINGS_MODULE', 'mysite.settings')\nfrom django.core.wsgi import get_wsgi_application\napplication = get_wsgi_application()\n",
    )
    .unwrap();
    let port = free_port();
    // Django rejects a POST without a CSRF cookie before reading its body; uWSGI then closes
    // a socket with unread bytes, and the kernel's RST discards the rest of the response.
    // --post-buffering (uWSGI's advice) reads the body first.
    let _django = uwsgi(
        &[
            "--post-buffering",
            "65536",
            "--socket",
            &format!("127.0.0.1:{port}"),
            "--chdir",
            dir.path().to_str().unwrap(),
            "--module",
            "mysite.wsgi:application",
        ],
        &format!("127.0.0.1:{port}"),
    );
    let config = write_config(
        dir.path(),
        &format!("virtual_servers:\n  - name: django\n    default: true\n    root: .\n    rules:\n      - action: {{ uwsgi: {{ pool: django }} }}\npools:\n  - {{ name: django, protocol: uwsgi, endpoints: [\"127.0.0.1:{port}\"] }}\n"),
    );
    let srv = Server::run_config(&config);
    let (st, h, body) = curl_i(&[&srv.url("/login")]);
    let page = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(st, 200, "{page}");
    let cookie = h
        .iter()
        .filter(|(k, _)| k == "set-cookie")
        .find_map(|(_, v)| v.strip_prefix("csrftoken="))
        .and_then(|v| v.split(';').next())
        .expect("a csrftoken cookie")
        .to_owned();
    let token = page
        .split("name=\"csrfmiddlewaretoken\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect(&page)
        .to_owned();
    let (st, _, body) = curl_i(&[
        "-H",
        &format!("Cookie: csrftoken={cookie}"),
        "--data",
        &format!("csrfmiddlewaretoken={token}&user=bob"),
        &srv.url("/login"),
    ]);
    assert_eq!(
        (st, String::from_utf8_lossy(&body).as_ref()),
        (200, "welcome bob")
    );
    let (st, _, _) = curl_i(&["--data", "user=mallory", &srv.url("/login")]);
    assert_eq!(st, 403, "CSRF is enforced");
}

fn established_to(port: u16) -> usize {
    let out = Command::new("ss")
        .args([
            "-Htn",
            "state",
            "established",
            "dport",
            &format!("= :{port}"),
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn fastcgi_keepalive_reuses_one_connection() {
    let site = php_site();
    let port = free_port();
    // Four children: a kept connection pins one, the others stay free.
    let _fpm = php_fpm_with(site.path(), &format!("127.0.0.1:{port}"), 4);
    let config = write_config(
        site.path(),
        &php_config(site.path(), &format!("127.0.0.1:{port}"))
            .replace("read_timeout: 5s }", "read_timeout: 5s, keepalive: 1 }"),
    );
    // One serving thread: one kept connection is expected.
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("threads: 2", "threads: 1");
    std::fs::write(&config, text).unwrap();
    let srv = Server::run_config(&config);
    for _ in 0..20 {
        assert!(
            String::from_utf8_lossy(&curl(&[&srv.url("/echo.php")]).stdout)
                .contains("REQUEST_METHOD=GET")
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        established_to(port),
        1,
        "one kept connection served all twenty requests"
    );
}

#[test]
fn a_reload_closes_the_kept_connections_of_the_pools_it_retires() {
    // Each kept connection holds a php-fpm child; a reload builds new pools, and the old
    // generation's connections must not stay open for good beside the new ones.
    let site = php_site();
    let port = free_port();
    let _fpm = php_fpm_with(site.path(), &format!("127.0.0.1:{port}"), 6);
    let body = php_config(site.path(), &format!("127.0.0.1:{port}"))
        .replace("read_timeout: 5s }", "read_timeout: 5s, keepalive: 1 }");
    let config = write_config(site.path(), &body);
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("threads: 2", "threads: 1");
    std::fs::write(&config, &text).unwrap();
    let srv = Server::run_config(&config);
    let get = || {
        assert!(
            String::from_utf8_lossy(&curl(&[&srv.url("/echo.php")]).stdout)
                .contains("REQUEST_METHOD=GET")
        )
    };
    get();
    for generation in 1..=3 {
        std::fs::write(&config, format!("{text}# generation {generation}\n")).unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        while srv.metric("skiff_config_reloads_total{result=\"success\"}")
            != Some(generation as f64)
        {
            assert!(Instant::now() < end, "reload {generation} did not apply");
            std::thread::sleep(Duration::from_millis(50));
        }
        get();
    }
    let end = Instant::now() + Duration::from_secs(10);
    while established_to(port) != 1 {
        assert!(
            Instant::now() < end,
            "{} connections to php-fpm after three reloads, one kept",
            established_to(port)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A FastCGI backend that answers a connection's first request (keeping it open), then
/// closes it on the second without a reply, as a php-fpm child killed mid-script does;
/// it prints each request's method as it reads it.
const FCGI_CLOSE_ON_SECOND: &str = r#"
import socket, struct, sys, threading
def records(c):
    buf = b''
    while True:
        while len(buf) < 8:
            part = c.recv(65536)
            if not part:
                return
            buf += part
        _, t, rid, clen, pad, _ = struct.unpack('>BBHHBB', buf[:8])
        while len(buf) < 8 + clen + pad:
            part = c.recv(65536)
            if not part:
                return
            buf += part
        yield t, buf[8:8 + clen]
        buf = buf[8 + clen + pad:]
def method(params):
    i = 0
    while i < len(params):
        n = params[i]; i += 1
        if n & 0x80: n = struct.unpack('>I', params[i - 1:i + 3])[0] & 0x7fffffff; i += 3
        v = params[i]; i += 1
        if v & 0x80: v = struct.unpack('>I', params[i - 1:i + 3])[0] & 0x7fffffff; i += 3
        if params[i:i + n] == b'REQUEST_METHOD':
            return params[i + n:i + n + v].decode()
        i += n + v
def rec(t, body):
    return struct.pack('>BBHHBB', 1, t, 1, len(body), 0, 0) + body
def handle(c):
    served = 0
    params = b''
    for t, body in records(c):
        if t == 4:
            params += body
        elif t == 5 and not body:
            print(method(params), flush=True)
            params = b''
            served += 1
            if served == 2:
                c.close()
                return
            c.sendall(rec(6, b'Content-Type: text/plain\r\n\r\nfirst') + rec(6, b'')
                      + rec(3, b'\0' * 8))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=handle, args=(c,), daemon=True).start()
"#;

#[test]
fn a_request_that_may_change_state_is_not_sent_again_when_a_kept_connection_fails() {
    // The kept connection is open and quiet when reused, and the backend closes it only
    // after reading the request: a GET then goes again on a new connection, a POST is
    // answered 502 and the backend saw it once (nginx's rule for non-idempotent methods).
    let site = php_site();
    let port = free_port();
    let script = site.path().join("fcgi.py");
    std::fs::write(&script, FCGI_CLOSE_ON_SECOND).unwrap();
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = std::io::BufReader::new(child.stdout.take().unwrap());
    let backend = Backend(child);
    wait_connect(&format!("127.0.0.1:{port}"));
    let config = write_config(
        site.path(),
        &php_config(site.path(), &format!("127.0.0.1:{port}"))
            .replace("read_timeout: 5s }", "read_timeout: 5s, keepalive: 1 }"),
    );
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("threads: 2", "threads: 1");
    std::fs::write(&config, text).unwrap();
    let srv = Server::run_config(&config);
    let status = |method: &str| {
        let out = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            method,
            &srv.url("/echo.php"),
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // GET: answered on a new connection (kept), its reuse fails, sent again on a third.
    assert_eq!(status("GET"), "200");
    assert_eq!(status("GET"), "200");
    // POST: the third connection is kept; its reuse fails and the POST is not replayed.
    assert_eq!(status("POST"), "502");
    drop(srv);
    // Stopped, so that its output ends.
    drop(backend);
    let methods: Vec<String> = std::io::BufRead::lines(seen)
        .map_while(Result::ok)
        .collect();
    assert_eq!(
        methods,
        ["GET", "GET", "GET", "POST"],
        "what the backend read"
    );
}
