//! Real backends for the pool tests: php-fpm and uWSGI processes (stopped on drop), the
//! PHP test site, and skiff configurations in front of them. Installed by
//! scripts/install-deps.sh.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn wait_connect(addr: &str) {
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        let ok = match addr.strip_prefix("unix:") {
            Some(p) => std::os::unix::net::UnixStream::connect(p).is_ok(),
            None => std::net::TcpStream::connect(addr).is_ok(),
        };
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("backend at {addr} did not come up");
}

/// A backend process, stopped on drop.
pub struct Backend(pub Child);

/// A Python backend from `script`, written into `dir` as `name` and started with a free
/// port as its argument; returns it once it accepts connections, with its port.
pub fn python_backend(dir: &Path, name: &str, script: &str) -> (Backend, u16) {
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    let port = free_port();
    let backend = Backend(
        std::process::Command::new("python3")
            .arg(&path)
            .arg(port.to_string())
            .spawn()
            .unwrap(),
    );
    wait_connect(&format!("127.0.0.1:{port}"));
    (backend, port)
}

/// Stops a backend the way its own supervisor would: SIGTERM, so that php-fpm's and
/// uWSGI's masters take their workers down with them (after SIGKILL, php-fpm's workers
/// lived on, orphaned, after every run), then SIGKILL if it has not exited in 5 s.
impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn php_fpm_binary() -> PathBuf {
    std::fs::read_dir("/usr/sbin")
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("php-fpm")
        })
        .expect("php-fpm is installed by scripts/install-deps.sh")
}

/// Starts php-fpm listening on `listen` (host:port or a socket path).
pub fn php_fpm(dir: &Path, listen: &str) -> Backend {
    php_fpm_with(dir, listen, 2)
}

