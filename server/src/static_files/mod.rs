//! The static file handler: maps the request path, consults the I/O cache, negotiates a
//! precompressed sidecar, then applies RFC 9110 preconditions and ranges. No sockets here,
//! so every behaviour is testable by calling `respond` directly.

mod compress;
mod listing;

pub use compress::CompressionPolicy;

use crate::cache::{CacheRoot, Data, FileCache, FileEntry, Hit, Lookup, Variant};
use crate::fs::path::{clean_request_path, CleanPath, PathPolicy};
use crate::http::conditional::{self, Outcome, Validators};
use crate::http::encoding::{negotiate, Encoding};
use crate::http::range::{self, ByteRange, RangeOutcome};
use crate::http::reply::{Body, FileSlice, Part, PrebuiltHead, Reply};
use crate::http::request::RequestHead;
use bytes::Bytes;
use http::header::{
    ACCEPT_RANGES, ALLOW, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_RANGE, CONTENT_TYPE, ETAG,
    LAST_MODIFIED, LOCATION, VARY,
};
use http::{HeaderName, HeaderValue, Method, StatusCode};
use std::sync::Arc;

const ALLOWED: HeaderValue = HeaderValue::from_static("GET, HEAD, OPTIONS");

#[derive(Debug, Clone)]
pub struct StaticOptions {
    pub allow_hidden: bool,
    pub listing: bool,
    /// Cache-Control sent with files and their 304s, if any.
    pub cache_control: Option<HeaderValue>,
    /// On-the-fly compression of cacheable files, if enabled.
    pub compression: Option<Arc<CompressionPolicy>>,
}

/// The path a miss was answered from.
enum Tried<'m> {
    Page(CleanPath<'static>),
    Shell(&'m CleanPath<'static>),
}

/// What a `static` rule tries for a GET or HEAD whose path names nothing, in this order.
#[derive(Debug, Default)]
pub struct Misses {
    /// The path with `.html` appended, also before a folder's redirect (`/about` is
    /// `/about.html`, as static exports name their pages).
    pub html_extension: bool,
    /// A single-page app's shell, whose script routes the path itself.
    pub fallback: Option<CleanPath<'static>>,
}

pub struct StaticFiles {
    cache: Arc<FileCache>,
    root: Arc<CacheRoot>,
    options: StaticOptions,
    boundary: String,
}

impl StaticFiles {
    pub fn new(cache: Arc<FileCache>, root: Arc<CacheRoot>, options: StaticOptions) -> StaticFiles {
        // The multipart boundary only has to be absent from the parts; a per-process
        // value derived from time and pid is enough for that.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ (std::process::id() as u128) << 64;
        StaticFiles {
            cache,
            root,
            options,
            boundary: format!("skiff-{:032x}", seed),
        }
    }

    #[cfg(test)]
    pub fn cache(&self) -> &FileCache {
        &self.cache
    }

    pub fn path_policy(&self) -> PathPolicy {
        PathPolicy {
            allow_hidden: self.options.allow_hidden,
        }
    }

    /// Maps the request path, then serves it.
    pub fn respond(&self, req: &RequestHead<'_>) -> Reply {
        match clean_path_or_reply(req.path, self.path_policy()) {
            Ok(path) => self.respond_clean(req, &path),
            Err(reply) => reply,
        }
    }

    /// Serves an already mapped path.
    pub fn respond_clean(&self, req: &RequestHead<'_>, path: &CleanPath<'_>) -> Reply {
        self.respond_clean_or(req, path, None)
    }

    /// Serves a mapped path, or for a GET or HEAD of a path that names nothing, what
    /// `misses` tries.
    pub fn respond_or_try(
        &self,
        req: &RequestHead<'_>,
        path: &CleanPath<'_>,
        misses: &Misses,
    ) -> Reply {
        self.respond_clean_or(req, path, Some(misses))
    }

