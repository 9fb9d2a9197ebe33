//! What the server believes of a request's headers, and what it tells backends: Host,
//! X-Forwarded-For, header names that collide in CGI, framing, interim statuses,
//! upgrades and PHP scripts. Each case here was a way past a rule or into a backend.

mod common;

use common::backends::*;
use common::*;

fn statuses(text: &str) -> Vec<u16> {
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text[i + 9..i + 12].parse().ok())
        .collect()
}

/// A PHP site with extra scripts, php-fpm, and skiff with `extra` config lines.
fn php_server(scripts: &[(&str, &str)], extra: &str) -> (tempfile::TempDir, Backend, Server) {
    let site = php_site();
    for (name, body) in scripts {
        let path = site.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let port = free_port();
    let fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = write_config(
        site.path(),
        &format!(
            "{extra}virtual_servers:\n  - name: php\n    default: true\n    root: {root}\n    rules:\n      - match: {{ regex: \"\\\\.php(/|$)\" }}\n        action: {{ fastcgi: {{ pool: php }} }}\npools:\n  - {{ name: php, protocol: fastcgi, endpoints: [\"127.0.0.1:{port}\"], read_timeout: 5s }}\n",
            root = site.path().display()
        ),
    );
    let srv = Server::run_config(&config);
    (site, fpm, srv)
}

/// An HTTP echo backend, and skiff proxying every request to it; `pool_extra` adds
/// fields to the pool.
fn proxy_to_echo(pool_extra: &str) -> (tempfile::TempDir, Backend, Server) {
    let dir = tempfile::tempdir().unwrap();
    let (echo, port) = echo_server(dir.path(), "e");
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: a\n    default: true\n    root: .\n    rules:\n      - action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [\"127.0.0.1:{port}\"]{pool_extra} }}\n",
        ),
    );
    let srv = Server::run_config(&config);
    (dir, echo, srv)
}

const SERVER_VARS: &str = "<?php foreach (['HTTP_HOST','SERVER_NAME','HTTP_X_FORWARDED_FOR','HTTP_X_REMOTE_USER'] as $k) { echo $k, '=', $_SERVER[$k] ?? '-', \"\\n\"; }";

#[test]
fn two_host_fields_are_refused_on_both_paths() {
    let site = sample_site();
    let srv = Server::start(site.path(), &[]);
    let fast = raw_exchange_bytes(
        srv.addr,
        b"GET /index.html HTTP/1.1\r\nHost: public.test\r\nHost: admin.test\r\n\r\n",
    );
    assert_eq!(statuses(&fast), [400], "{fast}");
    // A body sends the request through hyper.
    let hyper = raw_exchange_bytes(
        srv.addr,
        b"POST /index.html HTTP/1.1\r\nHost: public.test\r\nHost: admin.test\r\nContent-Length: 1\r\n\r\nx",
    );
    assert_eq!(statuses(&hyper), [400], "{hyper}");
}

