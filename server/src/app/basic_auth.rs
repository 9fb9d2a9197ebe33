//! Basic authentication against bcrypt htpasswd entries, without running bcrypt on a
//! serving thread.
//!
//! Routing decides what it can at once: no or garbled credentials deny, credentials
//! verified before permit. Anything else becomes a `Verification`, which the connection
//! awaits (`Verification::run`) on a bounded blocking pool, then routes the request again
//! with the `Verdict`. An unknown user is verified against a dummy hash of the same cost
//! as the real entries, so the time to answer does not tell which names exist.

use crate::http::request::RequestHead;
use crate::metrics::{Metrics, ResultLabels};
use base64::Engine;
use http::HeaderValue;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};
use tokio::sync::Semaphore;

/// Credentials that passed bcrypt, by keyed digest of the Authorization value.
type Verified = quick_cache::sync::Cache<u128, ()>;

/// How many successful verifications each rule remembers.
const VERIFIED_CAPACITY: usize = 1024;

/// bcrypt's own base64 (`./A-Za-z0-9`, no padding).
const BCRYPT_B64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::BCRYPT,
    base64::engine::general_purpose::NO_PAD,
);

#[derive(Clone)]
pub struct BasicAuth {
    pub challenge: HeaderValue,
    users: HashMap<String, Arc<str>>,
    /// What unknown users are verified against: the highest cost among the entries, so a
    /// missing name costs at least what any real one does.
    dummy_hash: Arc<str>,
    /// The key of the digests in `verified` (random per rule and generation).
    digest_key: std::hash::RandomState,
    verified: Arc<Verified>,
    /// Lines of its file that were left out (refused on a reload or from an optional
    /// file), for `skiff_basic_auth_entries_left_out`.
    pub left_out: usize,
}

/// What basic auth makes of a request without running bcrypt.
pub enum Decision {
    Permit,
    /// 401 with the challenge.
    Deny,
    /// The credentials need a bcrypt: await `Verification::run`, then route again.
    Verify(Verification),
    /// The verification pool was full: 503 with Retry-After, not a 401 that would make
    /// a browser ask again for a password that may be right.
    Busy,
}

/// One bcrypt to run off the serving thread. Owns what it needs, so it can move there.
pub struct Verification {
    key: u128,
    password: String,
    hash: Arc<str>,
    /// False for an unknown user: the dummy hash is verified for its cost only, and the
    /// answer is no whatever it says.
    known: bool,
    verified: Arc<Verified>,
}

/// A verification's answer for one request, which routing that request again consults
/// instead of verifying again.
#[derive(Clone, Copy, Debug)]
pub struct Verdict {
    key: u128,
    outcome: Outcome,
}

/// What a verification found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Permit,
    Deny,
    /// Not checked: the queue was full or the wait too long.
    Busy,
}

/// The highest bcrypt cost accepted: each check at cost 14 holds a CPU for about a
/// second, and every guess at an unknown user pays the file's highest cost.
const MAX_COST: u32 = 14;

impl BasicAuth {
    /// Parses an htpasswd file. Only well-formed bcrypt (`$2a$`, `$2b$`, `$2y$`) entries are
    /// accepted: plaintext, crypt(3), MD5 and SHA-1 entries are refused with the line
    /// number, and so is a bcrypt entry bcrypt could not read (it would fail at once, and
    /// that speed would tell the user apart from the others).
    pub fn from_htpasswd(text: &str, realm: &str) -> Result<BasicAuth, String> {
        let (users, max_cost, refused) = parse(text);
        if let Some(first) = refused.into_iter().next() {
            return Err(first);
        }
        // No users (an emptied file, as nginx reads one): everyone is denied.
        BasicAuth::with_users(users, max_cost, realm)
    }

    /// As [`BasicAuth::from_htpasswd`], but a refused line only leaves its user out (as
    /// nginx reads the file): for a reload, where refusing the whole file would keep the
    /// users an edit removed. Returns the refused lines' messages too.
    pub fn from_htpasswd_skipping(
        text: &str,
        realm: &str,
    ) -> Result<(BasicAuth, Vec<String>), String> {
        let (users, max_cost, refused) = parse(text);
        let mut auth = BasicAuth::with_users(users, max_cost, realm)?;
        auth.left_out = refused.len();
        Ok((auth, refused))
    }

    /// Whether no user can pass (an empty file, or an optional one not there yet).
    pub fn denies_all(&self) -> bool {
        self.users.is_empty()
    }

    /// Denies every request, with the realm's challenge: an optional htpasswd file that
    /// does not exist yet. No credentials are verified, as none can be right.
    pub fn deny_all(realm: &str) -> Result<BasicAuth, String> {
        BasicAuth::with_users(HashMap::new(), 4, realm)
    }

