//! The floor of a tokio task per connection: one current-thread runtime, one task per
//! connection, one fixed response (Skiff's head for a 1 KiB file) per request head read,
//! sent as Skiff sends it: head and body in one buffer and one send(2) for bodies of up to
//! 2 KiB (Skiff's `INLINE_BODY_MAX`), one writev of two buffers above. No parsing, routing, cache or
//! logging: measured beside `skiff serve` and the shared bench's limit responder
//! (`bench/floor.py`), it tells the runtime's cost per request from Skiff's own.
//!
//!   cargo build --release --example tokio_floor
//!   taskset -c 0 target/release/examples/tokio_floor PORT BODY_BYTES

use std::io::IoSlice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(port), Some(body)) = (
        args.get(1).and_then(|p| p.parse::<u16>().ok()),
        args.get(2).and_then(|b| b.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: tokio_floor PORT BODY_BYTES");
        std::process::exit(2);
    };
    // The fields and lengths of the head `skiff serve` sends for a static file.
    let head = format!(
        "HTTP/1.1 200 OK\r\nServer: skiff\r\nDate: Wed, 25 Nov 2026 06:31:08 GMT\r\n\
         content-type: text/html; charset=utf-8\r\n\
         last-modified: Tue, 24 Nov 2026 11:42:26 GMT\r\n\
         etag: \"18eaf86c6b6208f2-400\"\r\naccept-ranges: bytes\r\n\
         Content-Length: {body}\r\n\r\n"
    );
    // Skiff copies a body of up to 2 KiB behind its head (h1 `output::INLINE_BODY_MAX`).
    let inline = body <= 2048;
    let mut head = head.into_bytes();
    if inline {
        head.resize(head.len() + body, b'x');
    }
    let head: &'static [u8] = head.leak();
    let body: &'static [u8] = if inline { &[] } else { vec![b'x'; body].leak() };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the port");
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                loop {
                    let n = match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let heads = buf[..n].windows(4).filter(|w| w == b"\r\n\r\n").count();
                    for _ in 0..heads {
                        // A short write is not retried: the floor's responses fit the
                        // socket's buffer, and a client that stops reading is dropped.
                        let written = if body.is_empty() {
                            stream.write(head).await
                        } else {
                            stream
                                .write_vectored(&[IoSlice::new(head), IoSlice::new(body)])
                                .await
                        };
                        match written {
                            Ok(k) if k == head.len() + body.len() => {}
                            _ => return,
                        }
                    }
                }
            });
        }
    });
}
