//! The HTTP proxy: hyper's client to an HTTP pool, hop-by-hop fields stripped both ways,
//! X-Forwarded-* added, connect failover for requests that can be retried, and upgrades
//! (WebSocket) handed to `upgrade`.

use super::body::IdleBody;
use super::failover::Failover;
use super::failure::Failure;
use super::pool::{Pool, Slot};
use super::request::ClientBody;
use super::route::{Forwarded, HeaderEdit};
use super::upgrade::{splice, upgrade_token};
use super::upload::{Upload, Watched};
use crate::http::BoxedBody;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::BodyExt;
use std::io;
use std::net::SocketAddr;

/// Headers a proxy must not forward (RFC 9110 §7.6.1), plus those the connection layer
/// sets itself. Most messages have none, and then nothing is looked up.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    if !headers
        .keys()
        .any(|k| skiff_codec::response_head::is_hop_by_hop(k.as_str().as_bytes()))
    {
        return;
    }
    let named: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    for n in named {
        headers.remove(n.as_str());
    }
    for h in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        headers.remove(h);
    }
}

/// What a client could say of the request that backends write links and redirects with
/// (Spring prefers Forwarded; Rack reads X-Forwarded-Ssl and -Scheme, Tornado X-Scheme,
/// gunicorn X-Forwarded-Protocol, Symfony once X-Original-URL): removed, and never taken
/// from a proxy either, as cloud balancers pass a client's on.
const FROM_NO_ONE: [&str; 15] = [
    "forwarded",
    "x-forwarded-prefix",
    "x-forwarded-ssl",
    "x-forwarded-scheme",
    "x-forwarded-protocol",
    "x-forwarded-server",
    "x-forwarded-uri",
    "x-scheme",
    "x-url-scheme",
    "front-end-https",
    "x-original-host",
    "x-original-url",
    "x-original-uri",
    "x-rewrite-url",
    "x-real-ip",
];

/// What a balancer in front that ends TLS sets (AWS's ALB sets both): passed on
/// from a believed proxy (`use_forwarded_headers`), set or removed here otherwise.
const FROM_BELIEVED_PROXIES: [&str; 2] = ["x-forwarded-proto", "x-forwarded-port"];

/// Whether `name` (lower-case, as `HeaderMap` keeps names) is spelt with `_` where a field
/// Skiff sets or removes has `-` (`x_forwarded_host`): WSGI and Rack servers read both as
/// one variable, and no proxy sends such a spelling.
fn forwarding_field_underscored(name: &str) -> bool {
    let same = |field: &&str| {
        name.len() == field.len()
            && name
                .bytes()
                .zip(field.bytes())
                .all(|(a, b)| a == b || (a == b'_' && b == b'-'))
    };
    name.contains('_')
        && (FROM_NO_ONE.iter().any(same)
            || FROM_BELIEVED_PROXIES.iter().any(same)
            || ["x-forwarded-host", "x-forwarded-for"].iter().any(same))
}

