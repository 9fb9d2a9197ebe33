//! HTTP/2 clients that try to hold the server's resources: windows never opened or opened
//! a byte at a time, responses queued behind a zero window, GOAWAYs not read, requests
//! sent without reading. Each must be cut off within its timeout while others are served.

mod common;

use common::backends::write_config;
use common::*;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// An HTTP/2 client that asks for a large file but grants no flow-control window, while
/// answering SETTINGS and PINGs like a live peer: the stream stalls with the socket
/// writable. Returns whether the server closed the connection within `limit`.
fn h2_zero_window_client(addr: SocketAddr, limit: Duration) -> bool {
    h2_window_client(addr, &["/big.bin"], limit, Duration::ZERO, |_| {}).closed
}

/// What an `h2_window_client` saw.
struct Seen {
    /// The server closed the connection.
    closed: bool,
    /// DATA payload bytes received, and whether every stream ended.
    data: usize,
    ended: bool,
}

/// The same, asking for `paths` on streams 1, 3, ..., pausing `pace` after each read
/// and calling `tick` every 250 ms (to open windows), until the server closes, every
/// stream ends or `limit` passes.
fn h2_window_client(
    addr: SocketAddr,
    paths: &[&str],
    limit: Duration,
    pace: Duration,
    tick: impl FnMut(&mut TcpStream),
) -> Seen {
    h2_window_client_on(
        TcpStream::connect(addr).unwrap(),
        paths,
        None,
        limit,
        pace,
        tick,
    )
}

/// `h2_window_client` on a connected socket, its requests carrying `priority` if given.
fn h2_window_client_on(
    mut s: TcpStream,
    paths: &[&str],
    priority: Option<&str>,
    limit: Duration,
    pace: Duration,
    mut tick: impl FnMut(&mut TcpStream),
) -> Seen {
    let mut out = Vec::new();
    out.extend_from_slice(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    // SETTINGS: INITIAL_WINDOW_SIZE (0x4) = 0.
    out.extend_from_slice(&[0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 0x4, 0, 0, 0, 0]);
    for (k, path) in paths.iter().enumerate() {
        // HEADERS, END_STREAM | END_HEADERS; HPACK without Huffman:
        // :method GET, :scheme http, :path, :authority a, and `priority` as a literal
        // with a new name.
        let mut block: Vec<u8> = [
            &[0x82, 0x86, 0x44, path.len() as u8][..],
            path.as_bytes(),
            &[0x41, 1],
            b"a",
        ]
        .concat();
        if let Some(p) = priority {
            block.extend_from_slice(&[0, 8]);
            block.extend_from_slice(b"priority");
            block.push(p.len() as u8);
            block.extend_from_slice(p.as_bytes());
        }
        out.extend_from_slice(&[0, 0, block.len() as u8, 0x1, 0x5]);
        out.extend_from_slice(&(2 * k as u32 + 1).to_be_bytes());
        out.extend_from_slice(&block);
    }
    s.write_all(&out).unwrap();
    let deadline = Instant::now() + limit;
    let mut next_tick = Instant::now();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let mut seen = Seen {
        closed: false,
        data: 0,
        ended: false,
    };
    let mut open = paths.len();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    while Instant::now() < deadline && open > 0 {
        if Instant::now() >= next_tick {
            tick(&mut s);
            next_tick += Duration::from_millis(250);
        }
        match s.read(&mut chunk) {
            Ok(0) => {
                seen.closed = true;
                break;
            }
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                std::thread::sleep(pace);
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                seen.closed = true;
                break;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) => panic!("read: {e}"),
        }
        // Answer whole frames: ACK SETTINGS and PINGs; count DATA and stream ends.
        while buf.len() >= 9 {
            let len =
                (usize::from(buf[0]) << 16) | (usize::from(buf[1]) << 8) | usize::from(buf[2]);
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let payload = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            if matches!(kind, 0x0 | 0x1) && flags & 0x1 != 0 {
                open -= 1;
            }
            let reply = match (kind, flags & 0x1) {
                (0x0, _) => {
                    seen.data += len;
                    continue;
                }
                (0x4, 0) => vec![0, 0, 0, 0x4, 0x1, 0, 0, 0, 0],
                (0x6, 0) => [&[0, 0, 8, 0x6, 0x1, 0, 0, 0, 0][..], &payload].concat(),
                _ => continue,
            };
            if s.write_all(&reply).is_err() {
                seen.closed = true;
                return seen;
            }
        }
    }
    seen.ended = open == 0;
    seen
}