    #[inline]
    fn respond_clean_or(
        &self,
        req: &RequestHead<'_>,
        path: &CleanPath<'_>,
        misses: Option<&Misses>,
    ) -> Reply {
        let safe = match req.method {
            Method::GET | Method::HEAD => true,
            Method::OPTIONS => return Reply::new(StatusCode::NO_CONTENT).header(ALLOW, ALLOWED),
            _ => return Reply::error(StatusCode::METHOD_NOT_ALLOWED).header(ALLOW, ALLOWED),
        };
        // The one lookup of the hot path, inlined here as before misses existed; what a
        // miss tries is a call, so the answer below stays this function's alone.
        let mut found = self.cache.lookup(
            &self.root,
            path.as_str(),
            path.relative(),
            path.has_trailing_slash(),
        );
        let mut path = path;
        let tried;
        if let (Some(m), Ok(Lookup::NotFound | Lookup::RedirectToSlash)) = (misses, &found) {
            if let Some((t, f)) = self.try_misses(path, &found, m) {
                tried = t;
                path = match &tried {
                    Tried::Page(page) => page,
                    Tried::Shell(shell) => shell,
                };
                found = f;
            }
        }
        let found = match found {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(path = path.as_str(), error = %e, "file lookup failed");
                return Reply::error(StatusCode::INTERNAL_SERVER_ERROR);
            }
        };
        match found {
            Lookup::File(entry, hit) => {
                let made = std::cell::Cell::new(false);
                let mut reply = self.file_reply(req, path.as_str(), &entry, safe, &made);
                // A compressed form made for this request missed its own entry (and took
                // the time a compression takes: the exchange is timed as a miss). A page
                // or fallback counts as the file it is.
                reply.cache_hit = hit == Hit::Hit && !made.get();
                reply
            }
            Lookup::RedirectToSlash => {
                // From the cleaned path, not the raw one: `//evil.example/../docs` must
                // not become a scheme-relative `Location: //evil.example/../docs/`.
                let mut location = skiff_http::path::percent_encode(path.as_str(), true);
                location.push('/');
                if let Some(q) = req.query {
                    location.push('?');
                    location.push_str(q);
                }
                match HeaderValue::from_str(&location) {
                    Ok(v) => Reply::error(StatusCode::MOVED_PERMANENTLY).header(LOCATION, v),
                    Err(_) => Reply::error(StatusCode::BAD_REQUEST),
                }
            }
            Lookup::Directory(rel) if self.options.listing => {
                match listing::render(
                    &self.root.root,
                    &rel,
                    path.as_str(),
                    self.options.allow_hidden,
                ) {
                    Ok(html) => {
                        let mut r = Reply::new(StatusCode::OK).header(
                            CONTENT_TYPE,
                            HeaderValue::from_static("text/html; charset=utf-8"),
                        );
                        r.body = Body::Bytes(Bytes::from(html));
                        r
                    }
                    Err(e) => {
                        tracing::warn!(path = path.as_str(), error = %e, "directory listing failed");
                        Reply::error(StatusCode::INTERNAL_SERVER_ERROR)
                    }
                }
            }
            Lookup::Directory(_) | Lookup::Forbidden => Reply::error(StatusCode::FORBIDDEN),
            Lookup::NotFound => Reply::error(StatusCode::NOT_FOUND),
        }
    }

    /// Why `path` serves no file now, if it does not (a fallback checked at load).
    pub fn serves_no_file(&self, path: &CleanPath<'_>) -> Option<String> {
        match self.lookup(path) {
            Ok(Lookup::File(..)) => None,
            Ok(Lookup::NotFound) => Some("names no file under the root".into()),
            Ok(Lookup::RedirectToSlash) => {
                Some("names a folder: end it with '/' to serve the folder's index".into())
            }
            Ok(Lookup::Directory(_)) => Some("names a folder without an index file".into()),
            Ok(Lookup::Forbidden) => Some(
                "is refused (not readable, not a regular file, or a symlink out of the root)"
                    .into(),
            ),
            Err(e) => Some(format!("cannot be read: {e}")),
        }
    }

    /// What a GET or HEAD whose path named nothing (or a folder without its slash) gets
    /// instead, if anything: its page, else the shell.
    #[cold]
    #[inline(never)]
    fn try_misses<'m>(
        &self,
        path: &CleanPath<'_>,
        found: &std::io::Result<Lookup>,
        m: &'m Misses,
    ) -> Option<(Tried<'m>, std::io::Result<Lookup>)> {
        if let Some(page) = m.html_extension.then(|| self.page_of(path)).flatten() {
            // A page that fails to read is that error (a logged 500), not the shell.
            if let html @ (Ok(Lookup::File(..)) | Err(_)) = self.lookup(&page) {
                return Some((Tried::Page(page), html));
            }
        }
        match (found, &m.fallback) {
            (Ok(Lookup::NotFound), Some(shell)) => Some((Tried::Shell(shell), self.lookup(shell))),
            _ => None,
        }
    }

    /// `path` as a page name (`/about` as `/about.html`), unless that names a hidden file
    /// this site does not serve: only `/.well-known` can become one.
    fn page_of(&self, path: &CleanPath<'_>) -> Option<CleanPath<'static>> {
        let page = path.with_suffix(".html")?;
        let name = page.as_str().rsplit('/').next().unwrap_or_default();
        (self.options.allow_hidden || !name.starts_with('.')).then_some(page)
    }

    /// A lookup off the hot path (misses, the load check), a call of its own.
    #[inline(never)]
    fn lookup(&self, path: &CleanPath<'_>) -> std::io::Result<Lookup> {
        self.cache.lookup(
            &self.root,
            path.as_str(),
            path.relative(),
            path.has_trailing_slash(),
        )
    }

    fn file_reply(
        &self,
        req: &RequestHead<'_>,
        path: &str,
        entry: &FileEntry,
        safe: bool,
        made: &std::cell::Cell<bool>,
    ) -> Reply {
        // Codings on offer: sidecars first, then on-the-fly ones for cacheable text.
        let dynamic = self.options.compression.as_deref().filter(|c| {
            matches!(entry.identity.data, Data::Memory(..))
                && c.applies(entry.content_type.as_bytes(), entry.identity.len)
        });
        let mut offered = [Encoding::Gzip; 3];
        let mut n = 0;
        for e in entry
            .available
            .iter()
            .chain(dynamic.map_or(&[][..], |c| &c.encodings[..]))
        {
            if !offered[..n].contains(e) && n < offered.len() {
                offered[n] = *e;
                n += 1;
            }
        }
        let encoding = if n == 0 {
            None
        } else {
            negotiate(req.accept_encoding, &offered[..n])
        };
        let derived;
        let variant = match encoding {
            None => &entry.identity,
            // A sidecar exists: never compress again.
            Some(e) if entry.available.contains(&e) => entry.variant(Some(e)),
            Some(e) => {
                derived = self
                    .cache
                    .derived(&self.root, path, derived_tag(e), entry, |src| {
                        made.set(true);
                        match &src.data {
                            Data::Memory(bytes, _) => compress::compress(e, bytes)
                                .ok()
                                .filter(|packed| packed.len() < bytes.len())
                                .map(|packed| (packed, Some(e))),
                            Data::File(_) => None,
                        }
                    });
                derived.as_ref().map_or(&entry.identity, |d| &d.identity)
            }
        };
        let validators = Validators {
            etag: variant.etag.as_bytes(),
            last_modified: variant.modified,
        };
        let vary = n > 0;
        match conditional::evaluate(&req.preconditions, &validators, safe) {
            Outcome::Proceed => {}
            Outcome::NotModified => {
                let mut r = Reply::new(StatusCode::NOT_MODIFIED);
                r.headers.reserve(4);
                r.headers.push((ETAG, variant.etag.clone()));
                r.headers
                    .push((LAST_MODIFIED, variant.last_modified.clone()));
                self.push_cache_headers(&mut r, vary);
                return r;
            }
            Outcome::PreconditionFailed => return Reply::error(StatusCode::PRECONDITION_FAILED),
        }

        let ranges = match req.range {
            Some(h) if req.method == Method::GET => {
                if req
                    .if_range
                    .is_none_or(|ir| conditional::if_range_allows(ir, &validators))
                {
                    range::parse(h, variant.len)
                } else {
                    RangeOutcome::Ignore
                }
            }
            _ => RangeOutcome::Ignore,
        };
        if ranges == RangeOutcome::Ignore {
            // The common case: the whole file, with a head built once per file version.
            let head = variant.head_200.get_or_init(|| {
                Arc::new(PrebuiltHead::new(
                    self.representation_headers(entry, variant, vary),
                    variant.len,
                ))
            });
            let mut r = Reply::new(StatusCode::OK);
            r.shared_head = Some(head.clone());
            r.body = whole(variant);
            return r;
        }
        let mut r = Reply::new(StatusCode::OK);
        r.headers = self.representation_headers(entry, variant, vary);

        match ranges {
            RangeOutcome::Ignore => unreachable!("handled above"),
            RangeOutcome::Unsatisfiable => {
                let mut e = Reply::error(StatusCode::RANGE_NOT_SATISFIABLE);
                e.headers.push((
                    CONTENT_RANGE,
                    header_value(format!("bytes */{}", variant.len)),
                ));
                return e;
            }
            RangeOutcome::Ranges(list) if list.len() == 1 => {
                let br = list[0];
                r.status = StatusCode::PARTIAL_CONTENT;
                r.headers.push((
                    CONTENT_RANGE,
                    header_value(format!("bytes {}-{}/{}", br.start, br.end, variant.len)),
                ));
                r.body = slice(variant, br);
            }
            RangeOutcome::Ranges(list) => {
                r.status = StatusCode::PARTIAL_CONTENT;
                let ctype = entry
                    .content_type
                    .to_str()
                    .unwrap_or("application/octet-stream");
                let mut parts = Vec::with_capacity(list.len() * 2 + 1);
                for br in &list {
                    let head = format!(
                        "\r\n--{}\r\nContent-Type: {}\r\nContent-Range: bytes {}-{}/{}\r\n\r\n",
                        self.boundary, ctype, br.start, br.end, variant.len
                    );
                    parts.push(Part::Bytes(Bytes::from(head)));
                    parts.push(match slice(variant, *br) {
                        Body::Bytes(b) => Part::Bytes(b),
                        Body::File(f) => Part::File(f),
                        _ => unreachable!("slice gives bytes or a file"),
                    });
                }
                parts.push(Part::Bytes(Bytes::from(format!(
                    "\r\n--{}--\r\n",
                    self.boundary
                ))));
                r.headers[0] = (
                    CONTENT_TYPE,
                    header_value(format!("multipart/byteranges; boundary={}", self.boundary)),
                );
                r.body = Body::Parts(parts);
            }
        }
        r
    }

    fn representation_headers(
        &self,
        entry: &FileEntry,
        variant: &Variant,
        vary: bool,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let mut r = Reply::new(StatusCode::OK);
        r.headers.reserve(7);
        r.headers.push((CONTENT_TYPE, entry.content_type.clone()));
        r.headers
            .push((LAST_MODIFIED, variant.last_modified.clone()));
        r.headers.push((ETAG, variant.etag.clone()));
        r.headers
            .push((ACCEPT_RANGES, HeaderValue::from_static("bytes")));
        if let Some(e) = variant.encoding {
            r.headers
                .push((CONTENT_ENCODING, HeaderValue::from_static(e.token())));
        }
        self.push_cache_headers(&mut r, vary);
        r.headers
    }

    fn push_cache_headers(&self, r: &mut Reply, vary: bool) {
        if let Some(cc) = &self.options.cache_control {
            r.headers.push((CACHE_CONTROL, cc.clone()));
        }
        if vary {
            r.headers
                .push((VARY, HeaderValue::from_static("Accept-Encoding")));
        }
    }
}

