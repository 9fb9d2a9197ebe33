//! Running the project's commands: `== step` headers, exit codes, and a tee into a log.

use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus};

/// Why a target stopped: the exit code to leave with (the failing command's own, as a
/// `set -e` shell script would), after printing what failed.
#[derive(Debug)]
pub struct Failed(pub u8);

pub type Outcome = Result<(), Failed>;

/// Prints a step header, as scripts/test.sh always has.
pub fn step(title: impl fmt::Display) {
    println!("== {title}");
}

/// A command from a program and its arguments.
pub fn cmd<I, S>(program: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = Command::new(program);
    c.args(args);
    c
}

/// The exit code a shell gives for a status: the code, or 128 + the signal.
fn code_of(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => u8::try_from(128 + signal).unwrap_or(1),
        (None, None) => 1,
    }
}

fn describe(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    if let Some(dir) = c.get_current_dir() {
        s = format!("(cd {} && {s})", dir.display());
    }
    s
}

fn finish(c: &Command, status: io::Result<ExitStatus>) -> Outcome {
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => {
            let code = code_of(status);
            eprintln!("xtask: `{}` failed (exit {code})", describe(c));
            Err(Failed(if code == 0 { 1 } else { code }))
        }
        Err(e) => {
            eprintln!("xtask: cannot run `{}`: {e}", describe(c));
            Err(Failed(127))
        }
    }
}

/// Runs a command with the terminal as its stdout and stderr.
pub fn run(mut c: Command) -> Outcome {
    let status = c.status();
    finish(&c, status)
}

/// Runs a command and returns its stdout (stderr goes to the terminal).
pub fn output(mut c: Command) -> Result<Vec<u8>, Failed> {
    c.stderr(std::process::Stdio::inherit());
    match c.output() {
        Ok(out) => finish(&c, Ok(out.status)).map(|()| out.stdout),
        Err(e) => finish(&c, Err(e)).map(|()| Vec::new()),
    }
}

/// `c 2>&1 | tee -a log`: stdout and stderr, merged, go to the terminal and are appended
/// to `log`; the outcome is the command's own (as with `set -o pipefail`).
pub fn run_tee(c: Command, log: &Path) -> Outcome {
    tee_into(c, log, &mut io::stdout())
}

fn tee_into(mut c: Command, log: &Path, out: &mut dyn Write) -> Outcome {
    let spawned = io::pipe().and_then(|(mut reader, writer)| {
        c.stdout(writer.try_clone()?).stderr(writer);
        let child = c.spawn();
        // The Command holds the pipe's write ends: replace them, so the reader sees EOF
        // when the child (and whatever it started) is done.
        c.stdout(std::process::Stdio::inherit())
            .stderr(std::process::Stdio::inherit());
        let mut child = child?;
        let mut file = File::options().create(true).append(true).open(log)?;
        let mut buf = [0u8; 8192];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            out.write_all(&buf[..n])?;
            out.flush()?;
            file.write_all(&buf[..n])?;
        }
        child.wait()
    });
    finish(&c, spawned)
}

/// The closing line of scripts/test.sh: the sum of the passed and failed counts of every
/// `test result:` line in the log (awk's `$4` and `$6`).
pub fn summary(log: &str) -> String {
    let (mut passed, mut failed) = (0u64, 0u64);
    for line in log.lines().filter(|l| l.starts_with("test result:")) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        passed += fields.get(3).map_or(0, |f| leading_number(f));
        failed += fields.get(5).map_or(0, |f| leading_number(f));
    }
    format!("{passed} passed, {failed} failed")
}

/// A field's numeric prefix, as awk reads "12;" as 12 and "ok." as 0.
fn leading_number(field: &str) -> u64 {
    let digits: String = field.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_sums_every_test_result_line() {
        let log = "running 3 tests\n\
            test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s\n\
            \n\
            test result: FAILED. 10 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out\n\
            e2e: 4 passed, 0 failed\n\
            test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
        assert_eq!(summary(log), "13 passed, 2 failed");
        assert_eq!(summary(""), "0 passed, 0 failed");
    }

    #[test]
    fn exit_codes_are_the_commands_own() {
        let status = |code: i32| {
            Command::new("sh")
                .args(["-c", &format!("exit {code}")])
                .status()
                .unwrap()
        };
        assert_eq!(code_of(status(101)), 101);
        let killed = Command::new("sh")
            .args(["-c", "kill -TERM $$"])
            .status()
            .unwrap();
        assert_eq!(code_of(killed), 128 + 15);
        assert!(run(cmd("sh", ["-c", "exit 0"])).is_ok());
        assert_eq!(run(cmd("sh", ["-c", "exit 3"])).unwrap_err().0, 3);
    }

    #[test]
    fn tee_appends_stdout_and_stderr_and_keeps_the_exit_code() {
        let dir = std::env::temp_dir().join(format!("xtask-tee-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        std::fs::write(&log, "before\n").unwrap();
        let mut shown = Vec::new();
        let r = tee_into(
            cmd("sh", ["-c", "echo out; echo err >&2; exit 4"]),
            &log,
            &mut shown,
        );
        assert_eq!(r.unwrap_err().0, 4);
        assert_eq!(String::from_utf8(shown).unwrap(), "out\nerr\n");
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(text.starts_with("before\n"), "{text}");
        assert!(text.contains("out\n") && text.contains("err\n"), "{text}");
    }
}