#[test]
fn an_http2_stream_the_peer_grants_no_window_is_cut_off_after_the_send_timeout() {
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("big.bin"), vec![7u8; 1 << 20]).unwrap();
    let srv = Server::start(
        site.path(),
        &["--send-timeout", "1s", "--keepalive-timeout", "60s"],
    );
    assert!(
        h2_zero_window_client(srv.addr, Duration::from_secs(15)),
        "a stalled HTTP/2 stream held its connection for 15 s"
    );
}

#[test]
fn an_http2_response_queued_whole_behind_a_zero_window_is_cut_off_too() {
    // Small enough to leave its body at once: only the connection's flow-control stall
    // clock (not a body waiting to be taken) can see this one.
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("big.bin"), vec![7u8; 10_000]).unwrap();
    let srv = Server::start(
        site.path(),
        &["--send-timeout", "1s", "--keepalive-timeout", "60s"],
    );
    assert!(
        h2_zero_window_client(srv.addr, Duration::from_secs(15)),
        "a response stalled by a zero window held its connection for 15 s"
    );
}

#[test]
fn an_http2_response_queued_whole_keeps_its_stall_clock_while_another_stream_moves() {
    // Stream 1's small response waits whole behind a zero window; stream 3's paced
    // download has all the window it needs, so the connection is never blocked on flow
    // control as a whole.
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir_all(www.join("slow")).unwrap();
    std::fs::write(www.join("small.txt"), vec![7u8; 1000]).unwrap();
    std::fs::write(www.join("slow/big.bin"), vec![7u8; 1 << 20]).unwrap();
    let config = write_config(
        dir.path(),
        "limits: { send_timeout: 1s, keepalive_timeout: 60s }\nvirtual_servers:\n  - name: site\n    default: true\n    root: www\n    rules:\n      - match: { prefix: /slow/ }\n        action: { static: {} }\n        bandwidth: { per_connection: 65536 }\n",
    );
    let srv = Server::run_config(&config);
    let mut opened = false;
    let open = |s: &mut TcpStream| {
        for stream in [0u32, 3] {
            let mut f = vec![0, 0, 4, 0x8, 0];
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend_from_slice(&(16u32 << 20).to_be_bytes());
            if !opened {
                let _ = s.write_all(&f);
            }
        }
        opened = true;
    };
    let paths = ["/small.txt", "/slow/big.bin"];
    assert!(
        h2_window_client(
            srv.addr,
            &paths,
            Duration::from_secs(6),
            Duration::ZERO,
            open
        )
        .closed,
        "a stalled stream was hidden by another one moving"
    );
}

#[test]
fn an_http2_client_that_opens_its_window_in_small_steps_gets_the_whole_file() {
    // 10 KiB of window every 250 ms: each grant is used up within the round it arrives
    // in, so rounds end blocked while a 64 KiB chunk takes 1.6 s to leave, yet data
    // moves; the download takes about 6 s, well past the 1 s send timeout.
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("big.bin"), vec![7u8; 256 << 10]).unwrap();
    let srv = Server::start(
        site.path(),
        &["--send-timeout", "1s", "--keepalive-timeout", "60s"],
    );
    let grant = |s: &mut TcpStream| {
        for stream in [0u32, 1] {
            let mut f = vec![0, 0, 4, 0x8, 0];
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend_from_slice(&(10u32 << 10).to_be_bytes());
            let _ = s.write_all(&f);
        }
    };
    let seen = h2_window_client(
        srv.addr,
        &["/big.bin"],
        Duration::from_secs(20),
        Duration::from_millis(10),
        grant,
    );
    assert!(
        seen.ended && !seen.closed && seen.data == 256 << 10,
        "a slow reader got {} of 256 KiB (closed: {}, ended: {})",
        seen.data,
        seen.closed,
        seen.ended
    );
}