/// The cache tag of an on-the-fly coding (0 is the file itself).
fn derived_tag(e: Encoding) -> u8 {
    match e {
        Encoding::Brotli => 1,
        Encoding::Zstd => 2,
        Encoding::Gzip => 3,
    }
}

/// Maps a request path, or gives the reply for a path that cannot be mapped
/// (404 for hidden files, 400 for malformed or escaping paths).
pub fn clean_path_or_reply(raw: &str, policy: PathPolicy) -> Result<CleanPath<'_>, Reply> {
    match clean_request_path(raw, policy) {
        Ok(p) => Ok(p),
        Err(e) if e.is_not_found() => Err(Reply::error(StatusCode::NOT_FOUND)),
        Err(e) => {
            tracing::debug!(path = raw, error = %e, "rejected request path");
            Err(Reply::error(StatusCode::BAD_REQUEST))
        }
    }
}

fn whole(v: &Variant) -> Body {
    match &v.data {
        Data::Memory(b, None) => Body::Bytes(b.clone()),
        Data::Memory(b, Some(f)) => Body::Mirrored(
            b.clone(),
            FileSlice {
                file: f.clone(),
                offset: 0,
                len: v.len,
            },
        ),
        Data::File(f) => Body::File(FileSlice {
            file: f.clone(),
            offset: 0,
            len: v.len,
        }),
    }
}

fn slice(v: &Variant, br: ByteRange) -> Body {
    match &v.data {
        Data::Memory(b, _) => Body::Bytes(b.slice(br.start as usize..=br.end as usize)),
        Data::File(f) => Body::File(FileSlice {
            file: f.clone(),
            offset: br.start,
            len: br.len(),
        }),
    }
}

fn header_value(s: String) -> HeaderValue {
    HeaderValue::from_str(&s).expect("generated header values are visible ASCII")
}

#[cfg(test)]
mod tests;