/// The headers a backend learns the client from: Host (the rule's, or the client's Host
/// or HTTP/2 `:authority`), the whole X-Forwarded-For list with the peer appended,
/// X-Real-IP, X-Forwarded-Host and -Proto set here (a believed proxy's -Proto and -Port
/// passed on), then the rule's own changes.
fn forwarding_headers(
    headers: &mut HeaderMap,
    parts: &http::request::Parts,
    peer: SocketAddr,
    to: &Target<'_>,
    underscores_in_headers: bool,
) {
    let rule_host = to.host;
    let believed = to.forwarded.believe_peer;
    // As for CGI: a backend may read `X_Forwarded_For` as `X-Forwarded-For`. With the
    // pool's `underscores_in_headers`, only the spellings of the fields set here go.
    let underscored: Vec<http::HeaderName> = headers
        .keys()
        .filter(|k| {
            let name = k.as_str();
            name.contains('_') && (!underscores_in_headers || forwarding_field_underscored(name))
        })
        .cloned()
        .collect();
    for name in underscored {
        headers.remove(&name);
    }
    for name in FROM_NO_ONE {
        headers.remove(name);
    }
    if !believed {
        for name in FROM_BELIEVED_PROXIES {
            headers.remove(name);
        }
    }
    let client_host = parts
        .uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        .or_else(|| parts.headers.get(http::header::HOST).cloned());
    match rule_host.or(client_host.as_ref()) {
        Some(h) => headers.insert(http::header::HOST, h.clone()),
        None => headers.remove(http::header::HOST),
    };
    // Every line, in order (a proxy in front may have added its own), then the peer.
    let mut forwarded = String::new();
    for line in parts.headers.get_all("x-forwarded-for") {
        if let Ok(text) = line.to_str() {
            let text = text.trim();
            if !text.is_empty() {
                forwarded.push_str(text);
                forwarded.push_str(", ");
            }
        }
    }
    forwarded.push_str(&peer.ip().to_string());
    if let Ok(v) = HeaderValue::from_str(&forwarded) {
        headers.insert("x-forwarded-for", v);
    }
    // A believed balancer in front that ended TLS knows the scheme the client used; a
    // backend told `http` there would redirect to https for ever.
    if !headers.contains_key("x-forwarded-proto") {
        let proto = if to.secure { "https" } else { "http" };
        headers.insert("x-forwarded-proto", HeaderValue::from_static(proto));
    }
    match client_host {
        Some(h) => headers.insert("x-forwarded-host", h),
        None => headers.remove("x-forwarded-host"),
    };
    match to.forwarded.client_ip {
        Some(ip) => headers.insert("x-real-ip", ip_text(ip)),
        None => headers.remove("x-real-ip"),
    };
    if let Some(prefix) = to.stripped_prefix {
        let prefix = skiff_http::path::percent_encode_path(prefix);
        if let Ok(v) = HeaderValue::from_str(&prefix) {
            headers.insert("x-forwarded-prefix", v);
        }
    }
    for edit in &to.forwarded.edits {
        match edit {
            HeaderEdit::Remove(name) => {
                headers.remove(name);
            }
            HeaderEdit::Set(name, value) => {
                headers.insert(name, value.clone());
            }
            HeaderEdit::Add(name, value) => {
                headers.append(name, value.clone());
            }
        }
    }
}

fn ip_text(ip: std::net::IpAddr) -> HeaderValue {
    HeaderValue::from_str(&ip.to_string()).expect("an address is a header value")
}

type HttpClient = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    BoxedBody,
>;

/// The client for a pool's `connect_timeout`: one per timeout in use (a config has few),
/// so pools alike share their idle connections, as before, and each bounds its connects.
fn client(connect_timeout: std::time::Duration) -> HttpClient {
    static CLIENTS: std::sync::Mutex<Vec<(std::time::Duration, HttpClient)>> =
        std::sync::Mutex::new(Vec::new());
    let mut clients = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = clients.iter().find(|(t, _)| *t == connect_timeout) {
        return c.clone();
    }
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(connect_timeout));
    let c = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_max_idle_per_host(64)
        .build(connector);
    clients.push((connect_timeout, c.clone()));
    c
}

/// What a proxy rule says about the request it forwards.
pub(super) struct Target<'r> {
    /// The Host the backend sees instead of the client's.
    pub host: Option<&'r HeaderValue>,
    /// `Upgrade` protocols that may be tunnelled (lower-case).
    pub upgrades: &'r [String],
    /// The client came over HTTPS (X-Forwarded-Proto).
    pub secure: bool,
    /// The path and query to send instead of the client's (`rewrite_path`).
    pub rewritten: Option<String>,
    /// What the rewrite stripped, for X-Forwarded-Prefix.
    pub stripped_prefix: Option<&'r str>,
    /// What the backend is told of the client, and the rule's header changes.
    pub forwarded: &'r Forwarded,
}

