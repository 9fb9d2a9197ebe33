//! Backend pools against real backends: php-fpm (TCP and unix socket), uWSGI (a WSGI app,
//! a Django /login with CSRF, and SCGI mode), and HTTP backends (a Python echo server and
//! skiff itself). Installed by scripts/install-deps.sh.

mod common;
use common::backends::*;
use common::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn sha256_hex(data: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(data)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

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

/// The PHP test site, php-fpm on a TCP port, and skiff in front of it.
fn php_over_tcp() -> (tempfile::TempDir, Backend, Server) {
    let site = php_site();
    let port = free_port();
    let fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = write_config(
        site.path(),
        &php_config(site.path(), &format!("127.0.0.1:{port}")),
    );
    let srv = Server::run_config(&config);
    (site, fpm, srv)
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

const WSGI_APP: &str = r#"
def application(environ, start_response):
    n = int(environ.get('CONTENT_LENGTH') or 0)
    body = environ['wsgi.input'].read(n) if n else b''
    out = ("method=%s\npath=%s\nquery=%s\nlen=%d\nscript=%s\n" % (
        environ['REQUEST_METHOD'], environ['PATH_INFO'], environ['QUERY_STRING'], len(body), environ.get('SCRIPT_NAME', ''))).encode()
    start_response('201 Created', [('Content-Type', 'text/plain'), ('X-App', 'wsgi')])
    return [out]
"#;

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

/// Three echo backends named PREFIX0..PREFIX2, and their endpoint list for a pool.
fn echo_pool(dir: &Path, prefix: &str) -> (Vec<(Backend, u16)>, Vec<String>) {
    let backends: Vec<(Backend, u16)> = (0..3)
        .map(|i| echo_server(dir, &format!("{prefix}{i}")))
        .collect();
    let endpoints = backends
        .iter()
        .map(|(_, p)| format!("\"127.0.0.1:{p}\""))
        .collect();
    (backends, endpoints)
}

#[test]
fn http_proxy_forwards_headers_and_balances_round_robin() {
    let dir = tempfile::tempdir().unwrap();
    let (_backends, endpoints) = echo_pool(dir.path(), "b");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: api\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [{}] }}\n",
            endpoints.join(", ")
        ),
    );
    let srv = Server::run_config(&config);
    let out = curl(&[
        "-H",
        "Host: app.example.com",
        "-H",
        "Connection: keep-alive, X-Secret",
        "-H",
        "X-Secret: hop",
        "--data",
        "abc",
        &srv.url("/v1/items?q=1"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.starts_with("POST /v1/items?q=1\n"), "{text}");
    assert!(text.contains("\nhost: app.example.com\n"), "{text}");
    assert!(text.contains("\nx-forwarded-for: 127.0.0.1\n"), "{text}");
    assert!(text.contains("\nx-forwarded-proto: http\n"), "{text}");
    assert!(
        text.contains("\nx-forwarded-host: app.example.com\n"),
        "{text}"
    );
    assert!(
        !text.contains("x-secret"),
        "hop-by-hop headers named in Connection are dropped: {text}"
    );
    assert!(text.contains("body-len=3"), "{text}");
    let mut counts = std::collections::HashMap::new();
    for _ in 0..30 {
        let out = curl(&[&srv.url("/")]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let name = text
            .lines()
            .find_map(|l| l.strip_prefix("name="))
            .unwrap()
            .to_owned();
        *counts.entry(name).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), 3, "{counts:?}");
    assert!(
        counts.values().all(|&n| n == 10),
        "round robin spreads evenly: {counts:?}"
    );
}

/// A TCP listener that accepts and then does `what` with each connection.
fn fake_endpoint(what: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let _ = s.read(&mut buf);
                match what {
                    "hang" => std::thread::sleep(Duration::from_secs(30)),
                    "close" => {}
                    "stall" => {
                        let _ = s.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nthe first bytes",
                        );
                        std::thread::sleep(Duration::from_secs(30));
                    }
                    _ => {
                        let _ = s.write_all(b"\x00\x01 this is not FastCGI at all\r\n\r\n");
                    }
                }
            });
        }
    });
    port
}