    fn with_users(
        users: HashMap<String, Arc<str>>,
        max_cost: u32,
        realm: &str,
    ) -> Result<BasicAuth, String> {
        let challenge =
            HeaderValue::from_str(&format!("Basic realm=\"{realm}\", charset=\"UTF-8\""))
                .map_err(|_| "the realm is not a valid header value".to_owned())?;
        Ok(BasicAuth {
            challenge,
            users,
            dummy_hash: dummy_hash(max_cost).into(),
            digest_key: std::hash::RandomState::new(),
            verified: Arc::new(Verified::new(VERIFIED_CAPACITY)),
            left_out: 0,
        })
    }

    /// Decides without bcrypt when it can. `verdict` is this request's own verification,
    /// when it is being routed again after one.
    pub fn decide(&self, req: &RequestHead<'_>, verdict: Option<&Verdict>) -> Decision {
        let Some(value) = req.headers.get("authorization") else {
            return Decision::Deny;
        };
        if self.users.is_empty() {
            return Decision::Deny;
        }
        let key = self.digest(value);
        if let Some(v) = verdict.filter(|v| v.key == key) {
            return match v.outcome {
                Outcome::Permit => Decision::Permit,
                Outcome::Deny => Decision::Deny,
                Outcome::Busy => Decision::Busy,
            };
        }
        if self.verified.get(&key).is_some() {
            return Decision::Permit;
        }
        let Some((user, password)) = credentials(value) else {
            return Decision::Deny;
        };
        let (hash, known) = match self.users.get(user.as_str()) {
            Some(hash) => (hash.clone(), true),
            None => (self.dummy_hash.clone(), false),
        };
        Decision::Verify(Verification {
            key,
            password,
            hash,
            known,
            verified: self.verified.clone(),
        })
    }

    /// A 128-bit keyed digest (two domain-separated SipHash outputs under a random key):
    /// the cache holds no passwords, and without the key a collision cannot be aimed at.
    fn digest(&self, value: &[u8]) -> u128 {
        let half = |domain: u8| u128::from(self.digest_key.hash_one((domain, value)));
        (half(0) << 64) | half(1)
    }
}

/// `Basic base64(user:password)`, decoded.
fn credentials(value: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(value).ok()?;
    let (scheme, token) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let raw = String::from_utf8(raw).ok()?;
    let (user, password) = raw.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The cost of a well-formed bcrypt hash (`$2b$NN$` + 22 characters of salt + 31 of
/// digest), or `None` if bcrypt would refuse it without hashing.
fn bcrypt_cost(hash: &str) -> Option<u32> {
    let rest = hash.get(4..)?;
    let (cost, rest) = rest.split_once('$')?;
    let cost: u32 = cost.parse().ok().filter(|c| (4..=31).contains(c))?;
    if rest.len() != 53 || !rest.is_char_boundary(22) {
        return None;
    }
    let (salt, digest) = rest.split_at(22);
    let salt_ok = BCRYPT_B64.decode(salt).is_ok_and(|s| s.len() == 16);
    let digest_ok = BCRYPT_B64.decode(digest).is_ok_and(|d| d.len() == 23);
    (salt_ok && digest_ok).then_some(cost)
}

/// The users of an htpasswd file, the highest cost among them, and a message for each
/// line refused (with its number). A user named on several lines, valid or not, is left
/// out whole: which password is theirs is unclear (Apache and nginx take the first line,
/// and an older Skiff the last), so neither is trusted until one line is left.
fn parse(text: &str) -> (HashMap<String, Arc<str>>, u32, Vec<String>) {
    let mut lines_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        if let Some(user) = named_user(line) {
            lines_of.entry(user).or_default().push(n + 1);
        }
    }
    let mut users = HashMap::new();
    let mut max_cost = 0;
    let mut refused = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if let Some(lines) = named_user(line).and_then(|u| lines_of.get(u).map(|l| (u, l))) {
            let (user, lines) = lines;
            if lines.len() > 1 {
                let all: Vec<String> = lines.iter().map(usize::to_string).collect();
                refused.push(format!(
                    "line {}: {user:?} is on lines {}: none is used until one is left",
                    n + 1,
                    all.join(", ")
                ));
                continue;
            }
        }
        match entry(line) {
            Ok(None) => {}
            Ok(Some((user, hash, cost))) => {
                max_cost = max_cost.max(cost);
                users.insert(user.to_owned(), Arc::from(hash));
            }
            Err(e) => refused.push(format!("line {}: {e}", n + 1)),
        }
    }
    (users, max_cost, refused)
}

/// The user a line names, well formed or not: none for a blank line, a comment or a line
/// without a colon.
fn named_user(line: &str) -> Option<&str> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    line.split_once(':').map(|(user, _)| user)
}

