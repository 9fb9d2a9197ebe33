//! Test harness: starts the real `skiff` binary on ephemeral ports and offers raw-socket,
//! curl and HTTP-client helpers.
#![allow(dead_code)]

pub mod backends;
pub mod tls;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    /// The HTTPS listener's address, when one was asked for (`--tls-listen 127.0.0.1:0`).
    pub tls_addr: Option<SocketAddr>,
    pub root: PathBuf,
    stdout_path: PathBuf,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts `skiff serve ROOT --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 EXTRA...`.
    pub fn start(root: &Path, extra: &[&str]) -> Server {
        let mut args: Vec<String> = vec!["serve".into(), root.to_string_lossy().into_owned()];
        args.extend(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"].map(String::from));
        if !extra.contains(&"--threads") {
            args.extend(["--threads", "2"].map(String::from));
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        Server::spawn(root, &args)
    }

    /// Starts `skiff run --config FILE` (the file should listen on 127.0.0.1:0).
    pub fn run_config(config: &Path) -> Server {
        Server::run_config_with(config, &[])
    }

    /// [`Server::run_config`] with more arguments.
    pub fn run_config_with(config: &Path, extra: &[&str]) -> Server {
        let mut args = vec![
            "run".to_owned(),
            "--config".to_owned(),
            config.to_string_lossy().into_owned(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        Server::spawn(config.parent().unwrap(), &args)
    }

    fn spawn(root: &Path, args: &[String]) -> Server {
        let logs = tempfile::tempdir().unwrap();
        let stdout_path = logs.path().join("access.log");
        let stdout = std::fs::File::create(&stdout_path).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_skiff"))
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skiff");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let captured = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = captured.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
                if !sent {
                    if let Some(rest) = line.split("skiff listening on ").nth(1) {
                        let mut words = rest.split_whitespace();
                        let addr: SocketAddr = words.next().unwrap().parse().unwrap();
                        let _ = words.next(); // "admin"
                        let admin: SocketAddr = words.next().unwrap().parse().unwrap();
                        let _ = words.next(); // "tls"
                        let tls: Option<SocketAddr> = words.next().and_then(|w| w.parse().ok());
                        let _ = tx.send((addr, admin, tls));
                        sent = true;
                    }
                }
                eprintln!("[skiff] {line}");
            }
        });
        let (addr, admin, tls_addr) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("skiff did not report its address");
        Server {
            child,
            addr,
            admin,
            tls_addr,
            root: root.to_owned(),
            stdout_path,
            stderr: captured,
            _dir: Some(logs),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn admin_get(&self, path: &str) -> (u16, String) {
        let resp = raw_exchange(
            self.admin,
            &format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"),
        );
        let status = resp[9..12].parse().unwrap();
        let body = resp.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
        (status, body)
    }

    /// The value of one metric sample, by its full name with labels as exposed.
    pub fn metric(&self, sample: &str) -> Option<f64> {
        let (_, body) = self.admin_get("/metrics");
        body.lines()
            .find(|l| l.starts_with(sample) && l[sample.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// Everything the server wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn access_log(&self) -> String {
        std::fs::read_to_string(&self.stdout_path).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Waits for the process to exit and returns its status code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let end = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < end {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection to `addr` whose receive buffer is `bytes` from the start (set after
/// connecting, the window already offered would stay).
pub fn small_buffer_socket(addr: SocketAddr, bytes: usize) -> TcpStream {
    use rustix::net::{sockopt, AddressFamily, SocketType};
    let fd: std::os::fd::OwnedFd =
        rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    sockopt::set_socket_recv_buffer_size(&fd, bytes).unwrap();
    rustix::net::connect(&fd, &addr).unwrap();
    TcpStream::from(fd)
}

/// Reads until the server closes; `None` if it is still open after `limit`.
pub fn read_until_closed(s: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Some(got),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// Sends raw bytes and reads until the server closes the connection.
pub fn raw_exchange(addr: SocketAddr, request: &str) -> String {
    raw_exchange_bytes(addr, request.as_bytes())
}

pub fn raw_exchange_bytes(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs curl with `-s` and the given arguments; returns its output.
pub fn curl(args: &[&str]) -> Output {
    let out = Command::new("curl")
        .arg("-s")
        .args(args)
        .output()
        .expect("curl is installed");
    assert!(
        out.status.success(),
        "curl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// curl -i: (status, lower-cased headers, body).
pub fn curl_i(args: &[&str]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut full = vec!["-i"];
    full.extend_from_slice(args);
    parse_response(&curl(&full).stdout)
}

pub fn parse_response(raw: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, raw[split + 4..].to_vec())
}

pub fn get_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A document root with a few known files.
pub fn sample_site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("index.html"), "<h1>home</h1>\n").unwrap();
    std::fs::write(p.join("a.txt"), "0123456789abcdefghijklmnopqrstuvwxyz").unwrap();
    std::fs::create_dir(p.join("docs")).unwrap();
    std::fs::write(p.join("docs/index.html"), "<h1>docs</h1>\n").unwrap();
    std::fs::write(p.join(".htpasswd"), "secret").unwrap();
    let big: Vec<u8> = (0..(2 * 1024 * 1024u32)).map(|i| (i % 251) as u8).collect();
    std::fs::write(p.join("big.bin"), big).unwrap();
    dir
}

pub fn big_bin_bytes() -> Vec<u8> {
    (0..(2 * 1024 * 1024u32)).map(|i| (i % 251) as u8).collect()
}

/// A bare HTTP/2 client over a socket for tests that need frame-level control: resets,
/// GOAWAY, windows. Requests are GETs with literal HPACK fields.
pub struct RawH2 {
    pub sock: TcpStream,
    buf: Vec<u8>,
}

/// One frame: type, flags, stream, payload.
#[derive(Debug)]
pub struct RawFrame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl RawH2 {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const GOAWAY: u8 = 0x7;
    pub const END_STREAM: u8 = 0x1;

    /// Connects and sends the preface and an empty SETTINGS.
    pub fn connect(addr: SocketAddr) -> RawH2 {
        let mut sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        sock.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            .unwrap();
        RawH2 {
            sock,
            buf: Vec::new(),
        }
    }

    pub fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        self.sock
            .write_all(&Self::encode(kind, flags, stream, payload))
            .unwrap();
    }

    /// One frame's bytes, for several sent in one write.
    pub fn encode(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    pub fn write(&mut self, bytes: &[u8]) {
        self.sock.write_all(bytes).unwrap();
    }

    /// GET `path` on `stream` (odd, increasing), with END_STREAM.
    pub fn get(&mut self, stream: u32, path: &str) {
        let f = Self::encode_get(stream, path);
        self.write(&f);
    }

    /// The HEADERS frame of [`RawH2::get`].
    pub fn encode_get(stream: u32, path: &str) -> Vec<u8> {
        // :method GET, :scheme http (static), :path and :authority literal, not indexed.
        let mut block = vec![0x82, 0x86, 0x04, path.len() as u8];
        block.extend_from_slice(path.as_bytes());
        block.extend_from_slice(&[0x01, 1, b'a']);
        Self::encode(Self::HEADERS, 0x4 | Self::END_STREAM, stream, &block)
    }

    pub fn window_update(&mut self, stream: u32, n: u32) {
        self.frame(0x8, 0, stream, &n.to_be_bytes());
    }

    pub fn reset(&mut self, stream: u32, code: u32) {
        self.frame(Self::RST_STREAM, 0, stream, &code.to_be_bytes());
    }

    /// The next frame; `None` once the server closed. SETTINGS are acknowledged.
    pub fn read(&mut self) -> Option<RawFrame> {
        loop {
            if self.buf.len() >= 9 {
                let len = (usize::from(self.buf[0]) << 16)
                    | (usize::from(self.buf[1]) << 8)
                    | usize::from(self.buf[2]);
                if self.buf.len() >= 9 + len {
                    let f = RawFrame {
                        kind: self.buf[3],
                        flags: self.buf[4],
                        stream: u32::from_be_bytes(self.buf[5..9].try_into().unwrap())
                            & 0x7fff_ffff,
                        payload: self.buf[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    if f.kind == Self::SETTINGS && f.flags & 1 == 0 {
                        let _ = self.sock.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]);
                    }
                    return Some(f);
                }
            }
            let mut chunk = [0u8; 16384];
            match self.sock.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}
