//! A `skiff serve` started for a conformance suite (h2spec, testssl.sh): a one-page site on
//! free loopback ports, HTTPS with a certificate openssl makes on the spot, killed by PID.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::cmd::{cmd, output, run, Failed};

/// How long the server may take to start listening (a debug build, a loaded machine).
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The key type of the certificate the HTTPS listener serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// ECDSA P-256: what the benchmarks and most sites use.
    Ecdsa,
    /// RSA 2048: the one that would let a server offer RSA key exchange, so a scan for it
    /// means something.
    Rsa,
}

/// A running `skiff serve`: plain HTTP on `plain`, HTTPS on `tls`, /metrics on `admin`.
pub struct Served {
    child: Child,
    pub plain: SocketAddr,
    pub tls: SocketAddr,
    pub admin: SocketAddr,
    log: PathBuf,
    _dir: TempDir,
}

impl Served {
    /// Builds skiff (debug or release) and starts it over a one-page site, with a
    /// certificate for `localhost` and 127.0.0.1 (the default for clients without SNI).
    pub fn start(release: bool, key: KeyType) -> Result<Self, Failed> {
        let skiff = build_skiff(release)?;
        let fail = |what: &str, e: io::Error| {
            eprintln!("xtask: {what}: {e}");
            Failed(1)
        };
        let dir = TempDir::new().map_err(|e| fail("cannot create a temporary directory", e))?;
        let site = dir.0.join("site");
        std::fs::create_dir(&site)
            .and_then(|()| {
                std::fs::write(
                    site.join("index.html"),
                    "<!doctype html>\n<title>conformance</title>\n<p>A page for the suites.</p>\n",
                )
            })
            .map_err(|e| fail("cannot write the test site", e))?;
        let (cert, key) = make_certificate(&dir.0, key)?;
        let ports = free_ports::<3>().map_err(|e| fail("no free loopback port", e))?;
        let log = dir.0.join("skiff.log");
        let log_file = std::fs::File::create(&log).map_err(|e| fail("cannot create the log", e))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| fail("cannot create the log", e))?;
        let plain: SocketAddr = format!("127.0.0.1:{}", ports[0]).parse().expect("loopback");
        let tls: SocketAddr = format!("127.0.0.1:{}", ports[1]).parse().expect("loopback");
        let admin: SocketAddr = format!("127.0.0.1:{}", ports[2]).parse().expect("loopback");
        let mut server = Command::new(&skiff);
        server
            .arg("serve")
            .arg(&site)
            .args(["--listen", &plain.to_string()])
            .args(["--tls-listen", &tls.to_string()])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .args(["--admin-listen", &admin.to_string()])
            .args(["--threads", "1", "--access-log", "off"])
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err);
        let child = server
            .spawn()
            .map_err(|e| fail(&format!("cannot start {}", skiff.display()), e))?;
        let mut served = Served {
            child,
            plain,
            tls,
            admin,
            log,
            _dir: dir,
        };
        served.wait_listening()?;
        Ok(served)
    }

    /// The exit status, if the server has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Prints the last lines of the server's log.
    pub fn show_log(&self) {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        for line in tail.into_iter().rev() {
            eprintln!("skiff: {line}");
        }
    }

    /// Waits until the three listeners accept a connection, or the server exits, or
    /// START_TIMEOUT.
    fn wait_listening(&mut self) -> Result<(), Failed> {
        let start = Instant::now();
        for addr in [self.plain, self.tls, self.admin] {
            loop {
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break;
                }
                let exited = self.exited();
                if exited.is_some() || start.elapsed() > START_TIMEOUT {
                    match exited {
                        Some(status) => {
                            eprintln!("xtask: skiff exited before listening ({status})")
                        }
                        None => eprintln!(
                            "xtask: skiff is not listening on {addr} after {START_TIMEOUT:?}"
                        ),
                    }
                    self.show_log();
                    return Err(Failed(1));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cargo build` of the skiff binary; its path in cargo's target directory.
fn build_skiff(release: bool) -> Result<PathBuf, Failed> {
    let mut build = cmd(
        "cargo",
        ["build", "--quiet", "-p", "skiff", "--bin", "skiff"],
    );
    if release {
        build.arg("--release");
    }
    run(build)?;
    let profile = if release { "release" } else { "debug" };
    Ok(target_dir()?.join(profile).join("skiff"))
}

/// A self-signed certificate for `localhost` and 127.0.0.1, valid for two days, and its
/// key, made by the openssl command (scripts/install-deps.sh installs it).
fn make_certificate(dir: &Path, key_type: KeyType) -> Result<(PathBuf, PathBuf), Failed> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let newkey: &[&str] = match key_type {
        KeyType::Ecdsa => &["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        KeyType::Rsa => &["-newkey", "rsa:2048"],
    };
    let mut c = cmd("openssl", ["req", "-x509", "-nodes", "-days", "2"]);
    c.args(newkey)
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    run(c)?;
    Ok((cert, key))
}

/// Runs `c` to completion with its stdout captured, killing it (by PID) after `limit`.
/// Returns its exit code (None if it was killed) and its stdout.
pub fn run_bounded(
    mut c: Command,
    limit: Duration,
    what: &str,
) -> Result<(Option<i32>, String), Failed> {
    c.stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = c.spawn().map_err(|e| {
        eprintln!("xtask: cannot run {what}: {e}");
        Failed(127)
    })?;
    // Read stdout on a thread, so a full pipe never stalls the suite while we poll its exit.
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stdout.read_to_end(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() > limit => {
                eprintln!("xtask: {what} still running after {limit:?}: killed");
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                eprintln!("xtask: waiting for {what}: {e}");
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = reader.join().unwrap_or_default();
    Ok((
        status.and_then(|s| s.code()),
        String::from_utf8_lossy(&text).into_owned(),
    ))
}

/// `name` from the environment variable `env`, else the first match on the PATH
/// (scripts/install-deps.sh installs or links the suites there).
pub fn program(name: &str, env: &str) -> Result<PathBuf, Failed> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    found.ok_or_else(|| {
        eprintln!("xtask: {name} is not on the PATH: run scripts/install-deps.sh (or set {env})");
        Failed(127)
    })
}

/// A directory under the temporary directory, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> io::Result<Self> {
        let base = std::env::temp_dir();
        for n in 0..100u32 {
            let path = base.join(format!("skiff-xtask-suite.{}.{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Self(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("no free temporary directory name"))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// N distinct loopback ports nothing listens on now (all bound at once, so none repeats).
/// Another process could take one before skiff binds it; skiff then fails to start and
/// the target says so.
pub fn free_ports<const N: usize>() -> io::Result<[u16; N]> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<io::Result<Vec<_>>>()?;
    let mut ports = [0; N];
    for (port, l) in ports.iter_mut().zip(&listeners) {
        *port = l.local_addr()?.port();
    }
    Ok(ports)
}

/// cargo's target directory as cargo itself resolves it (CARGO_TARGET_DIR, config files,
/// CI's `target` symlink), from `cargo metadata`; xtask has no JSON parser, and the field
/// is a plain string.
pub fn target_dir() -> Result<PathBuf, Failed> {
    let json = output(cmd(
        "cargo",
        ["metadata", "--format-version", "1", "--no-deps"],
    ))?;
    let json = String::from_utf8_lossy(&json);
    let key = "\"target_directory\":\"";
    let start = json.find(key).map(|i| i + key.len());
    let path = start.and_then(|s| json[s..].find('"').map(|e| &json[s..s + e]));
    match path {
        Some(p) if !p.contains('\\') => Ok(PathBuf::from(p)),
        _ => {
            eprintln!("xtask: cannot read target_directory from `cargo metadata`");
            Err(Failed(1))
        }
    }
}