pub(super) async fn forward(
    pool: &Pool,
    slot: &mut Slot<'_>,
    mut parts: http::request::Parts,
    body: ClientBody,
    peer: SocketAddr,
    to: Target<'_>,
) -> Result<Response<BoxedBody>, (Failure, String)> {
    let idempotent_without_body =
        matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS)
            && body.is_end_stream();
    let mut body = Some(match body {
        ClientBody::Empty => http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed(),
        b => b.map_err(io::Error::other).boxed(),
    });
    // A protocol upgrade (WebSocket): the Upgrade and Connection headers go through, and
    // on a 101 both sides' connections are spliced together.
    // Only the protocols the rule allows: a tunnel's bytes bypass every rule.
    let upgrade = upgrade_token(&parts.headers).filter(|token| {
        token.to_str().is_ok_and(|t| {
            to.upgrades
                .iter()
                .any(|allowed| t.trim().eq_ignore_ascii_case(allowed))
        })
    });
    let client_upgrade = upgrade
        .is_some()
        .then(|| parts.extensions.remove::<hyper::upgrade::OnUpgrade>())
        .flatten();
    let tunnel_hold = parts.extensions.remove::<super::TunnelHold>();
    let mut order = Failover::new(pool, peer.ip());
    let mut next = order.next(slot);
    loop {
        let Some((i, dialed)) = next else {
            return Err((
                Failure::Protocol("no endpoint answered".into()),
                String::new(),
            ));
        };
        let endpoint = pool.endpoints[i].address.to_string();
        let target = match &to.rewritten {
            Some(t) => t.as_str(),
            None => parts.uri.path_and_query().map_or("/", |pq| pq.as_str()),
        };
        let authority = dialed.map_or_else(|| endpoint.clone(), |a| a.to_string());
        let uri: http::Uri = format!("http://{authority}{target}").parse().map_err(|e| {
            (
                Failure::Protocol(format!("endpoint {endpoint}: {e}")),
                endpoint.clone(),
            )
        })?;
        let inner = match body.take() {
            Some(b) => b,
            None => http_body_util::Empty::new()
                .map_err(|never| match never {})
                .boxed(),
        };
        let upload = Upload::new(pool.connect_timeout, inner.is_end_stream());
        let mut req = Request::builder()
            .method(parts.method.clone())
            .uri(uri)
            .body(
                Watched {
                    inner,
                    upload: upload.clone(),
                }
                .boxed(),
            )
            .expect("a valid request");
        let headers = req.headers_mut();
        *headers = parts.headers.clone();
        strip_hop_by_hop(headers);
        if let Some(proto) = &upgrade {
            headers.insert(
                http::header::CONNECTION,
                HeaderValue::from_static("upgrade"),
            );
            headers.insert(http::header::UPGRADE, proto.clone());
        }
        forwarding_headers(headers, &parts, peer, &to, pool.underscores_in_headers);
        let client = client(pool.connect_timeout);
        let answer = tokio::select! {
            answer = client.request(req) => Ok(answer),
            () = upload.timed_out(pool.send_timeout, pool.read_timeout) => Err(()),
        };
        match answer {
            Err(()) => {
                pool.report_failure_at(i, dialed);
                if !upload.ended() {
                    tracing::warn!(
                        pool = pool.name,
                        endpoint = endpoint.as_str(),
                        "the backend stopped taking the request body"
                    );
                }
                return Err((Failure::Timeout, endpoint));
            }
            Ok(Err(e)) if e.is_connect() => {
                pool.report_failure_at(i, dialed);
                tracing::warn!(pool = pool.name, endpoint = endpoint.as_str(), error = %e, "connect failed");
                if idempotent_without_body {
                    next = order.next(slot);
                    if next.is_some() {
                        continue;
                    }
                }
                return Err((Failure::Connect(io::Error::other(e.to_string())), endpoint));
            }
            Ok(Err(e)) => return Err((Failure::of_proxy_error(&e), endpoint)),
            Ok(Ok(mut resp)) => {
                pool.report_success(i);
                if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
                    if let (Some(client), Some(proto)) = (client_upgrade, upgrade) {
                        let backend = hyper::upgrade::on(&mut resp);
                        let hold = tunnel_hold;
                        tokio::spawn(splice(client, backend, pool.name, pool.read_timeout, hold));
                        let mut out = Response::new(
                            http_body_util::Empty::new()
                                .map_err(|never| match never {})
                                .boxed(),
                        );
                        *out.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
                        *out.headers_mut() = resp.headers().clone();
                        out.headers_mut().insert(
                            http::header::CONNECTION,
                            HeaderValue::from_static("upgrade"),
                        );
                        out.headers_mut().insert(http::header::UPGRADE, proto);
                        return Ok(out);
                    }
                    return Err((
                        Failure::Protocol("backend switched protocols unasked".into()),
                        endpoint,
                    ));
                }
                let (mut head, incoming) = resp.into_parts();
                strip_hop_by_hop(&mut head.headers);
                let body = IdleBody::new(
                    incoming.map_err(io::Error::other).boxed(),
                    pool.read_timeout,
                );
                return Ok(Response::from_parts(head, body.boxed()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::forwarding_field_underscored;

    #[test]
    fn the_underscore_spellings_of_the_fields_set_here_are_known() {
        for name in [
            "x_forwarded_host",
            "x_forwarded-prefix",
            "x_real_ip",
            "x_forwarded_for",
            "x_forwarded_proto",
            "x_original_url",
            "front_end_https",
        ] {
            assert!(forwarding_field_underscored(name), "{name}");
        }
        for name in [
            "x-forwarded-host",
            "x_forwarded_hosts",
            "x_forwarded",
            "x_custom_id",
            "forwarded_",
        ] {
            assert!(!forwarding_field_underscored(name), "{name}");
        }
    }
}
