//! Certificates made with openssl for the tests that serve a user's own TLS Secret.

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
