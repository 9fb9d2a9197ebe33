//! A bounded wrk load that runs while the test changes something, and its error count.

use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

/// What wrk reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    pub requests: u64,
    /// Responses other than 2xx and 3xx.
    pub bad_status: u64,
    /// Socket errors: connect, read, write and timeout.
    pub socket_errors: u64,
    pub raw: String,
}

impl LoadReport {
    pub fn errors(&self) -> u64 {
        self.bad_status + self.socket_errors
    }

    /// Parses wrk's summary: "N requests in ...", "Socket errors: connect a, read b, write c,
    /// timeout d" and "Non-2xx or 3xx responses: n".
    pub fn parse(raw: &str) -> Result<LoadReport, String> {
        let requests = raw
            .lines()
            .find_map(|l| {
                l.trim()
                    .split_once(" requests in ")
                    .map(|(n, _)| n.trim().to_string())
            })
            .ok_or_else(|| format!("wrk printed no request count:\n{raw}"))?
            .parse::<u64>()
            .map_err(|e| format!("wrk request count: {e}"))?;
        let mut socket_errors = 0;
        if let Some(line) = raw
            .lines()
            .find(|l| l.trim_start().starts_with("Socket errors:"))
        {
            for part in line.split(':').nth(1).unwrap_or("").split(',') {
                let n = part.split_whitespace().nth(1).unwrap_or("");
                socket_errors += n.parse::<u64>().map_err(|_| format!("bad line: {line}"))?;
            }
        }
        let bad_status = match raw
            .lines()
            .find(|l| l.contains("Non-2xx or 3xx responses:"))
        {
            Some(line) => line
                .rsplit(':')
                .next()
                .unwrap()
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("bad line: {line}"))?,
            None => 0,
        };
        Ok(LoadReport {
            requests,
            bad_status,
            socket_errors,
            raw: raw.to_string(),
        })
    }
}

/// A wrk run in the background, bounded by its duration.
pub struct Load {
    handle: JoinHandle<Result<LoadReport, String>>,
}

impl Load {
    /// Starts `wrk -t1 -c CONNECTIONS -d DURATION URL` (keep-alive connections).
    pub fn start(url: &str, duration: Duration, connections: u32) -> Load {
        Load::run(url, duration, connections, None)
    }

    /// Like [`Load::start`], each connection pausing `pause` between requests (wrk's Lua
    /// `delay()`), for a request rate that does not also load the CPU.
    pub fn start_paced(url: &str, duration: Duration, connections: u32, pause: Duration) -> Load {
        Load::run(url, duration, connections, Some(pause))
    }

    fn run(url: &str, duration: Duration, connections: u32, pause: Option<Duration>) -> Load {
        let url = url.to_string();
        let handle = std::thread::spawn(move || {
            let script = match pause {
                Some(pause) => {
                    let path = std::env::temp_dir().join(format!(
                        "skiff-e2e-wrk-{}-{}.lua",
                        std::process::id(),
                        pause.as_millis()
                    ));
                    std::fs::write(
                        &path,
                        format!("function delay() return {} end\n", pause.as_millis()),
                    )
                    .map_err(|e| format!("write the wrk script: {e}"))?;
                    Some(path)
                }
                None => None,
            };
            let mut wrk = Command::new("wrk");
            wrk.args([
                "-t1",
                &format!("-c{connections}"),
                &format!("-d{}s", duration.as_secs()),
            ]);
            if let Some(script) = &script {
                wrk.arg("-s").arg(script);
            }
            let out = wrk
                .args(["--timeout", "5s", &url])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| {
                    format!("cannot run wrk (scripts/install-deps.sh installs it): {e}")
                })?;
            if let Some(script) = &script {
                let _ = std::fs::remove_file(script);
            }
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if !out.status.success() {
                return Err(format!(
                    "wrk failed: {}\n{text}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            LoadReport::parse(&text)
        });
        Load { handle }
    }

    /// Waits for wrk to finish.
    pub fn finish(self) -> LoadReport {
        self.handle
            .join()
            .expect("wrk thread")
            .unwrap_or_else(|e| panic!("{e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_wrk_summary_with_errors() {
        let raw = "Running 10s test @ http://10.96.0.5/\n  1 threads and 8 connections\n\
                   12345 requests in 10.00s, 3.1MB read\n\
                   Socket errors: connect 1, read 2, write 0, timeout 3\n\
                   Non-2xx or 3xx responses: 7\nRequests/sec: 1234.5\n";
        let r = LoadReport::parse(raw).unwrap();
        assert_eq!(
            (r.requests, r.socket_errors, r.bad_status, r.errors()),
            (12345, 6, 7, 13)
        );
    }

    #[test]
    fn parses_clean_summary_and_rejects_garbage() {
        let r = LoadReport::parse("  99 requests in 1.00s, 1KB read\n").unwrap();
        assert_eq!((r.requests, r.errors()), (99, 0));
        assert!(LoadReport::parse("wrk: connection refused").is_err());
        assert!(LoadReport::parse("1 requests in 1s\nSocket errors: connect x").is_err());
    }
}
