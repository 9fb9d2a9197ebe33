//! `cargo xtask testssl`: testssl.sh scans skiff's HTTPS listener and is judged on the TLS
//! policy README promises: TLS 1.2 and 1.3 only, AEAD suites with ECDHE only (no CBC, no RSA
//! key exchange), session tickets on, and no vulnerability testssl knows of.
//!
//! The certificate is RSA, the one that would let a server offer RSA key exchange, so the
//! scan's "none offered" means something. Findings about the certificate itself are not
//! judged: it is self-signed and lives two days.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::cmd::{step, Failed, Outcome};
use crate::served::{program, run_bounded, KeyType, Served, TempDir};

/// A whole scan of the chosen sections takes about a minute here; the bound is for a hang.
const SCAN_TIMEOUT: Duration = Duration::from_secs(600);

/// testssl's sections: protocols, standard cipher lists, forward secrecy, server
/// preferences, server defaults (tickets), vulnerabilities, and each cipher per protocol.
const SECTIONS: &[&str] = &["-p", "-s", "-f", "-P", "-S", "-U", "-E"];

/// The vulnerability checks `-U` runs; each must be reported, and reported harmless.
const VULNERABILITIES: &[&str] = &[
    "heartbleed",
    "CCS",
    "ticketbleed",
    "ROBOT",
    "secure_renego",
    "secure_client_renego",
    "CRIME_TLS",
    "BREACH",
    "POODLE_SSL",
    "fallback_SCSV",
    "SWEET32",
    "FREAK",
    "DROWN",
    "LOGJAM",
    "BEAST",
    "LUCKY13",
    "RC4",
];

/// One row of testssl's CSV report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub id: String,
    pub severity: String,
    pub finding: String,
}

/// Reads testssl's `--csvfile` report: a header, then quoted fields
/// `"id","fqdn/ip","port","severity","finding","cve","cwe"` (a `""` inside a field is a
/// quote). A row that does not have that shape is an error naming its line.
pub fn parse_csv(text: &str) -> Result<Vec<Finding>, String> {
    let mut rows = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let fields = split_quoted(line).ok_or_else(|| format!("line {}: not quoted CSV", n + 1))?;
        if fields.len() != 7 {
            return Err(format!(
                "line {}: {} fields, want 7 (id, fqdn/ip, port, severity, finding, cve, cwe)",
                n + 1,
                fields.len()
            ));
        }
        if n == 0 && fields[0] == "id" {
            continue;
        }
        rows.push(Finding {
            id: fields[0].clone(),
            severity: fields[3].clone(),
            finding: fields[4].clone(),
        });
    }
    Ok(rows)
}

/// `"a","b ""c""",""` into its fields; None unless every field is quoted.
fn split_quoted(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        if chars.next()? != '"' {
            return None;
        }
        let mut field = String::new();
        loop {
            match chars.next()? {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => break,
                c => field.push(c),
            }
        }
        fields.push(field);
        match chars.next() {
            None => return Some(fields),
            Some(',') => continue,
            Some(_) => return None,
        }
    }
}

/// Every way the report breaks the policy, one line each; empty when it holds. Rules are
/// checked on what testssl reported, and a check testssl did not report is a failure too,
/// so a scan that ran nothing cannot pass.
pub fn judge(findings: &[Finding]) -> Vec<String> {
    let mut problems = Vec::new();
    let get = |id: &str| findings.iter().find(|f| f.id == id);
    let expect = |id: &str, want: &str, problems: &mut Vec<String>| match get(id) {
        Some(f) if f.finding.starts_with(want) => {}
        Some(f) => problems.push(format!("{id}: \"{}\", want \"{want}\"", f.finding)),
        None => problems.push(format!("{id}: not in the report")),
    };
    for old in ["SSLv2", "SSLv3", "TLS1", "TLS1_1"] {
        expect(old, "not offered", &mut problems);
    }
    for current in ["TLS1_2", "TLS1_3"] {
        expect(current, "offered", &mut problems);
    }
    // Cipher classes: none of the weak ones, and no CBC (testssl's "AVERAGE" class).
    for class in ["NULL", "aNULL", "EXPORT", "LOW", "3DES_IDEA", "AVERAGE"] {
        expect(&format!("cipherlist_{class}"), "not offered", &mut problems);
    }
    expect("sessionresumption_ticket", "supported", &mut problems);

    // Each cipher offered, per protocol: ECDHE key exchange (or TLS 1.3, which has only
    // that) and an AEAD. The row ends with the suite's RFC name.
    let ciphers: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.id.starts_with("cipher-tls1_"))
        .collect();
    if ciphers.is_empty() {
        problems
            .push("no cipher-tls1_* rows: the per-protocol cipher scan (-E) did not run".into());
    }
    for f in &ciphers {
        let rfc = f.finding.split_whitespace().last().unwrap_or("");
        let forward_secret = rfc.starts_with("TLS_ECDHE_") || !rfc.contains("_WITH_");
        let aead = ["_GCM_", "CHACHA20_POLY1305", "_CCM"]
            .iter()
            .any(|a| rfc.contains(a));
        if !f.id.starts_with("cipher-tls1_2_") && !f.id.starts_with("cipher-tls1_3_") {
            problems.push(format!("{}: a cipher offered below TLS 1.2: {rfc}", f.id));
        }
        if !forward_secret || !aead || rfc.contains("CBC") {
            problems.push(format!("{}: {rfc} is not ECDHE with an AEAD", f.id));
        }
    }

    for id in VULNERABILITIES {
        match get(id) {
            Some(f) if harmless(&f.severity) => {}
            Some(f) => problems.push(format!("{id}: {} \"{}\"", f.severity, f.finding)),
            None => problems.push(format!("{id}: not in the report")),
        }
    }
    // Anything else testssl rates MEDIUM or worse, or could not scan. Two exceptions:
    // the certificate (self-signed, two days), and the cipher order, which is the
    // client's on purpose: every suite offered is strong, and a client without AES
    // hardware then picks ChaCha20 (Mozilla's guidelines, nginx `ssl_prefer_server_ciphers
    // off`).
    for f in findings {
        let judged_elsewhere = f.id.starts_with("cert_") || f.id == "cipher_order";
        let bad = matches!(
            f.severity.as_str(),
            "MEDIUM" | "HIGH" | "CRITICAL" | "WARN" | "FATAL"
        );
        if (bad && !judged_elsewhere && !VULNERABILITIES.contains(&f.id.as_str()))
            || f.id.starts_with("scanProblem")
        {
            problems.push(format!("{}: {} \"{}\"", f.id, f.severity, f.finding));
        }
    }
    problems
}

