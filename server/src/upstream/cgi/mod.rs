//! The CGI exchanges (FastCGI, uwsgi and SCGI): the environment, the request body
//! (streamed when its length is known, else read up to the limit first, since every CGI
//! protocol needs CONTENT_LENGTH up front), the opening bytes that leave with the
//! connection, kept FastCGI connections, and passive health.

mod body;
mod fastcgi;
mod stream;

use super::connection;
use super::failover::Failover;
use super::failure::Failure;
use super::kept;
use super::pool::{Pool, Slot};
use super::request::Message;
use super::response::UpstreamResponse;
use super::route::{BackendRoute, Forwarding};
use body::{prepare_body, CgiBody};
use bytes::{Bytes, BytesMut};
use skiff_codec::cgi_env::{environment, CgiContext, CgiRequest, Env};
use skiff_codec::{fastcgi as fcgi, scgi, uwsgi};
use skiff_config::PoolProtocol;
use std::net::SocketAddr;

/// The CGI environment of a request without a body, when the call goes to a FastCGI,
/// uwsgi or SCGI pool (`None` for an HTTP pool).
pub fn bodiless_cgi_env<'a>(
    route: &BackendRoute,
    req: CgiRequest<'a, impl Iterator<Item = (&'a [u8], &'a [u8])>>,
    peer: SocketAddr,
    local_port: u16,
) -> Option<Env> {
    let cx = cgi_context(route, peer, local_port, 0)?;
    Some(environment(req, &cx))
}

fn cgi_context(
    route: &BackendRoute,
    peer: SocketAddr,
    local_port: u16,
    length: u64,
) -> Option<CgiContext<'_>> {
    let Forwarding::Cgi {
        document_root,
        index,
        split_path_info,
        params,
    } = &route.backend.forwarding
    else {
        return None;
    };
    Some(CgiContext {
        path: &route.path,
        document_root: document_root.as_deref().unwrap_or(&route.root),
        php_split: route.backend.pool.protocol == PoolProtocol::Fastcgi && *split_path_info,
        index: index.as_deref(),
        remote_addr: peer,
        server_port: local_port,
        content_length: Some(length),
        extra: params,
        underscores_in_headers: route.backend.pool.underscores_in_headers,
        secure: route.secure,
    })
}

/// For a PHP-style split whose document root this machine can see (the virtual server's
/// root, or a FastCGI `document_root` that exists here too): the script, if it does not
/// exist as a file. nginx's `try_files $fastcgi_script_name =404`: php-fpm is never asked
/// to run `/uploads/x.jpg/a.php`, which `cgi.fix_pathinfo` would resolve to the image.
fn missing_script(route: &BackendRoute, env: &Env) -> Option<String> {
    let Forwarding::Cgi {
        document_root,
        split_path_info: true,
        ..
    } = &route.backend.forwarding
    else {
        return None;
    };
    if route.backend.pool.protocol != PoolProtocol::Fastcgi {
        return None;
    }
    if let Some(root) = document_root {
        if *root != route.root && !std::path::Path::new(root).is_dir() {
            return None;
        }
    }
    // Only where a script was named: other paths may be a front controller's to route.
    if !skiff_codec::cgi_env::names_php(env.get("SCRIPT_NAME")?) {
        return None;
    }
    let script = std::str::from_utf8(env.get("SCRIPT_FILENAME")?).ok()?;
    // A stat of a local file: page-cache fast, like the static path's opens.
    let exists = std::fs::metadata(script).is_ok_and(|m| m.is_file());
    (!exists).then(|| script.to_owned())
}

/// Exchanges a request with a CGI pool: its environment (built here once the body's
/// length is known, or by the fast path for a request without a body), a kept FastCGI
/// connection when there is one, else a new connection with failover.
pub(super) async fn exchange(
    route: &BackendRoute,
    slot: &mut Slot<'_>,
    message: Message<'_>,
    declared: Option<u64>,
    peer: SocketAddr,
    local_port: u16,
) -> Result<UpstreamResponse, (Failure, String)> {
    let pool = &route.backend.pool;
    let built;
    let (env, body, length) = match message {
        Message::Cgi(env) => (env, CgiBody::Buffered(Bytes::new()), 0),
        Message::Http(req) => {
            let (parts, body) = req.into_parts();
            let (body, length) = prepare_body(body, declared)
                .await
                .map_err(|f| (f, String::new()))?;
            let cx = cgi_context(route, peer, local_port, length)
                .expect("cgi is only called for CGI targets");
            built = environment(CgiRequest::of_parts(&parts), &cx);
            (&built, body, length)
        }
    };
    if let Some(script) = missing_script(route, env) {
        return Err((Failure::NoScript(script), String::new()));
    }
    let (opening, rest) = opening(pool, env, body, length)?;
    // FastCGI keep-conn: an idle connection first. The backend may close it just as it is
    // reused; a request that went whole in its opening then goes again on a fresh one
    // (nothing was answered), unless running it twice could change more than once
    // (nginx's rule: POST, PATCH and the like are never sent twice).
    if pool.protocol == PoolProtocol::Fastcgi && rest.is_none() {
        if let Some(i) = pool.pick(Some(peer.ip()), &[]) {
            if let Some(idle) = kept::take_idle(pool, i) {
                pool.assign(slot, i);
                match fastcgi::exchange(pool, i, idle, &opening[..], None, length).await {
                    Err(Failure::Stale) if replayable(env) => {}
                    other => return finish(pool, i, other),
                }
            }
        }
    }
    let (idx, conn, sent) = connect(pool, slot, peer.ip(), &opening).await?;
    let unsent = &opening[sent..];
    let result = match pool.protocol {
        PoolProtocol::Fastcgi => fastcgi::exchange(pool, idx, conn, unsent, rest, length).await,
        PoolProtocol::Uwsgi | PoolProtocol::Scgi => {
            stream::exchange(pool, conn, unsent, rest, length).await
        }
        PoolProtocol::Http => unreachable!("validated: cgi actions use cgi pools"),
    };
    // A new connection closed before answering is the backend failing, not a kept
    // connection gone stale: it counts against the endpoint.
    let result = result.map_err(|f| match f {
        Failure::Stale => stream::closed_before_head(),
        f => f,
    });
    finish(pool, idx, result)
}