#[test]
fn hosts_that_are_not_host_port_are_refused_and_host_is_normalised() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("www")).unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "virtual_servers:\n  - name: a\n    hosts: [a.test]\n    root: {}\n    rules:\n      - match: {{ prefix: /old/ }}\n        action: {{ redirect: {{ to: \"http://$host/new/\", status: 301 }} }}\n",
            dir.path().join("www").display()
        ),
    );
    let srv = Server::run_config(&config);
    for host in [
        "a.test:80@evil.example",
        "a.test/evil",
        "a.test:x",
        "a..test",
    ] {
        let req = format!("GET /old/ HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let answer = raw_exchange_bytes(srv.addr, req.as_bytes());
        assert_eq!(statuses(&answer), [400], "Host: {host}: {answer}");
        assert!(!answer.contains("evil"), "{answer}");
    }
    let answer = raw_exchange_bytes(
        srv.addr,
        b"GET /old/ HTTP/1.1\r\nHost: A.Test.:8080\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(statuses(&answer), [301], "{answer}");
    assert!(
        answer.contains("\r\nlocation: http://a.test/new/\r\n"),
        "{answer}"
    );
    // An absolute-form target is routed on its own authority, on both paths.
    for body in ["", "Content-Length: 1\r\n\r\nx"] {
        let req = format!(
            "GET http://a.test/old/ HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n{}",
            if body.is_empty() { "\r\n" } else { body }
        );
        let answer = raw_exchange_bytes(srv.addr, req.as_bytes());
        assert_eq!(statuses(&answer), [301], "{req}: {answer}");
    }
}

#[test]
fn every_forwarded_for_line_decides_access_and_reaches_http_backends() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("www")).unwrap();
    std::fs::write(dir.path().join("www/private.txt"), "secret").unwrap();
    let (_echo, port) = echo_server(dir.path(), "e");
    let config = write_config(
        dir.path(),
        &format!(
            "trusted_proxies: [127.0.0.0/8]\nvirtual_servers:\n  - name: a\n    default: true\n    root: {}\n    rules:\n      - match: {{ prefix: /private }}\n        action: {{ static: {{}} }}\n        access: {{ allow: [10.0.0.0/8] }}\n      - match: {{ prefix: /api/ }}\n        action: {{ proxy: {{ pool: api }} }}\npools:\n  - {{ name: api, protocol: http, endpoints: [\"127.0.0.1:{port}\"] }}\n",
            dir.path().join("www").display()
        ),
    );
    let srv = Server::run_config(&config);
    // The client wrote the first line; the trusted proxy (the peer) appended the second.
    let two_lines = raw_exchange_bytes(
        srv.addr,
        b"GET /private.txt HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.1.1.1\r\nX-Forwarded-For: 203.0.113.5\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(statuses(&two_lines), [403], "{two_lines}");
    let inside = raw_exchange_bytes(
        srv.addr,
        b"GET /private.txt HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 203.0.113.5\r\nX-Forwarded-For: 10.1.1.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(statuses(&inside), [200], "{inside}");
    // The proxy appends to the whole list.
    let echoed = raw_exchange_bytes(
        srv.addr,
        b"GET /api/x HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.1.1.1\r\nX-Forwarded-For: 203.0.113.5\r\nX_Forwarded_For: 6.6.6.6\r\nConnection: close\r\n\r\n",
    );
    assert!(
        echoed.contains("\nx-forwarded-for: 10.1.1.1, 203.0.113.5, 127.0.0.1\n"),
        "{echoed}"
    );
    assert!(
        !echoed.contains("6.6.6.6"),
        "an underscored header reached the backend: {echoed}"
    );
}

#[test]
fn http2_requests_to_an_http_pool_carry_the_authority_as_host() {
    let (_dir, _echo, srv) = proxy_to_echo("");
    let out = curl(&[
        "--http2-prior-knowledge",
        "-H",
        "X-Forwarded-Host: spoofed.example",
        "--resolve",
        &format!("shop.test:{}:127.0.0.1", srv.addr.port()),
        &format!("http://shop.test:{}/x", srv.addr.port()),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let port = srv.addr.port();
    assert!(
        text.contains(&format!("\nhost: shop.test:{port}\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("\nx-forwarded-host: shop.test:{port}\n")),
        "{text}"
    );
    assert!(!text.contains("spoofed"), "{text}");
}

#[test]
fn cgi_backends_get_one_host_normalised_names_and_no_underscored_headers() {
    let (_site, _fpm, srv) = php_server(&[("vars.php", SERVER_VARS)], "");
    let port = srv.addr.port();
    let resolve = format!("Shop.Test:{port}:127.0.0.1");
    let url = format!("http://Shop.Test:{port}/vars.php");
    let vars = |extra: &[&str]| {
        let mut args = vec!["--resolve", resolve.as_str()];
        args.extend_from_slice(extra);
        args.push(url.as_str());
        String::from_utf8_lossy(&curl(&args).stdout).into_owned()
    };
    for protocol in [&[][..], &["--http2-prior-knowledge"][..]] {
        let mut extra = protocol.to_vec();
        extra.extend_from_slice(&[
            "-H",
            "X-Forwarded-For: 203.0.113.5",
            "-H",
            "X_Forwarded_For: 6.6.6.6",
            "-H",
            "X_Remote_User: admin",
        ]);
        let text = vars(&extra);
        assert!(
            text.contains(&format!("HTTP_HOST=Shop.Test:{port}\n")),
            "{protocol:?}: {text}"
        );
        assert!(
            text.contains("SERVER_NAME=shop.test\n"),
            "{protocol:?}: {text}"
        );
        assert!(
            text.contains("HTTP_X_FORWARDED_FOR=203.0.113.5\n"),
            "{protocol:?}: {text}"
        );
        assert!(
            text.contains("HTTP_X_REMOTE_USER=-\n"),
            "{protocol:?}: {text}"
        );
    }
}

#[test]
fn an_interim_status_from_php_is_a_502_on_both_paths_and_pipelining_stays_in_step() {
    let (_site, _fpm, srv) = php_server(
        &[(
            "early.php",
            "<?php header('Status: 103 Early Hints'); echo 'x';",
        )],
        "",
    );
    let fast = raw_exchange_bytes(
        srv.addr,
        b"GET /early.php HTTP/1.1\r\nHost: a\r\n\r\nGET /static.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(statuses(&fast), [502, 200], "{fast}");
    assert!(fast.ends_with("served by skiff"), "{fast}");
    let hyper = raw_exchange_bytes(
        srv.addr,
        b"POST /early.php HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx",
    );
    assert_eq!(statuses(&hyper), [502], "{hyper}");
}

#[test]
fn content_length_with_transfer_encoding_is_refused_and_closes() {
    let (_site, _fpm, srv) = php_server(&[], "");
    let fast = raw_exchange_bytes(
        srv.addr,
        b"POST /upload.php HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /static.txt HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(statuses(&fast), [400], "{fast}");
    // On a connection hyper already serves (the first request had a body), hyper drops
    // the Content-Length, reads the body as chunked and closes after answering (RFC 9112
    // §6.3): the backend sees one consistent request and nothing after it is served.
    let hyper = raw_exchange_bytes(
        srv.addr,
        b"POST /upload.php HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx\
          POST /upload.php HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n\
          GET /static.txt HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert_eq!(statuses(&hyper), [200, 200], "{hyper}");
    assert!(
        hyper.ends_with("0 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        "the second body was not read as the empty chunked body: {hyper}"
    );
}

#[test]
fn chunked_bodies_are_held_to_the_pool_limit_as_they_stream() {
    let (_dir, _echo, srv) = proxy_to_echo(", max_body_size: 1000");
    let body = "x".repeat(3000);
    let (status, _, _) = curl_i(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &body,
        &srv.url("/up"),
    ]);
    assert_eq!(status, 413);
    let (status, _, _) = curl_i(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        "small",
        &srv.url("/up"),
    ]);
    assert_eq!(status, 200);
}

#[test]
fn only_websocket_upgrades_are_tunnelled_unless_a_rule_allows_more() {
    let (_dir, _echo, srv) = proxy_to_echo("");
    let echoed = raw_exchange_bytes(
        srv.addr,
        b"GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\nGET /y HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert!(
        !echoed.to_ascii_lowercase().contains("upgrade: h2c"),
        "{echoed}"
    );
    assert_eq!(statuses(&echoed), [200, 200], "{echoed}");
}

#[test]
fn a_php_path_through_an_upload_is_404_and_php_is_not_asked() {
    let (site, _fpm, srv) = php_server(&[("uploads/x.jpg", "<?php echo 'pwned';")], "");
    let (status, _, body) = curl_i(&[&srv.url("/uploads/x.jpg/a.php")]);
    assert_eq!(status, 404);
    assert!(!String::from_utf8_lossy(&body).contains("pwned"));
    // The split is at the first component that names a script.
    std::fs::write(
        site.path().join("real.php"),
        "<?php echo $_SERVER['PATH_INFO'];",
    )
    .unwrap();
    let (status, _, body) = curl_i(&[&srv.url("/real.php/b.php/c")]);
    assert_eq!((status, &body[..]), (200, &b"/b.php/c"[..]));
}

#[test]
fn an_upper_case_php_path_through_an_upload_is_404_too() {
    // `extensions: [php]` matches `.PHP` as well; the split and the script check must
    // see it as the same name, or php-fpm is asked to run `/uploads/x.jpg/a.PHP`.
    let site = php_site();
    std::fs::create_dir_all(site.path().join("uploads")).unwrap();
    std::fs::write(site.path().join("uploads/x.jpg"), "<?php echo 'pwned';").unwrap();
    let port = free_port();
    let _fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = write_config(
        site.path(),
        &format!(
            "virtual_servers:\n  - name: php\n    default: true\n    root: {root}\n    rules:\n      - match: {{ extensions: [php] }}\n        action: {{ fastcgi: {{ pool: php }} }}\npools:\n  - {{ name: php, protocol: fastcgi, endpoints: [\"127.0.0.1:{port}\"], read_timeout: 5s }}\n",
            root = site.path().display()
        ),
    );
    let srv = Server::run_config(&config);
    let asked = "skiff_upstream_requests_total{pool=\"php\",code=\"200\"}";
    for target in ["/uploads/x.jpg/a.PHP", "/uploads/x.jpg/a.Php"] {
        let (status, _, body) = curl_i(&[&srv.url(target)]);
        assert_eq!(status, 404, "{target}: {}", String::from_utf8_lossy(&body));
        assert!(!String::from_utf8_lossy(&body).contains("pwned"));
    }
    assert_eq!(srv.metric(asked).unwrap_or(0.0), 0.0, "php-fpm was asked");
}
