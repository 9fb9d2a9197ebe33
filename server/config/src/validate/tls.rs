//! Checks of the TLS listener and of what virtual servers ask of it.

use super::Checker;
use crate::model::*;

/// The TLS listener: its address, and a certificate somewhere for it to offer.
pub(super) fn check_tls(c: &mut Checker, cfg: &Config) {
    let Some(tls) = &cfg.tls else {
        if cfg.listen.is_empty() {
            c.fail(
                "listen",
                "is empty (no plain HTTP), so tls.listen is needed or nothing is served",
            );
        }
        return;
    };
    match tls.listen.parse::<std::net::SocketAddr>() {
        Err(_) => c.fail(
            "tls.listen",
            format!(
                "{:?} is not an address; expected IP:PORT such as 0.0.0.0:8443",
                tls.listen
            ),
        ),
        Ok(addr) => {
            for (field, other) in [("listen", &cfg.listen), ("admin_listen", &cfg.admin_listen)] {
                // Port 0 (any free port) never collides.
                if addr.port() != 0 && other.parse::<std::net::SocketAddr>().ok() == Some(addr) {
                    c.fail("tls.listen", format!("is the same address as {field}"));
                }
            }
        }
    }
    for (i, files) in tls.certificates.iter().enumerate() {
        check_certificate_files(c, &format!("tls.certificates[{i}]"), files);
    }
    if tls.certificates.is_empty() && cfg.virtual_servers.iter().all(|v| v.tls.is_none()) {
        c.fail(
            "tls.certificates",
            "the TLS listener has no certificate: list one here or give a virtual server `tls`",
        );
    }
    if tls.handshake_timeout < std::time::Duration::from_millis(100) {
        c.fail("tls.handshake_timeout", "must be at least 100ms");
    }
    if tls.public_port == Some(0) {
        c.fail("tls.public_port", "must be a port from 1 to 65535");
    }
}

fn check_certificate_files(c: &mut Checker, p: &str, files: &CertificateFiles) {
    for (field, value) in [
        ("cert", Some(&files.cert)),
        ("key", Some(&files.key)),
        ("ocsp", files.ocsp.as_ref()),
    ] {
        if value.is_some_and(|v| v.is_empty()) {
            c.fail(format!("{p}.{field}"), "must name a file");
        }
    }
}

/// A virtual server's certificate, HSTS and redirect all need the TLS listener.
pub(super) fn check_virtual_server_tls(
    c: &mut Checker,
    p: &str,
    vs: &VirtualServer,
    listener: bool,
) {
    if let Some(files) = &vs.tls {
        check_certificate_files(c, &format!("{p}.tls"), files);
    }
    let needs_listener = [
        ("tls", vs.tls.is_some()),
        ("hsts", vs.hsts.is_some()),
        ("https_redirect", vs.https_redirect),
    ];
    for (field, used) in needs_listener {
        if used && !listener {
            c.fail(
                format!("{p}.{field}"),
                "needs the TLS listener: set tls.listen at the top level",
            );
        }
    }
    for (j, rule) in vs.rules.iter().enumerate() {
        if rule.https_redirect == Some(true) && !listener {
            c.fail(
                format!("{p}.rules[{j}].https_redirect"),
                "needs the TLS listener: set tls.listen at the top level",
            );
        }
    }
    if let Some(hsts) = &vs.hsts {
        // hstspreload.org's submission requirements (RFC 6797 leaves preload out).
        let year = std::time::Duration::from_secs(365 * 24 * 3600);
        if hsts.preload && (!hsts.include_subdomains || hsts.max_age < year) {
            c.fail(
                format!("{p}.hsts.preload"),
                "preload needs include_subdomains and a max_age of at least 365d",
            );
        }
    }
}
