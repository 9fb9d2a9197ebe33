//! Certificates made with openssl (rcgen for one issued in the past) for the tests that
//! serve a user's own TLS Secret.

use k8s_openapi::api::core::v1::Secret;
use serde_json::Value;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs openssl with `stdin`, returning its stdout; panics with its stderr on failure.
pub fn openssl(args: &[&str], stdin: &[u8]) -> String {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run openssl");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A self-signed P-256 certificate for `host`, valid for two days, and its key (PEM),
/// written to `dir` as NAME.crt and NAME.key.
pub fn self_signed(dir: &Path, name: &str, host: &str) -> (Vec<u8>, Vec<u8>) {
    let (crt, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    openssl(
        &[
            "req",
            "-x509",
            "-nodes",
            "-days",
            "2",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-subj",
            &format!("/CN={host}"),
            "-addext",
            &format!("subjectAltName=DNS:{host}"),
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            crt.to_str().unwrap(),
        ],
        b"",
    );
    (std::fs::read(crt).unwrap(), std::fs::read(key).unwrap())
}

/// A kubernetes.io/tls Secret holding `crt` and `key`, as JSON to apply.
pub fn tls_secret(name: &str, crt: &[u8], key: &[u8]) -> Value {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(
            [("tls.crt", crt), ("tls.key", key)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), k8s_openapi::ByteString(v.to_vec())))
                .collect(),
        ),
        ..Default::default()
    };
    serde_json::to_value(secret).unwrap()
}

/// A self-signed certificate for `host` issued 30 days ago and expiring in 2, and its key
/// (PEM): in the last sixth of its lifetime, where the expiry alert fires.
pub fn nearly_expired(host: &str) -> (Vec<u8>, Vec<u8>) {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let mut params = rcgen::CertificateParams::new(vec![host.to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, host);
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let day = Duration::from_secs(86_400);
    params.not_before = epoch + (now - 30 * day);
    params.not_after = epoch + (now + 2 * day);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem().into_bytes(), key.serialize_pem().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nearly_expired_certificate_began_a_month_ago_and_ends_in_two_days() {
        let (crt, key) = nearly_expired("site.example");
        let dates = openssl(&["x509", "-noout", "-checkend", "172000", "-dates"], &crt);
        assert!(dates.contains("notBefore="), "{dates}");
        // Still valid in 47 hours, not in 49.
        openssl(&["x509", "-noout", "-checkend", "169200"], &crt);
        let later = Command::new("openssl")
            .args(["x509", "-noout", "-checkend", "176400"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(&crt)?;
                c.wait()
            })
            .unwrap();
        assert!(!later.success(), "valid in 49 hours");
        assert!(String::from_utf8(key).unwrap().contains("PRIVATE KEY"));
    }
}