/// Whether a request may be sent again after a kept connection failed under it: only
/// idempotent methods (RFC 9110 §9.2.2), whose second run changes nothing more.
fn replayable(env: &Env) -> bool {
    env.get("REQUEST_METHOD")
        .and_then(|m| http::Method::from_bytes(m).ok())
        .is_some_and(|m| m.is_idempotent())
}

/// Connects to an endpoint in failover order, sending the opening with the connection.
/// Nothing has been sent when a connect fails, so this is safe for every method.
async fn connect(
    pool: &Pool,
    slot: &mut Slot<'_>,
    client: std::net::IpAddr,
    first: &[u8],
) -> Result<(usize, connection::Conn, usize), (Failure, String)> {
    let mut order = Failover::new(pool, client);
    let mut last = None;
    while let Some((i, addr)) = order.next(slot) {
        match connection::connect_sending(pool, i, addr, first).await {
            Ok((c, sent)) => return Ok((i, c, sent)),
            Err(e) => {
                pool.report_failure_at(i, addr);
                tracing::warn!(pool = pool.name, endpoint = %pool.endpoints[i].address, address = ?addr, error = %e, "connect failed");
                last = Some((Failure::Connect(e), pool.endpoints[i].address.to_string()));
            }
        }
    }
    Err(last.unwrap_or((Failure::Protocol("no endpoints".into()), String::new())))
}

/// The bytes a CGI request opens with, built before connecting so that they can leave
/// with the connection ([`Pool::connect_sending`]): FastCGI's BEGIN_REQUEST and PARAMS
/// records (and a buffered body's STDIN records), or the uwsgi or SCGI vars packet (and a
/// buffered body). A body still to be streamed is returned as the rest.
fn opening(
    pool: &Pool,
    env: &Env,
    body: CgiBody,
    length: u64,
) -> Result<(Bytes, Option<CgiBody>), (Failure, String)> {
    let protocol_error = |e: String| (Failure::Protocol(e), String::new());
    match pool.protocol {
        PoolProtocol::Fastcgi => {
            let mut out = BytesMut::with_capacity(4096);
            fcgi::encode_begin(&mut out, 1, pool.keepalive > 0);
            fcgi::encode_params(&mut out, 1, env.iter())
                .map_err(|e| protocol_error(e.to_string()))?;
            match body {
                CgiBody::Buffered(b) => {
                    if !b.is_empty() {
                        fcgi::encode_stdin(&mut out, 1, &b);
                    }
                    fcgi::encode_stdin(&mut out, 1, &[]);
                    Ok((out.freeze(), None))
                }
                stream => Ok((out.freeze(), Some(stream))),
            }
        }
        _ => {
            let packet = match pool.protocol {
                PoolProtocol::Uwsgi => {
                    uwsgi::encode_request(env.iter()).map_err(|e| protocol_error(e.to_string()))?
                }
                _ => scgi::encode_request(length, env.iter()),
            };
            match body {
                CgiBody::Buffered(b) if b.is_empty() => Ok((packet, None)),
                CgiBody::Buffered(b) => {
                    let mut both = BytesMut::with_capacity(packet.len() + b.len());
                    both.extend_from_slice(&packet);
                    both.extend_from_slice(&b);
                    Ok((both.freeze(), None))
                }
                stream => Ok((packet, Some(stream))),
            }
        }
    }
}

/// Reports the exchange to the endpoint's passive health; a failure names the endpoint.
fn finish(
    pool: &Pool,
    idx: usize,
    result: Result<UpstreamResponse, Failure>,
) -> Result<UpstreamResponse, (Failure, String)> {
    match result {
        Ok(r) => {
            pool.report_success(idx);
            Ok(r)
        }
        Err(f) => {
            if matches!(f, Failure::Timeout | Failure::Io(_)) {
                pool.report_failure(idx);
            }
            Err((f, pool.endpoints[idx].address.to_string()))
        }
    }
}