#[test]
fn failures_give_502_504_and_failover() {
    let dir = tempfile::tempdir().unwrap();
    let (_good, good) = echo_server(dir.path(), "good");
    let down = free_port(); // nothing listens there
    let hang = fake_endpoint("hang");
    let garbage = fake_endpoint("garbage");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: f\n    default: true\n    root: .\n    rules:\n      - match: {{ prefix: /down }}\n        action: {{ proxy: {{ pool: down }} }}\n      - match: {{ prefix: /hang }}\n        action: {{ fastcgi: {{ pool: hang }} }}\n      - match: {{ prefix: /garbage }}\n        action: {{ fastcgi: {{ pool: garbage }} }}\n      - match: {{ prefix: /failover }}\n        action: {{ proxy: {{ pool: mixed }} }}\npools:\n  - {{ name: down, protocol: http, endpoints: [\"127.0.0.1:{down}\"] }}\n  - {{ name: hang, protocol: fastcgi, endpoints: [\"127.0.0.1:{hang}\"], read_timeout: 500ms }}\n  - {{ name: garbage, protocol: fastcgi, endpoints: [\"127.0.0.1:{garbage}\"] }}\n  - {{ name: mixed, protocol: http, endpoints: [\"127.0.0.1:{down}\", \"127.0.0.1:{good}\"], max_fails: 1 }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    assert_eq!(curl_i(&[&srv.url("/down")]).0, 502);
    let t = Instant::now();
    assert_eq!(curl_i(&[&srv.url("/hang")]).0, 504);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(curl_i(&[&srv.url("/garbage")]).0, 502);
    let end = Instant::now() + Duration::from_secs(5);
    while !srv.stderr_text().contains("pool=\"garbage\"") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        srv.stderr_text().contains("pool=\"garbage\""),
        "the log names the pool: {}",
        srv.stderr_text()
    );
    // One endpoint down: every request still succeeds, on the other.
    for _ in 0..6 {
        let (st, _, body) = curl_i(&[&srv.url("/failover")]);
        assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    }
    assert!(
        srv.metric("skiff_upstream_failures_total{pool=\"hang\",reason=\"timeout\"}")
            .unwrap()
            >= 1.0
    );
}

/// A listener whose accept queue is full and never drained: a connect to it waits for
/// ever (its SYN is dropped), as to a node that went away. Returns the port and what
/// must stay alive.
fn unanswered_endpoint() -> (u16, Vec<std::os::fd::OwnedFd>) {
    use rustix::net::{AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    rustix::net::bind(&fd, &addr).unwrap();
    rustix::net::listen(&fd, 0).unwrap();
    let mut held = vec![fd];
    // Fill the queue: these complete the handshake and are never accepted.
    for _ in 0..4 {
        let c = rustix::net::socket_with(
            AddressFamily::INET,
            SocketType::STREAM,
            rustix::net::SocketFlags::NONBLOCK,
            None,
        )
        .unwrap();
        let _ = rustix::net::connect(&c, &addr);
        held.push(c);
    }
    std::thread::sleep(Duration::from_millis(200));
    (addr.port(), held)
}

#[test]
fn http_pools_bound_connects_and_a_body_the_backend_stops_sending() {
    let dir = tempfile::tempdir().unwrap();
    let (_good, good) = echo_server(dir.path(), "good");
    let stall = fake_endpoint("stall");
    let (unanswered, _held) = unanswered_endpoint();
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: f\n    default: true\n    root: .\n    rules:\n      - match: {{ prefix: /stall }}\n        action: {{ proxy: {{ pool: stall }} }}\n      - match: {{ prefix: /failover }}\n        action: {{ proxy: {{ pool: mixed }} }}\npools:\n  - {{ name: stall, protocol: http, endpoints: [\"127.0.0.1:{stall}\"], read_timeout: 1s }}\n  - {{ name: mixed, protocol: http, balance: round_robin, endpoints: [\"127.0.0.1:{unanswered}\", \"127.0.0.1:{good}\"], connect_timeout: 500ms, read_timeout: 10s }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    // The first bytes, then silence: the connection ends (no whole body) after about the
    // read timeout, not when the backend gives up 30 s later.
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.write_all(b"GET /stall HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let t = Instant::now();
    let got = read_until_closed(&mut s, Duration::from_secs(10))
        .expect("the connection was still open 10 s after the backend went silent");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let text = String::from_utf8_lossy(&got);
    // Reframed as chunks; cut off without the last chunk, so not taken for whole.
    assert!(
        text.starts_with("HTTP/1.1 200")
            && text.contains("the first bytes")
            && !text.ends_with("0\r\n\r\n"),
        "{text}"
    );
    // A connect that is never answered gives way to the other endpoint after the
    // connect timeout, not the read timeout.
    for _ in 0..4 {
        let t = Instant::now();
        let (st, _, body) = curl_i(&[&srv.url("/failover")]);
        assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }
}

#[test]
fn a_cgi_endpoint_that_closes_without_answering_is_taken_out_of_rotation() {
    // A worker that dies on every request: after max_fails, the pool sends no more
    // requests there, instead of failing every other one. FastCGI and uwsgi alike.
    let site = php_site();
    std::fs::write(site.path().join("app.py"), WSGI_APP).unwrap();
    let (fpm_port, wsgi_port) = (free_port(), free_port());
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{fpm_port}"));
    let app = site.path().join("app.py");
    let _wsgi = uwsgi(
        &[
            "--socket",
            &format!("127.0.0.1:{wsgi_port}"),
            "--wsgi-file",
            app.to_str().unwrap(),
        ],
        &format!("127.0.0.1:{wsgi_port}"),
    );
    let broken = fake_endpoint("close");
    let pool = |port: u16| {
        format!("endpoints: [\"127.0.0.1:{broken}\", \"127.0.0.1:{port}\"], balance: round_robin, max_fails: 1, fail_timeout: 60s")
    };
    let config = write_config(
        site.path(),
        &format!(
            "virtual_servers:\n  - name: php\n    default: true\n    root: {}\n    rules:\n      - match: {{ prefix: /py/ }}\n        action: {{ uwsgi: {{ pool: wsgi }} }}\n      - match: {{ regex: \"\\\\.php$\" }}\n        action: {{ fastcgi: {{ pool: php }} }}\npools:\n  - {{ name: php, protocol: fastcgi, {} }}\n  - {{ name: wsgi, protocol: uwsgi, {} }}\n",
            site.path().display(),
            pool(fpm_port),
            pool(wsgi_port)
        ),
    );
    let srv = Server::run_config(&config);
    for (target, ok) in [("/echo.php", 200), ("/py/x", 201)] {
        let statuses: Vec<u16> = (0..8).map(|_| curl_i(&[&srv.url(target)]).0).collect();
        let failed = statuses.iter().filter(|&&s| s == 502).count();
        assert!(failed <= 1, "{target}: {statuses:?}");
        assert_eq!(
            statuses.iter().filter(|&&s| s == ok).count(),
            8 - failed,
            "{target}: {statuses:?}"
        );
    }
}

#[test]
fn an_upload_slower_than_the_read_timeout_reaches_the_backend() {
    // 300 kB over about 5 s to a pool whose read timeout is 3 s, and an answer 2 s after
    // the body: the read timeout runs from the upload's end (not the request's start),
    // and the 1 s send timeout only from a pause of the backend's while it is sent.
    let dir = tempfile::tempdir().unwrap();
    let (_echo, port) = echo_server(dir.path(), "echo");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: f\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [\"127.0.0.1:{port}\"], read_timeout: 3s, send_timeout: 1s }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    s.write_all(
        b"POST /up?sleep=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    for _ in 0..10 {
        s.write_all(&[b'u'; 30000]).unwrap();
        std::thread::sleep(Duration::from_millis(500));
    }
    let got = read_until_closed(&mut s, Duration::from_secs(10)).expect("an answer");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("body-len=300000"), "{text}");
    // A body gathered whole before it is sent (under 64 KiB) ends with its one frame:
    // the read timeout runs from there, not the send timeout.
    let (st, _, body) = curl_i(&["--data-binary", "ten bytes!", &srv.url("/small?sleep=2")]);
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        srv.metric("skiff_upstream_failures_total{pool=\"api\",reason=\"timeout\"}"),
        Some(0.0)
    );
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

const WS_ECHO: &str = r#"
import socket, threading, hashlib, base64, sys
GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'
def recvn(c, n):
    b = b''
    while len(b) < n:
        part = c.recv(n - len(b))
        if not part:
            return None
        b += part
    return b
def handle(c):
    data = b''
    while b'\r\n\r\n' not in data:
        data += c.recv(4096)
    lines = data.decode('latin1').split('\r\n')
    key = [l.split(':', 1)[1].strip() for l in lines if l.lower().startswith('sec-websocket-key:')][0]
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    c.sendall(('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n' % accept).encode())
    while True:
        hdr = recvn(c, 2)
        if not hdr:
            return
        op, n, masked = hdr[0] & 0x0f, hdr[1] & 0x7f, hdr[1] & 0x80
        mask = recvn(c, 4) if masked else b'\0\0\0\0'
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(recvn(c, n)))
        if op == 8:
            c.sendall(b'\x88\x00')
            return
        reply = b'echo:' + payload
        c.sendall(bytes([0x81, len(reply)]) + reply)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(16)
while True:
    conn, _ = s.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
"#;

/// Sends a WebSocket handshake to `addr`; returns the connection and the answer's head,
/// lowercased.
fn websocket_handshake(addr: std::net::SocketAddr) -> (std::net::TcpStream, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /chat HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    (s, String::from_utf8_lossy(&head).to_ascii_lowercase())
}

/// The WebSocket echo backend, and a config proxying everything to it (the pool's fields
/// plus `pool_extra`).
fn websocket_site(dir: &Path, pool_extra: &str) -> (Backend, PathBuf) {
    let (ws, port) = python_backend(dir, "ws_echo.py", WS_ECHO);
    let config = write_config(
        dir,
        &format!("virtual_servers:\n  - name: ws\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: ws }} }}\npools:\n  - {{ name: ws, protocol: http, endpoints: [\"127.0.0.1:{port}\"]{pool_extra} }}\n"),
    );
    (ws, config)
}

#[test]
fn websocket_upgrades_pass_through_the_http_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let (_ws, config) = websocket_site(dir.path(), ", read_timeout: 2s");
    let srv = Server::run_config(&config);
    let (mut s, head) = websocket_handshake(srv.addr);
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(
        head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
        "{head}"
    );
    // The tunnel keeps its connection's place under max_connections and in the drain
    // (hyper's connection ended at the 101).
    assert_eq!(srv.metric("skiff_connections_open"), Some(1.0));
    // Frames 1.5 s apart, past the 2 s read timeout in all: bytes moving keep the tunnel.
    for (i, word) in ["hello", "again", "third"].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        let mask = [1u8, 2, 3, 4];
        let mut frame = vec![0x81, 0x80 | word.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(word.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        s.write_all(&frame).unwrap();
        let mut reply = vec![0u8; 2 + 5 + word.len()];
        s.read_exact(&mut reply).unwrap();
        assert_eq!(&reply[..2], &[0x81, (5 + word.len()) as u8]);
        assert_eq!(&reply[2..], format!("echo:{word}").as_bytes());
    }
    // Silent both ways for the read timeout: closed.
    let t = Instant::now();
    assert!(
        read_until_closed(&mut s, Duration::from_secs(10)).is_some(),
        "a silent tunnel was still open after 10 s"
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let end = Instant::now() + Duration::from_secs(5);
    while srv.metric("skiff_connections_open") != Some(0.0) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(srv.metric("skiff_connections_open"), Some(0.0));
}

/// During the shutdown delay (readiness failing, HTTP/1 answers closing their
/// connections), a WebSocket handshake still gets `Connection: upgrade` on its 101: a
/// client must fail the socket without it (RFC 6455 §4.1).
#[test]
fn a_websocket_handshake_during_the_shutdown_delay_keeps_its_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let (_ws, config) = websocket_site(dir.path(), "");
    let srv = Server::run_config_with(&config, &["--shutdown-delay", "5s"]);
    srv.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    let (_tunnel, head) = websocket_handshake(srv.addr);
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("connection: upgrade"), "{head}");
    assert!(!head.contains("connection: close"), "{head}");
}

#[test]
fn killing_a_backend_under_load_fails_only_requests_in_flight_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut backends, endpoints) = echo_pool(dir.path(), "k");
    let config = write_config(
        dir.path(),
        &format!(
            "access_log: {{ format: off }}\nvirtual_servers:\n  - name: api\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [{}], max_fails: 1, fail_timeout: 30s, workers: 4 }}\n",
            endpoints.join(", ")
        ),
    );
    let srv = Server::run_config(&config);
    // The capacity the busy ratio divides by: 4 workers behind each of 3 endpoints up.
    assert_eq!(
        srv.metric("skiff_upstream_workers{pool=\"api\"}"),
        Some(12.0)
    );
    let wrk = Command::new("wrk")
        .args(["-t1", "-c8", "-d4s", &srv.url("/")])
        .stdout(Stdio::piped())
        .spawn()
        .expect("wrk is installed by scripts/install-deps.sh");
    std::thread::sleep(Duration::from_millis(1500));
    drop(backends.remove(1)); // kill one backend mid-run
    let out = wrk.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let total: u64 = text
        .split(" requests in")
        .next()
        .and_then(|t| t.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .expect(&text);
    let non2xx: u64 = text
        .split("Non-2xx or 3xx responses: ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let socket_errors = text.contains("Socket errors");
    assert!(total > 100, "{text}"); // the Python backends manage a few hundred per second
                                    // At most one request per connection can have been in flight to the killed backend.
    assert!(non2xx <= 8, "{non2xx} failures of {total}:\n{text}");
    assert!(!socket_errors, "{text}");
    // After the kill, traffic keeps flowing to the other two.
    for _ in 0..10 {
        assert_eq!(curl_i(&[&srv.url("/")]).0, 200);
    }
    assert_eq!(
        srv.metric("skiff_upstream_endpoints{pool=\"api\",state=\"down\"}"),
        Some(1.0)
    );
    // The endpoint down no longer counts: 4 workers behind each of the 2 left.
    assert_eq!(
        srv.metric("skiff_upstream_workers{pool=\"api\"}"),
        Some(8.0)
    );
}

const DNS_SERVER: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('127.0.0.1', int(sys.argv[1])))
while True:
    data, addr = s.recvfrom(512)
    i = 12
    while data[i] != 0:
        i += data[i] + 1
    qtype = struct.unpack('>H', data[i + 1:i + 3])[0]
    question = data[12:i + 5]
    answers, count = b'', 0
    if qtype == 1:
        for ip in open(sys.argv[2]).read().split():
            answers += b'\xc0\x0c' + struct.pack('>HHIH', 1, 1, 0, 4) + socket.inet_aton(ip)
            count += 1
    s.sendto(data[:2] + b'\x81\x80' + struct.pack('>HHHH', 1, count, 0, 0) + question + answers, addr)
"#;

#[test]
fn dns_names_are_re_resolved_without_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("echo_server.py"), ECHO_SERVER).unwrap();
    let port = free_port();
    let spawn_echo = |host: &str, name: &str| {
        let child = Command::new("python3")
            .arg(dir.path().join("echo_server.py"))
            .args([&port.to_string(), name, host])
            .spawn()
            .unwrap();
        wait_connect(&format!("{host}:{port}"));
        Backend(child)
    };
    let a = spawn_echo("127.0.0.1", "first");
    let _b = spawn_echo("127.0.0.2", "second");
    let answers = dir.path().join("answers");
    std::fs::write(&answers, "127.0.0.1").unwrap();
    std::fs::write(dir.path().join("dns.py"), DNS_SERVER).unwrap();
    let dns_port = free_port();
    let _dns = Backend(
        Command::new("python3")
            .arg(dir.path().join("dns.py"))
            .arg(dns_port.to_string())
            .arg(&answers)
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let config = write_config(
        dir.path(),
        &format!(
            "dns: {{ servers: [\"127.0.0.1:{dns_port}\"], refresh: 200ms }}\nvirtual_servers:\n  - name: api\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [\"api.skiff.test:{port}\"] }}\n"
        ),
    );
    let srv = Server::run_config(&config);
    let who = || {
        let out = curl(&[&srv.url("/")]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("name="))
            .unwrap_or("")
            .to_owned()
    };
    let wait_for = |want: &dyn Fn(&std::collections::HashSet<String>) -> bool| {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            let seen: std::collections::HashSet<String> = (0..6).map(|_| who()).collect();
            if want(&seen) {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("DNS change not picked up");
    };
    wait_for(&|s| s.len() == 1 && s.contains("first"));
    // The name now points at the other backend: followed with no reload.
    std::fs::write(&answers, "127.0.0.2").unwrap();
    wait_for(&|s| s.len() == 1 && s.contains("second"));
    // Two addresses: requests rotate over both.
    std::fs::write(&answers, "127.0.0.1 127.0.0.2").unwrap();
    wait_for(&|s| s.len() == 2);
    // One of them stops: a request whose turn is the dead address is retried at the
    // other within the same request, so none fails, even the first ones.
    drop(a);
    for n in 0..8 {
        assert_eq!(
            who(),
            "second",
            "request {n} after the first backend stopped"
        );
    }
    assert_eq!(
        srv.metric("skiff_config_reloads_total{result=\"success\"}"),
        Some(0.0),
        "no reload happened (the counter starts at 0)"
    );
}

#[test]
fn ip_hash_and_least_conn_balancing_through_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (_backends, endpoints) = echo_pool(dir.path(), "h");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: api\n    default: true\n    root: .\n    rules:\n      - match: {{ prefix: /sticky }}\n        action: {{ proxy: {{ pool: sticky }} }}\n      - action: {{ proxy: {{ pool: least }} }}\npools:\n  - {{ name: sticky, protocol: http, balance: ip_hash, endpoints: [{e}] }}\n  - {{ name: least, protocol: http, balance: least_conn, endpoints: [{e}] }}\n",
            e = endpoints.join(", ")
        ),
    );
    let srv = Server::run_config(&config);
    let name = |path: &str, iface: &str| {
        let out = curl(&["--interface", iface, &srv.url(path)]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("name="))
            .unwrap()
            .to_owned()
    };
    // ip_hash: one client address always reaches the same backend.
    let first = name("/sticky", "127.0.0.1");
    assert!((0..12).all(|_| name("/sticky", "127.0.0.1") == first));
    // Different client addresses spread out.
    let spread: std::collections::HashSet<String> = (2..40)
        .map(|i| name("/sticky", &format!("127.0.0.{i}")))
        .collect();
    assert!(spread.len() >= 2, "{spread:?}");
    // least_conn with sequential requests (none in flight): ties go to the first endpoint.
    assert!((0..6).all(|_| name("/", "127.0.0.1") == "h0"));
}