/// One line: `None` for a blank line or a comment, else the user, hash and cost.
fn entry(line: &str) -> Result<Option<(&str, &str, u32)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let (user, hash) = line.split_once(':').ok_or("expected user:hash")?;
    if !(hash.starts_with("$2a$") || hash.starts_with("$2b$") || hash.starts_with("$2y$")) {
        return Err(format!(
            "the entry for {user:?} is not bcrypt; create it with `htpasswd -B`"
        ));
    }
    let cost = bcrypt_cost(hash).ok_or_else(|| {
        format!("the bcrypt entry for {user:?} is malformed; create it with `htpasswd -B`")
    })?;
    if cost > MAX_COST {
        return Err(format!(
            "the bcrypt cost of {user:?} is {cost}, above {MAX_COST}: each check would hold a CPU for seconds; create it with `htpasswd -B -C 12`"
        ));
    }
    Ok(Some((user, hash, cost)))
}

/// A well-formed hash of the given cost with a random salt, built without hashing (so a
/// reload does not pay a bcrypt for it).
fn dummy_hash(cost: u32) -> String {
    let random = std::hash::RandomState::new();
    let mut salt = [0u8; 16];
    salt[..8].copy_from_slice(&random.hash_one(0u8).to_le_bytes());
    salt[8..].copy_from_slice(&random.hash_one(1u8).to_le_bytes());
    format!(
        "$2b${cost:02}${}{}",
        BCRYPT_B64.encode(salt),
        BCRYPT_B64.encode([0u8; 23])
    )
}

/// How a verification ended, the `result` label of `skiff_auth_verifications_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Checked {
    Success,
    WrongPassword,
    UnknownUser,
}

impl Checked {
    fn label(self) -> &'static str {
        match self {
            Checked::Success => "success",
            Checked::WrongPassword => "wrong_password",
            Checked::UnknownUser => "unknown_user",
        }
    }
}

/// The slots of the process-wide verification pool: one per CPU, so a flood of guesses
/// queues here instead of starting a blocking thread each.
fn slots() -> &'static Semaphore {
    static SLOTS: OnceLock<Semaphore> = OnceLock::new();
    SLOTS
        .get_or_init(|| Semaphore::new(std::thread::available_parallelism().map_or(1, |n| n.get())))
}

/// Verifications waiting for a slot or running, across the process, at most.
const MAX_QUEUED: usize = 256;
/// The longest a verification waits for a slot.
const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A place in the bounded verification queue, until dropped.
struct Queued;

static QUEUED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Queued {
    fn enter() -> Option<Queued> {
        use std::sync::atomic::Ordering;
        let before = QUEUED.fetch_add(1, Ordering::Relaxed);
        if before >= MAX_QUEUED {
            QUEUED.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Queued)
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        QUEUED.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Counts a verification in `skiff_auth_verifications_pending` until it is dropped.
struct Pending(Gauge);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Verification {
    /// Runs bcrypt on the runtime's blocking threads, at most one per CPU at a time
    /// across the process, and counts it. The serving thread stays free meanwhile.
    pub async fn run(self, metrics: &Metrics) -> Verdict {
        let refused = Verdict {
            key: self.key,
            outcome: Outcome::Busy,
        };
        // A flood queues here, but not without end: past the bound, or after waiting
        // `MAX_WAIT`, the request is refused without a bcrypt, so queued checks cannot
        // hold every connection permit (each waiting connection holds one).
        let Some(_queued) = Queued::enter() else {
            return refused;
        };
        metrics.auth_verifications_pending.inc();
        let pending = Pending(metrics.auth_verifications_pending.clone());
        let Ok(slot) = tokio::time::timeout(MAX_WAIT, slots().acquire()).await else {
            return refused;
        };
        let slot = slot.expect("the semaphore is never closed");
        let results = metrics.auth_verifications.clone();
        let key = self.key;
        let checked = tokio::task::spawn_blocking(move || {
            // The slot and the gauge go with the work: a request abandoned while bcrypt
            // runs still holds its slot until bcrypt ends.
            let (_slot, _pending) = (slot, pending);
            let checked = self.check();
            results
                .get_or_create(&ResultLabels {
                    result: checked.label(),
                })
                .inc();
            checked
        })
        .await;
        Verdict {
            key,
            outcome: if matches!(checked, Ok(Checked::Success)) {
                Outcome::Permit
            } else {
                Outcome::Deny
            },
        }
    }

    /// The bcrypt itself; a success is remembered for the next requests with the same
    /// Authorization value.
    fn check(self) -> Checked {
        let matched = bcrypt::verify(&self.password, &self.hash).unwrap_or(false);
        if !self.known {
            return Checked::UnknownUser;
        }
        if !matched {
            return Checked::WrongPassword;
        }
        self.verified.insert(self.key, ());
        Checked::Success
    }
}

#[cfg(test)]
mod tests;