#[test]
fn an_http2_client_trickling_its_connection_window_is_cut_off() {
    // The stream's own window is wide open; the connection's gets one byte every 250 ms.
    // One byte of DATA leaving is not progress: the stalled stream is cut off after the
    // send timeout instead of holding its connection (and a file, or a pool's answer).
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("big.bin"), vec![7u8; 1 << 20]).unwrap();
    let srv = Server::start(
        site.path(),
        &["--send-timeout", "1s", "--keepalive-timeout", "60s"],
    );
    let mut opened = false;
    let trickle = move |s: &mut TcpStream| {
        if !opened {
            let mut f = vec![0, 0, 4, 0x8, 0, 0, 0, 0, 1];
            f.extend_from_slice(&(16u32 << 20).to_be_bytes());
            let _ = s.write_all(&f);
            opened = true;
        }
        let _ = s.write_all(&[0, 0, 4, 0x8, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    };
    let seen = h2_window_client(
        srv.addr,
        &["/big.bin"],
        Duration::from_secs(10),
        Duration::ZERO,
        trickle,
    );
    assert!(
        seen.closed,
        "a byte of connection window every 250 ms held a stalled stream ({} bytes)",
        seen.data
    );
}

#[test]
fn an_http2_stream_waiting_its_turn_behind_others_is_not_cut_off() {
    // Six downloads on one connection with every window open, read at about 800 KB/s
    // through small socket buffers. Their `priority: u=3` makes them go one after the
    // other (RFC 9218, non-incremental; without the field they would take turns), so the
    // last waits about 1.5 s for the five before it, past the 1 s send timeout: its queue
    // does not move, yet the peer withholds nothing.
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("big.bin"), vec![7u8; 256 << 10]).unwrap();
    let srv = Server::start(
        site.path(),
        &[
            "--send-timeout",
            "1s",
            "--keepalive-timeout",
            "60s",
            "--send-buffer-bytes",
            "16384",
        ],
    );
    let paths = ["/big.bin"; 6];
    let mut opened = false;
    let open = |s: &mut TcpStream| {
        if !opened {
            for stream in [0u32, 1, 3, 5, 7, 9, 11] {
                let mut f = vec![0, 0, 4, 0x8, 0];
                f.extend_from_slice(&stream.to_be_bytes());
                f.extend_from_slice(&(16u32 << 20).to_be_bytes());
                let _ = s.write_all(&f);
            }
        }
        opened = true;
    };
    let seen = h2_window_client_on(
        small_buffer_socket(srv.addr, 16384),
        &paths,
        Some("u=3"),
        Duration::from_secs(30),
        Duration::from_millis(20),
        open,
    );
    assert!(
        seen.ended && !seen.closed && seen.data == 6 * (256 << 10),
        "a client reading steadily got {} of {} bytes (closed: {}, ended: {})",
        seen.data,
        6 * (256 << 10),
        seen.closed,
        seen.ended
    );
}