#[test]
fn a_client_that_leaves_cancels_the_backend_request() {
    let site = php_site();
    std::fs::write(
        site.path().join("long.php"),
        "<?php for ($i = 0; $i < 50; $i++) { echo str_repeat('x', 4000), \"\\n\"; flush(); file_put_contents(__DIR__ . '/progress.txt', \"$i\\n\", FILE_APPEND); usleep(100000); }",
    )
    .unwrap();
    let port = free_port();
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = write_config(
        site.path(),
        &php_config(site.path(), &format!("127.0.0.1:{port}")),
    );
    let srv = Server::run_config(&config);
    // Read a little, then hang up.
    let _ = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "0.5",
            "-o",
            "/dev/null",
            &srv.url("/long.php"),
        ])
        .status();
    let progress = || {
        std::fs::read_to_string(site.path().join("progress.txt"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    std::thread::sleep(Duration::from_millis(1500));
    let after = progress();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        progress(),
        after,
        "the script kept running after the client left"
    );
    assert!(
        after < 25,
        "{after} steps: it should have stopped soon after 0.5 s"
    );
}

/// One HTTP/1.x response read off a raw connection: status, lower-cased headers, and the
/// body as delimited by Content-Length, chunked coding, or (for `to_eof`) the close.
struct RawResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl RawResponse {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn read_response(r: &mut impl std::io::BufRead, head_only: bool) -> RawResponse {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .expect("a status line")
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.to_ascii_lowercase(), v.trim().to_string()));
    }
    let mut resp = RawResponse {
        status,
        headers,
        body: Vec::new(),
    };
    if head_only {
        return resp;
    }
    if let Some(n) = resp.header("content-length") {
        let mut body = vec![0; n.parse().unwrap()];
        r.read_exact(&mut body).unwrap();
        resp.body = body;
    } else if resp.header("transfer-encoding") == Some("chunked") {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim_end(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk).unwrap();
            assert_eq!(&chunk[size..], b"\r\n", "a chunk ends with CRLF");
            if size == 0 {
                break;
            }
            resp.body.extend_from_slice(&chunk[..size]);
        }
    } else {
        r.read_to_end(&mut resp.body).unwrap();
    }
    resp
}

