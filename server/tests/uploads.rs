//! Uploads to a CGI pool are buffered whole, in an unnamed file, before a worker is taken
//! (as nginx buffers request bodies for FastCGI): a slow upload holds no php-fpm worker,
//! and the backend still gets every byte in order, against a real php-fpm.

mod common;
use common::backends::*;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A php-fpm with `children` workers for the site, and a config serving it.
fn php_served(site: &std::path::Path, children: usize) -> (Backend, std::path::PathBuf) {
    let endpoint = format!("127.0.0.1:{}", free_port());
    let fpm = php_fpm_with(site, &endpoint, children);
    (fpm, write_config(site, &php_config(site, &endpoint)))
}

#[test]
fn a_slow_upload_holds_no_php_worker_and_arrives_whole() {
    let site = php_site();
    // One worker: an upload that held it would keep every other PHP request waiting.
    let (_fpm, config) = php_served(site.path(), 1);
    let srv = Server::run_config(&config);
    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut upload = TcpStream::connect(srv.addr).unwrap();
    upload
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        upload,
        "POST /upload.php HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    upload.write_all(&body[..100_000]).unwrap();
    std::thread::sleep(Duration::from_millis(500));

    // The upload is a third in and paused: the worker answers another request meanwhile.
    let started = Instant::now();
    let (status, _, page) = curl_i(&["-m", "4", &srv.url("/echo.php")]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&page));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the paused upload held the worker for {:?}",
        started.elapsed()
    );

    // Two thirds in, the file holds at least the second third (the first may have been
    // gathered in memory whole), and the gauge says so.
    upload.write_all(&body[100_000..200_000]).unwrap();
    let buffered = || srv.metric("skiff_upstream_body_buffer_bytes").unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    while buffered() < 100_000.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let held = buffered();
    assert!(
        (100_000.0..200_000.0).contains(&held),
        "{held} bytes buffered"
    );

    upload.write_all(&body[200_000..]).unwrap();
    let mut response = Vec::new();
    upload.read_to_end(&mut response).unwrap();
    let (status, _, page) = parse_response(&response);
    assert_eq!(status, 200);
    assert_eq!(
        String::from_utf8(page).unwrap(),
        format!("{} {}", body.len(), sha256_hex(&body))
    );
    let deadline = Instant::now() + Duration::from_secs(3);
    while buffered() > 0.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(buffered(), 0.0, "the file is given back with the request");
}

/// A chunked upload (no Content-Length) is buffered the same way, and the backend gets
/// its length (CGI needs CONTENT_LENGTH up front).
#[test]
fn a_chunked_upload_is_buffered_and_gets_its_length() {
    let site = php_site();
    let (_fpm, config) = php_served(site.path(), 2);
    let srv = Server::run_config(&config);
    let body: Vec<u8> = (0..250_000u32).map(|i| (i % 241) as u8).collect();
    let file = site.path().join("upload.bin");
    std::fs::write(&file, &body).unwrap();
    let upload = format!("@{}", file.display());
    let out = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "-H",
        "Content-Type: application/octet-stream",
        "--data-binary",
        &upload,
        &srv.url("/upload.php"),
    ]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{} {}", body.len(), sha256_hex(&body))
    );
}