fn harmless(severity: &str) -> bool {
    matches!(severity, "OK" | "INFO")
}

/// `cargo xtask testssl [--release]`; with `ci_log`, the checks' counts also go to the log
/// `ci` sums into its closing line.
pub fn testssl(args: &[String], ci_log: Option<&Path>) -> Outcome {
    let release = match args {
        [] => false,
        [a] if a == "--release" => true,
        _ => {
            eprintln!("usage: cargo xtask testssl [--release]");
            return Err(Failed(2));
        }
    };
    let program = program("testssl", "TESTSSL")?;
    let profile = if release { "release" } else { "debug" };
    step(format!(
        "testssl.sh against skiff serve's HTTPS listener ({profile} build)"
    ));
    let mut served = Served::start(release, KeyType::Rsa)?;
    let dir = TempDir::new().map_err(|e| {
        eprintln!("xtask: cannot create a temporary directory: {e}");
        Failed(1)
    })?;
    let csv = dir.0.join("testssl.csv");
    let mut scan = Command::new(&program);
    scan.args([
        "--quiet",
        "--color",
        "0",
        "--warnings",
        "off",
        "--ip",
        "one",
    ])
    .arg("--csvfile")
    .arg(&csv)
    .args(SECTIONS)
    .arg(served.tls.to_string());
    let (code, text) = run_bounded(scan, SCAN_TIMEOUT, "testssl")?;
    if let Some(status) = served.exited() {
        eprintln!("xtask: skiff exited during the scan ({status})");
        served.show_log();
        return Err(Failed(1));
    }
    drop(served);
    let report = std::fs::read_to_string(&csv).unwrap_or_default();
    let findings = match parse_csv(&report) {
        Ok(f) if !f.is_empty() && code == Some(0) => f,
        Ok(_) => {
            eprintln!("xtask: testssl exited {code:?} with no findings; its output:\n{text}");
            return Err(Failed(1));
        }
        Err(e) => {
            eprintln!("xtask: testssl's CSV report: {e}");
            return Err(Failed(1));
        }
    };
    let problems = judge(&findings);
    if let Some(log) = ci_log {
        let line = format!(
            "test result: {}. {} passed; {} failed; 0 ignored; 0 measured; 0 filtered out (testssl.sh findings)\n",
            if problems.is_empty() { "ok" } else { "FAILED" },
            findings.len() - problems.len().min(findings.len()),
            problems.len(),
        );
        let appended = std::fs::File::options()
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = appended {
            eprintln!("xtask: cannot append to the test log: {e}");
        }
    }
    if problems.is_empty() {
        println!(
            "testssl: {} findings, the policy holds (TLS 1.2/1.3, ECDHE with AEAD, tickets, no known vulnerability)",
            findings.len()
        );
        Ok(())
    } else {
        for p in &problems {
            eprintln!("testssl: {p}");
        }
        eprintln!("xtask: testssl.sh: {} problem(s)", problems.len());
        Err(Failed(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, severity: &str, finding: &str) -> String {
        format!("\"{id}\",\"127.0.0.1/127.0.0.1\",\"8443\",\"{severity}\",\"{finding}\",\"\",\"\"")
    }

    /// A report with every check the policy reads, all passing (the shape of testssl
    /// 3.0.8's report on skiff).
    fn passing() -> Vec<String> {
        let mut rows =
            vec!["\"id\",\"fqdn/ip\",\"port\",\"severity\",\"finding\",\"cve\",\"cwe\"".into()];
        for p in ["SSLv2", "SSLv3"] {
            rows.push(row(p, "OK", "not offered"));
        }
        for p in ["TLS1", "TLS1_1"] {
            rows.push(row(p, "INFO", "not offered"));
        }
        rows.push(row("TLS1_2", "OK", "offered"));
        rows.push(row("TLS1_3", "OK", "offered with final"));
        for c in ["NULL", "aNULL", "EXPORT", "LOW", "3DES_IDEA", "AVERAGE"] {
            rows.push(row(&format!("cipherlist_{c}"), "OK", "not offered"));
        }
        rows.push(row("sessionresumption_ticket", "INFO", "supported"));
        rows.push(row(
            "cipher-tls1_2_xc030",
            "INFO",
            "TLS 1.2   xc030   ECDHE-RSA-AES256-GCM-SHA384       ECDH 253   AESGCM      256      TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        ));
        rows.push(row(
            "cipher-tls1_3_x1303",
            "INFO",
            "TLS 1.3   x1303   TLS_CHACHA20_POLY1305_SHA256      ECDH 253   ChaCha20    256      TLS_CHACHA20_POLY1305_SHA256",
        ));
        for v in VULNERABILITIES {
            rows.push(row(v, "OK", "not vulnerable"));
        }
        rows.push(row(
            "cert_chain_of_trust",
            "CRITICAL",
            "failed (self signed).",
        ));
        rows.push(row("cipher_order", "HIGH", "NOT a cipher order configured"));
        rows
    }

    fn judged(rows: &[String]) -> Vec<String> {
        judge(&parse_csv(&rows.join("\n")).expect("a well-formed report"))
    }

    #[test]
    fn a_report_that_keeps_the_policy_passes() {
        assert_eq!(judged(&passing()), Vec::<String>::new());
    }

    #[test]
    fn each_broken_promise_is_named() {
        let swap = |id: &str, replacement: String| -> Vec<String> {
            let mut rows = passing();
            let at = rows
                .iter()
                .position(|r| r.starts_with(&format!("\"{id}\",")))
                .unwrap();
            rows[at] = replacement;
            rows
        };
        let cases = [
            (swap("TLS1_1", row("TLS1_1", "LOW", "offered (deprecated)")), "TLS1_1: \"offered (deprecated)\""),
            (swap("cipherlist_AVERAGE", row("cipherlist_AVERAGE", "LOW", "offered")), "cipherlist_AVERAGE"),
            (swap("sessionresumption_ticket", row("sessionresumption_ticket", "INFO", "not supported")), "sessionresumption_ticket"),
            (
                swap("cipher-tls1_2_xc030", row("cipher-tls1_2_x9d", "INFO", "TLS 1.2   x9d   AES256-GCM-SHA384   RSA   AESGCM   256   TLS_RSA_WITH_AES_256_GCM_SHA384")),
                "TLS_RSA_WITH_AES_256_GCM_SHA384 is not ECDHE with an AEAD",
            ),
            (
                swap("cipher-tls1_2_xc030", row("cipher-tls1_2_xc028", "INFO", "TLS 1.2   xc028   ECDHE-RSA-AES256-SHA384   ECDH 253   AES   256   TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384")),
                "CBC_SHA384 is not ECDHE with an AEAD",
            ),
            (swap("ROBOT", row("ROBOT", "HIGH", "VULNERABLE")), "ROBOT: HIGH \"VULNERABLE\""),
            (swap("heartbleed", row("TLS_session_ticket", "INFO", "valid")), "heartbleed: not in the report"),
            (swap("cert_chain_of_trust", row("BREACH_extra", "MEDIUM", "potentially")), "BREACH_extra: MEDIUM"),
            (swap("cert_chain_of_trust", row("scanProblem", "WARN", "timed out")), "scanProblem"),
        ];
        for (rows, want) in cases {
            let problems = judged(&rows);
            assert!(
                problems.iter().any(|p| p.contains(want)),
                "want a problem containing {want:?}, got {problems:?}"
            );
        }
    }

    #[test]
    fn a_scan_without_cipher_rows_fails() {
        let rows: Vec<String> = passing()
            .into_iter()
            .filter(|r| !r.starts_with("\"cipher-tls1_"))
            .collect();
        assert!(judged(&rows).iter().any(|p| p.contains("-E")));
        // An empty report fails every check it needed.
        assert!(judge(&[]).len() > VULNERABILITIES.len());
    }

    #[test]
    fn the_csv_reader_rejects_what_is_not_testssl_csv() {
        let ok = parse_csv(&row("x", "OK", "a \"\"quoted\"\", comma")).unwrap();
        assert_eq!(ok[0].finding, "a \"quoted\", comma");
        assert_eq!(
            parse_csv("\"a\",\"b\"").unwrap_err(),
            "line 1: 2 fields, want 7 (id, fqdn/ip, port, severity, finding, cve, cwe)"
        );
        assert_eq!(parse_csv("id,fqdn").unwrap_err(), "line 1: not quoted CSV");
        assert_eq!(
            parse_csv("\"a\",\"b").unwrap_err(),
            "line 1: not quoted CSV"
        );
    }
}