#[test]
fn an_idle_http2_connection_whose_goaway_is_not_read_is_dropped_after_a_linger() {
    // The response leaves the stream queues whole, so the connection turns idle while
    // most of it still waits in the driver's batch behind small socket buffers; the
    // client then takes nothing (a byte now and then would defeat the send deadline).
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("page.bin"), vec![7u8; 60_000]).unwrap();
    let srv = Server::start(
        site.path(),
        &[
            "--keepalive-timeout",
            "1s",
            "--send-timeout",
            "60s",
            "--send-buffer-bytes",
            "4096",
        ],
    );
    let mut s = small_buffer_socket(srv.addr, 4096);
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]);
    // HEADERS, END_STREAM | END_HEADERS: GET http /page.bin, :authority a.
    let block = [&[0x82, 0x86, 0x44, 9][..], b"/page.bin", &[0x41, 1], b"a"].concat();
    out.extend_from_slice(&[0, 0, block.len() as u8, 0x1, 0x5, 0, 0, 0, 1]);
    out.extend_from_slice(&block);
    s.write_all(&out).unwrap();
    // Idle after 1 s, then the linger (2 s); the send deadline alone would take 60 s.
    std::thread::sleep(Duration::from_secs(6));
    let got = read_until_closed(&mut s, Duration::from_secs(5)).map(|b| b.len());
    assert!(
        got.is_some_and(|n| n < 60_000),
        "the idle connection was kept past its linger (read {got:?} bytes)"
    );
}

/// An HTTP/2 client with small socket buffers that asks for long redirects (HEAD, so
/// each is one HEADERS frame each way, ours padded) and reads none of the answers, slowly
/// enough to stay under the stream limit. Returns how many requests went before its
/// writes stalled, if they did.
fn h2_asks_without_reading(addr: SocketAddr, max_requests: u32) -> Option<u32> {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let fd: OwnedFd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    sockopt::set_socket_recv_buffer_size(&fd, 4096).unwrap();
    sockopt::set_socket_send_buffer_size(&fd, 4096).unwrap();
    rustix::net::connect(&fd, &addr).unwrap();
    let mut s = TcpStream::from(fd);
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    // SETTINGS: HEADER_TABLE_SIZE (0x1) = 0, so no response is shortened by indexing.
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend_from_slice(&[0, 0, 6, 0x4, 0, 0, 0, 0, 0, 0, 0x1, 0, 0, 0, 0]);
    // The first request adds its fields to our HPACK table (literal with incremental
    // indexing): :method HEAD, :path /docs?q..., :authority a; the next index them.
    let path = format!("/docs?{}", "q".repeat(1000));
    let rest = path.len() - 127;
    let mut first = vec![0, 0x42, 4];
    first.extend_from_slice(b"HEAD");
    first.extend_from_slice(&[0x86, 0x44, 0x7f, rest as u8 | 0x80, (rest >> 7) as u8]);
    first.extend_from_slice(path.as_bytes());
    first.extend_from_slice(&[0x41, 1, b'a']);
    let frame = |out: &mut Vec<u8>, id: u32, payload: &[u8]| {
        let len = payload.len() as u32;
        // END_STREAM | END_HEADERS | PADDED.
        out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, 0x1, 0xd]);
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(payload);
    };
    frame(&mut out, 1, &first);
    s.write_all(&out).unwrap();
    out.clear();
    // The connection is up before the flood: one read must not hold many batches.
    std::thread::sleep(Duration::from_millis(200));
    // 255 bytes of padding; indexed :method HEAD (64), :scheme http, :path (63),
    // :authority a (62).
    let mut again = vec![255, 0xc0, 0x86, 0xbf, 0xbe];
    again.resize(again.len() + 255, 0);
    let mut id = 3;
    while id / 2 < max_requests {
        for _ in 0..8 {
            frame(&mut out, id, &again);
            id += 2;
        }
        match s.write_all(&out) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Some(id / 2);
            }
            Err(e) => panic!("the server dropped the connection: {e}"),
        }
        out.clear();
        // The server closes these streams as it reads them: a batch at a time stays
        // under its 128 concurrent streams.
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

#[test]
fn an_http2_client_that_asks_without_reading_is_not_read_on() {
    let site = sample_site();
    let srv = Server::start(site.path(), &["--send-timeout", "60s"]);
    let went = h2_asks_without_reading(srv.addr, 20_000);
    eprintln!("requests before the client's writes stalled: {went:?}");
    assert!(
        went.is_some(),
        "20,000 requests were read while their responses were not"
    );
}