/// php-fpm with `children` workers (pm = static).
pub fn php_fpm_with(dir: &Path, listen: &str, children: usize) -> Backend {
    let conf = dir.join(format!("fpm{children}.conf"));
    std::fs::write(
        &conf,
        format!(
            "[global]\npid = {d}/fpm{children}.pid\nerror_log = {d}/fpm{children}.log\ndaemonize = no\n[www]\nlisten = {listen}\npm = static\npm.max_children = {children}\nclear_env = no\ncatch_workers_output = yes\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let child = Command::new(php_fpm_binary())
        .args(["-F", "-R", "-n", "-y"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let wait = if listen.starts_with('/') {
        format!("unix:{listen}")
    } else {
        listen.to_owned()
    };
    wait_connect(&wait);
    Backend(child)
}

pub fn uwsgi(args: &[&str], wait: &str) -> Backend {
    let child = Command::new("uwsgi")
        .args([
            "--plugin",
            "python3",
            "--master",
            "--processes",
            "2",
            "--die-on-term",
            "--disable-logging",
        ])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("uwsgi is installed by scripts/install-deps.sh");
    wait_connect(wait);
    Backend(child)
}

pub const PHP_ECHO: &str = r#"<?php
header('Content-Type: text/plain');
header('X-Powered: fpm');
foreach (['SCRIPT_FILENAME','SCRIPT_NAME','PATH_INFO','QUERY_STRING','REQUEST_METHOD','CONTENT_TYPE','CONTENT_LENGTH','DOCUMENT_ROOT','SERVER_NAME','SERVER_PROTOCOL','REMOTE_ADDR','REQUEST_URI','HTTP_X_TEST'] as $k) {
    echo $k, '=', $_SERVER[$k] ?? '', "\n";
}
"#;

pub fn php_site() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    std::fs::write(p.join("echo.php"), PHP_ECHO).unwrap();
    std::fs::write(
        p.join("upload.php"),
        "<?php $d = file_get_contents('php://input'); echo strlen($d), ' ', hash('sha256', $d);",
    )
    .unwrap();
    std::fs::write(
        p.join("stream.php"),
        "<?php for ($i = 0; $i < 5; $i++) { echo str_repeat(\"chunk$i \", 2000), \"\\n\"; flush(); usleep(200000); }",
    )
    .unwrap();
    std::fs::write(
        p.join("stderr.php"),
        "<?php error_log('skiff-stderr-marker'); echo 'ok';",
    )
    .unwrap();
    std::fs::write(
        p.join("exit.php"),
        "<?php http_response_code(418); echo 'partial'; exit(3); echo 'never';",
    )
    .unwrap();
    std::fs::write(p.join("static.txt"), "served by skiff").unwrap();
    dir
}

pub fn write_config(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("skiff.yaml");
    std::fs::write(
        &path,
        format!("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nthreads: 2\n{body}"),
    )
    .unwrap();
    path
}

pub fn php_config(site: &Path, endpoint: &str) -> String {
    format!(
        "virtual_servers:\n  - name: php\n    default: true\n    root: {}\n    rules:\n      - match: {{ regex: \"\\\\.php(/|$)\" }}\n        action: {{ fastcgi: {{ pool: php }} }}\npools:\n  - {{ name: php, protocol: fastcgi, endpoints: [\"{endpoint}\"], read_timeout: 5s }}\n",
        site.display()
    )
}

/// An HTTP backend that answers with the request line, its name and every header it got;
/// `sleep=S` in the query makes it wait S seconds after reading the body.
pub const ECHO_SERVER: &str = r#"
import http.server, sys, time, urllib.parse
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    # Head and body go out in two writes: without this, Nagle holds the body for the
    # client's delayed ACK, 40 ms per kept-alive request.
    disable_nagle_algorithm = True
    def answer(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n)
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        time.sleep(float(query.get('sleep', ['0'])[0]))
        lines = ['%s %s' % (self.command, self.path), 'name=' + sys.argv[2]]
        lines += ['%s: %s' % (k.lower(), v) for k, v in self.headers.items()]
        lines.append('body-len=%d' % len(body))
        out = ('\n'.join(lines) + '\n').encode()
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain')
        self.send_header('Content-Length', str(len(out)))
        self.send_header('Connection', 'keep-alive')
        self.send_header('X-Hop', 'kept')
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = do_PUT = answer
    def log_message(self, *a): pass
host = sys.argv[3] if len(sys.argv) > 3 else '127.0.0.1'
http.server.ThreadingHTTPServer((host, int(sys.argv[1])), H).serve_forever()
"#;

pub fn echo_server(dir: &Path, name: &str) -> (Backend, u16) {
    let script = dir.join("echo_server.py");
    std::fs::write(&script, ECHO_SERVER).unwrap();
    let port = free_port();
    let child = Command::new("python3")
        .arg(&script)
        .arg(port.to_string())
        .arg(name)
        .spawn()
        .unwrap();
    wait_connect(&format!("127.0.0.1:{port}"));
    (Backend(child), port)
}

/// The SHA-256 of `data`, in hex, as `sha256sum` prints it.
pub fn sha256_hex(data: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            std::io::Write::write_all(&mut c.stdin.take().unwrap(), data)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// The PHP test site, php-fpm on a TCP port, and skiff in front of it.
pub fn php_over_tcp() -> (tempfile::TempDir, Backend, super::Server) {
    let site = php_site();
    let port = free_port();
    let fpm = php_fpm(site.path(), &format!("127.0.0.1:{port}"));
    let config = write_config(
        site.path(),
        &php_config(site.path(), &format!("127.0.0.1:{port}")),
    );
    let srv = super::Server::run_config(&config);
    (site, fpm, srv)
}

/// A WSGI app that echoes the request's method, path, query, body length and script name.
pub const WSGI_APP: &str = r#"
def application(environ, start_response):
    n = int(environ.get('CONTENT_LENGTH') or 0)
    body = environ['wsgi.input'].read(n) if n else b''
    out = ("method=%s\npath=%s\nquery=%s\nlen=%d\nscript=%s\n" % (
        environ['REQUEST_METHOD'], environ['PATH_INFO'], environ['QUERY_STRING'], len(body), environ.get('SCRIPT_NAME', ''))).encode()
    start_response('201 Created', [('Content-Type', 'text/plain'), ('X-App', 'wsgi')])
    return [out]
"#;

/// Three echo backends named PREFIX0..PREFIX2, and their endpoint list for a pool.
pub fn echo_pool(dir: &Path, prefix: &str) -> (Vec<(Backend, u16)>, Vec<String>) {
    let backends: Vec<(Backend, u16)> = (0..3)
        .map(|i| echo_server(dir, &format!("{prefix}{i}")))
        .collect();
    let endpoints = backends
        .iter()
        .map(|(_, p)| format!("\"127.0.0.1:{p}\""))
        .collect();
    (backends, endpoints)
}
