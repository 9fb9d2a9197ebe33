//! Accept-Encoding negotiation (RFC 9110 §12.5.3) for precompressed sidecar files.

/// Content codings Skiff can serve from sidecar files, in server preference order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Brotli,
    Zstd,
    Gzip,
}

impl Encoding {
    pub const ALL: [Encoding; 3] = [Encoding::Brotli, Encoding::Zstd, Encoding::Gzip];

    /// The coding's token, as in Content-Encoding.
    pub fn token(self) -> &'static str {
        match self {
            Encoding::Brotli => "br",
            Encoding::Zstd => "zstd",
            Encoding::Gzip => "gzip",
        }
    }
    /// The sidecar file suffix: `style.css.br`.
    pub fn suffix(self) -> &'static str {
        match self {
            Encoding::Brotli => ".br",
            Encoding::Zstd => ".zst",
            Encoding::Gzip => ".gz",
        }
    }
}

/// Chooses the best coding among `available` for the client's Accept-Encoding.
/// `None` means identity. A missing header means identity (what browsers that send no
/// header can decode); `q=0` excludes a coding, and `*` covers codings not named.
pub fn negotiate(accept: Option<&[u8]>, available: &[Encoding]) -> Option<Encoding> {
    let accept = std::str::from_utf8(accept?).ok()?;
    let mut best: Option<(Encoding, u16)> = None;
    for &enc in Encoding::ALL.iter().filter(|e| available.contains(e)) {
        let q = quality(accept, enc.token());
        if q > 0 && best.is_none_or(|(_, bq)| q > bq) {
            best = Some((enc, q));
        }
    }
    best.map(|(e, _)| e)
}

/// The q-value (0..=1000) the header gives `token`, falling back to `*`, else 0.
fn quality(header: &str, token: &str) -> u16 {
    let mut star = None;
    for item in header.split(',') {
        let mut parts = item.split(';');
        let name = parts.next().unwrap_or("").trim();
        let q = parts
            .find_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim()
                    .eq_ignore_ascii_case("q")
                    .then(|| parse_q(v.trim()))
            })
            .unwrap_or(Some(1000));
        let Some(q) = q else { continue };
        if name.eq_ignore_ascii_case(token)
            || (token == "gzip" && name.eq_ignore_ascii_case("x-gzip"))
        {
            return q;
        }
        if name == "*" {
            star = Some(q);
        }
    }
    star.unwrap_or(0)
}

/// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), as thousandths.
fn parse_q(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_val: u16 = format!("{frac:0<3}").parse().ok()?;
    match int {
        "0" => Some(frac_val),
        "1" if frac_val == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Encoding::*;

    const ALL: &[Encoding] = &[Brotli, Zstd, Gzip];

    #[test]
    fn prefers_server_order_on_ties() {
        assert_eq!(
            negotiate(Some(b"gzip, deflate, br, zstd"), ALL),
            Some(Brotli)
        );
        assert_eq!(negotiate(Some(b"gzip, zstd"), ALL), Some(Zstd));
        assert_eq!(negotiate(Some(b"gzip"), &[Brotli, Gzip]), Some(Gzip));
    }

    #[test]
    fn honours_q_values() {
        assert_eq!(negotiate(Some(b"br;q=0.5, gzip;q=0.9"), ALL), Some(Gzip));
        assert_eq!(negotiate(Some(b"br;q=0, gzip"), ALL), Some(Gzip));
        assert_eq!(negotiate(Some(b"*;q=0"), ALL), None);
        assert_eq!(negotiate(Some(b"*"), ALL), Some(Brotli));
        assert_eq!(negotiate(Some(b"*, br;q=0"), ALL), Some(Zstd));
        assert_eq!(negotiate(Some(b"x-gzip"), ALL), Some(Gzip));
    }

    #[test]
    fn identity_when_nothing_fits() {
        assert_eq!(negotiate(None, ALL), None);
        assert_eq!(negotiate(Some(b"identity"), ALL), None);
        assert_eq!(negotiate(Some(b""), ALL), None);
        assert_eq!(negotiate(Some(b"deflate"), ALL), None);
        assert_eq!(negotiate(Some(b"br"), &[]), None);
        assert_eq!(negotiate(Some(b"br;q=2"), ALL), None);
        assert_eq!(negotiate(Some(b"br;q=0.0001"), ALL), None);
    }
}