/// Pool requests without a body are served on the HTTP/1.1 fast path, so one keep-alive
/// connection carries static files and PHP pages in any order, pipelined or not: whole
/// backend responses get a Content-Length, streamed ones chunked coding (HTTP/1.1) or the
/// connection's close (HTTP/1.0), and HEAD gets no body.
#[test]
fn pool_requests_share_keep_alive_connections_with_static_files() {
    let (_site, _fpm, srv) = php_over_tcp();
    let stream = std::net::TcpStream::connect(srv.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut w = stream.try_clone().unwrap();
    let mut r = std::io::BufReader::new(stream);
    // Pipelined: static, PHP, static.
    w.write_all(
        b"GET /static.txt HTTP/1.1\r\nHost: a\r\n\r\nGET /echo.php?q=1 HTTP/1.1\r\nHost: a\r\nX-Test: pipelined\r\n\r\nGET /static.txt HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .unwrap();
    let first = read_response(&mut r, false);
    assert_eq!(
        (first.status, first.body.as_slice()),
        (200, &b"served by skiff"[..])
    );
    let php = read_response(&mut r, false);
    assert_eq!(php.status, 200);
    let text = String::from_utf8(php.body.clone()).unwrap();
    assert!(text.contains("QUERY_STRING=q=1\n"), "{text}");
    assert!(text.contains("HTTP_X_TEST=pipelined\n"), "{text}");
    assert_eq!(php.header("x-powered"), Some("fpm"));
    assert!(php.header("date").is_some());
    let third = read_response(&mut r, false);
    assert_eq!(
        (third.status, third.body.as_slice()),
        (200, &b"served by skiff"[..])
    );
    // A streamed PHP response on the same connection: chunked, every chunk there.
    w.write_all(b"GET /stream.php HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let streamed = read_response(&mut r, false);
    assert_eq!(streamed.header("transfer-encoding"), Some("chunked"));
    assert_eq!(streamed.header("content-length"), None);
    let text = String::from_utf8(streamed.body).unwrap();
    for i in 0..5 {
        assert!(text.contains(&format!("chunk{i} ")), "chunk {i} missing");
    }
    // HEAD: the head only; the connection stays usable.
    w.write_all(
        b"HEAD /echo.php HTTP/1.1\r\nHost: a\r\n\r\nGET /static.txt HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .unwrap();
    let head = read_response(&mut r, true);
    assert_eq!(head.status, 200);
    // PHP declared no length, and the empty body of a HEAD response is not one.
    assert_eq!(head.header("content-length"), None);
    let after = read_response(&mut r, false);
    assert_eq!(after.body, b"served by skiff");

    // HTTP/1.0 and a streamed body: delimited by the close.
    let mut s10 = std::net::TcpStream::connect(srv.addr).unwrap();
    s10.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s10.write_all(b"GET /stream.php HTTP/1.0\r\n\r\n").unwrap();
    let mut r10 = std::io::BufReader::new(s10);
    let old = read_response(&mut r10, false);
    assert_eq!(old.header("connection"), Some("close"));
    assert_eq!(old.header("transfer-encoding"), None);
    assert!(String::from_utf8(old.body).unwrap().contains("chunk4 "));
    assert!(
        srv.metric("skiff_upstream_requests_total{pool=\"php\",code=\"200\"}")
            .unwrap()
            >= 4.0
    );
}

#[test]
fn request_bodies_reach_a_pool_over_http2() {
    let (site, _fpm, srv) = php_over_tcp();
    // Several MiB, more than any window: the body flows as the pool reads it.
    let upload: Vec<u8> = (0..5 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let file = site.path().join("upload.bin");
    std::fs::write(&file, &upload).unwrap();
    let data = format!("@{}", file.display());
    let url = srv.url("/upload.php");
    // Over h2c, one request per connection (curl 7.88 fails a second transfer on a
    // prior-knowledge connection, whatever the server: h2load runs several below).
    let post = |body: &str| {
        let out = curl(&[
            "--http2-prior-knowledge",
            "-H",
            "Content-Type: application/octet-stream",
            "--data-binary",
            body,
            &url,
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        post(&data),
        format!("{} {}", upload.len(), sha256_hex(&upload))
    );
    assert_eq!(post("hello"), format!("5 {}", sha256_hex(b"hello")));
    // Four at once on one connection: each stream's body waits for its window in turn.
    let h2load = Command::new("h2load")
        .args([
            "-n",
            "4",
            "-c",
            "1",
            "-m",
            "4",
            "-H",
            "content-type: text/plain",
            "-d",
        ])
        .arg(&file)
        .arg(&url)
        .output()
        .expect("h2load is installed");
    let report = String::from_utf8_lossy(&h2load.stdout).into_owned();
    assert!(
        report.contains("4 succeeded") && report.contains("4 2xx"),
        "{report}"
    );
    // Recorded as HTTP/2 exchanges.
    let end = Instant::now() + Duration::from_secs(5);
    while srv
        .access_log()
        .matches("POST /upload.php HTTP/2.0")
        .count()
        < 6
        && Instant::now() < end
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        srv.access_log()
            .matches("POST /upload.php HTTP/2.0")
            .count(),
        6,
        "{}",
        srv.access_log()
    );
}

/// Over HTTP/2, a pool's answer to HEAD, and its 204, go out without DATA (which would make
/// the response malformed, RFC 9113 §8.1.1), and HEAD carries no length the backend did
/// not declare; a cookie sent as several fields reaches PHP as one (RFC 9113 §8.2.3).
#[test]
fn pool_answers_over_http2_are_framed_as_http_says_and_split_cookies_are_joined() {
    let (site, _fpm, srv) = php_over_tcp();
    std::fs::write(
        site.path().join("nocontent.php"),
        "<?php http_response_code(204); echo 'not for the client';",
    )
    .unwrap();
    std::fs::write(
        site.path().join("cookie.php"),
        "<?php echo $_SERVER['HTTP_COOKIE'] ?? 'none';",
    )
    .unwrap();
    std::fs::write(
        site.path().join("unchanged.php"),
        "<?php http_response_code(304); header('Content-Length: 40'); echo 'not for the client';",
    )
    .unwrap();
    let h2 = "--http2-prior-knowledge";
    let (status, headers, body) = curl_i(&[h2, "-I", &srv.url("/echo.php")]);
    assert_eq!(status, 200);
    assert!(body.is_empty());
    assert!(
        !headers.iter().any(|(n, _)| n == "content-length"),
        "PHP declared no length: {headers:?}"
    );
    let (status, _, body) = curl_i(&[h2, &srv.url("/nocontent.php")]);
    assert_eq!((status, body.as_slice()), (204, &b""[..]));
    // A 204, or a 304, carries no length even for HEAD (RFC 9110 §8.6), as on HTTP/1.1.
    for path in ["/nocontent.php", "/unchanged.php"] {
        for head in [true, false] {
            let mut args = vec![h2];
            if head {
                args.push("-I");
            }
            let url = srv.url(path);
            args.push(&url);
            let (status, headers, body) = curl_i(&args);
            assert!(matches!(status, 204 | 304), "{path}: {status}");
            assert!(body.is_empty(), "{path}");
            assert!(
                !headers.iter().any(|(n, _)| n == "content-length"),
                "{path} (HEAD {head}): {headers:?}"
            );
        }
    }
    let out = curl(&[
        h2,
        "-H",
        "cookie: session=abc",
        "-H",
        "cookie: theme=dark",
        &srv.url("/cookie.php"),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "session=abc; theme=dark"
    );

    // hyper's HTTP/2 engine, kept for comparison, joins them too.
    let config = site.path().join("skiff.yaml");
    let hyper_engine = Server::run_config_with(&config, &["--h2-engine", "hyper"]);
    let out = curl(&[
        h2,
        "-H",
        "cookie: session=abc",
        "-H",
        "cookie: theme=dark",
        &hyper_engine.url("/cookie.php"),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "session=abc; theme=dark"
    );
}

/// Over HTTP/2, a request the configuration cannot answer at once (a pool) is routed once
/// in the connection's poll and handed to its handler with that routing: a rate limit
/// counts it once, as over HTTP/1.1.
#[test]
fn an_http2_request_to_a_rate_limited_pool_is_counted_once() {
    let site = php_site();
    let port = free_port();
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = php_config(site.path(), &format!("127.0.0.1:{port}")).replace(
        "action: { fastcgi: { pool: php } }",
        "action: { fastcgi: { pool: php } }\n        rate_limit: { requests_per_second: 0.05, burst: 3 }",
    );
    assert!(config.contains("rate_limit"), "{config}");
    let srv = Server::run_config(&write_config(site.path(), &config));
    // Three requests one after another on one connection: the burst's three tokens.
    let h2load = Command::new("h2load")
        .args(["-n", "3", "-c", "1", "-m", "1"])
        .arg(srv.url("/echo.php"))
        .output()
        .expect("h2load is installed");
    let report = String::from_utf8_lossy(&h2load.stdout).into_owned();
    assert!(report.contains("3 2xx"), "{report}");
    // The fourth finds the bucket empty.
    let h2load = Command::new("h2load")
        .args(["-n", "1", "-c", "1"])
        .arg(srv.url("/echo.php"))
        .output()
        .expect("h2load is installed");
    let report = String::from_utf8_lossy(&h2load.stdout).into_owned();
    assert!(report.contains("1 4xx"), "{report}");
}
