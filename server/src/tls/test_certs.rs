//! Certificates made in the test (rcgen), ECDSA P-256 as the benchmark's.

pub struct Issued {
    pub cert: String,
    pub key: String,
}

/// A self-signed certificate for `names`; `expired` puts its validity in 2000.
pub fn issue(names: &[&str], expired: bool) -> Issued {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let mut params = rcgen::CertificateParams::new(names).expect("names for a certificate");
    if expired {
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let key = rcgen::KeyPair::generate().expect("a P-256 key");
    let cert = params.self_signed(&key).expect("a self-signed certificate");
    Issued {
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}
