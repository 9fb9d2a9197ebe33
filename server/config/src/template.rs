//! Redirect target and backend request header templates: `https://$host/new$uri`,
//! `/u/$1`, `$remote_addr`. Parsed once, at config load, by the same code for validation
//! and for serving.

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Literal(String),
    /// `$1`..`$9`: a capture of the rule's regex.
    Capture(usize),
    Host,
    Scheme,
    /// Path and query as received.
    RequestUri,
    /// Path only.
    Uri,
    /// Query only.
    Args,
    /// The client's address (behind `trusted_proxies`, the one their X-Forwarded-For
    /// names); only in backend request headers.
    RemoteAddr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub pieces: Vec<Piece>,
}

const VARIABLES: &str = "$1..$9, $host, $scheme, $request_uri, $uri, $args";
const HEADER_VARIABLES: &str = "$1..$9, $host, $scheme, $request_uri, $uri, $args, $remote_addr";

impl Template {
    /// Parses a redirect target; `captures` is how many groups the rule's regex has.
    pub fn parse(text: &str, captures: usize) -> Result<Template, String> {
        Template::parse_in(text, captures, false)
    }

    /// Parses the value of a header sent to a backend, which may also name the client's
    /// address (`$remote_addr`).
    pub fn parse_header(text: &str, captures: usize) -> Result<Template, String> {
        Template::parse_in(text, captures, true)
    }

    fn parse_in(text: &str, captures: usize, header: bool) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(i) = rest.find('$') {
            literal.push_str(&rest[..i]);
            rest = &rest[i + 1..];
            if let Some(r) = rest.strip_prefix('$') {
                literal.push('$');
                rest = r;
                continue;
            }
            let (name, after) = if let Some(r) = rest.strip_prefix('{') {
                let end = r
                    .find('}')
                    .ok_or_else(|| format!("unclosed `${{` in {text:?}"))?;
                (&r[..end], &r[end + 1..])
            } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
                rest.split_at(1)
            } else {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                rest.split_at(end)
            };
            let piece = match name {
                "host" => Piece::Host,
                "scheme" => Piece::Scheme,
                "request_uri" => Piece::RequestUri,
                "uri" => Piece::Uri,
                "args" => Piece::Args,
                "remote_addr" if header => Piece::RemoteAddr,
                n if n.len() == 1 && n.as_bytes()[0].is_ascii_digit() && n != "0" => {
                    let idx = (n.as_bytes()[0] - b'0') as usize;
                    if idx > captures {
                        return Err(format!(
                            "${idx} refers to a capture group the rule's regex does not have ({captures} groups)"
                        ));
                    }
                    Piece::Capture(idx)
                }
                "" => {
                    return Err(format!(
                        "a lone `$` in {text:?}; write `$$` for a dollar sign"
                    ))
                }
                other => {
                    let known = if header { HEADER_VARIABLES } else { VARIABLES };
                    return Err(format!(
                        "unknown variable ${other}; expected one of {known}"
                    ));
                }
            };
            if !literal.is_empty() {
                pieces.push(Piece::Literal(std::mem::take(&mut literal)));
            }
            pieces.push(piece);
            rest = after;
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        Ok(Template { pieces })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_variables_captures_and_escapes() {
        let t = Template::parse("https://$host/new/$1?x=${args}&p=$$5", 1).unwrap();
        assert_eq!(
            t.pieces,
            vec![
                Piece::Literal("https://".into()),
                Piece::Host,
                Piece::Literal("/new/".into()),
                Piece::Capture(1),
                Piece::Literal("?x=".into()),
                Piece::Args,
                Piece::Literal("&p=$5".into()),
            ]
        );
    }

    #[test]
    fn rejects_unknown_variables_and_missing_captures() {
        assert_eq!(
            Template::parse("/$hots/", 0).unwrap_err(),
            "unknown variable $hots; expected one of $1..$9, $host, $scheme, $request_uri, $uri, $args"
        );
        assert_eq!(
            Template::parse("/$2", 1).unwrap_err(),
            "$2 refers to a capture group the rule's regex does not have (1 groups)"
        );
        assert!(Template::parse("/${host", 0)
            .unwrap_err()
            .starts_with("unclosed"));
        assert!(Template::parse("/a$", 0)
            .unwrap_err()
            .starts_with("a lone `$`"));
    }

    #[test]
    fn only_header_values_name_the_client_address() {
        assert_eq!(
            Template::parse_header("$remote_addr via ${host}", 0)
                .unwrap()
                .pieces,
            vec![
                Piece::RemoteAddr,
                Piece::Literal(" via ".into()),
                Piece::Host
            ]
        );
        assert_eq!(
            Template::parse("/$remote_addr", 0).unwrap_err(),
            "unknown variable $remote_addr; expected one of $1..$9, $host, $scheme, $request_uri, $uri, $args"
        );
        assert_eq!(
            Template::parse_header("$remote_ip", 0).unwrap_err(),
            "unknown variable $remote_ip; expected one of $1..$9, $host, $scheme, $request_uri, $uri, $args, $remote_addr"
        );
    }
}
