//! HTTPS: certificates by SNI (`table`), checked before they serve (`pair`), reloaded when
//! their files change (`watch`), the rustls policy (`policy`) and kTLS (`ktls`).

pub mod ktls;
mod pair;
mod policy;
mod table;
#[cfg(test)]
pub(crate) mod test_certs;
pub mod watch;

use crate::metrics::Metrics;
use crate::settings::TlsSettings;
use arc_swap::ArcSwap;
use pair::{LoadedPair, PairFiles};
use rustls::crypto::CryptoProvider;
use rustls::ServerConfig;
use skiff_config::Config;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use table::{CertTable, Resolver, Slot};

/// The certificates a configuration asks for, and the names each serves.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    entries: Vec<Entry>,
    /// Each virtual server, for the expiry metric and `/certificates`.
    vhosts: Vec<VhostProbe>,
}

#[derive(Debug, Clone)]
struct VhostProbe {
    name: String,
    /// A name its certificate is found by (`None`: the default's, for clients without SNI).
    probe: Option<String>,
    /// Its own certificate's files: while they are pending, the certificate another
    /// entry lends its names is not reported as its own.
    own: Option<PairFiles>,
}

#[derive(Debug, Clone)]
struct Entry {
    files: PairFiles,
    /// A virtual server's hosts; `None`: the names in the certificate.
    hosts: Option<Vec<String>>,
    default: bool,
    /// Files that do not load leave it pending rather than fail the start or reload.
    optional: bool,
    /// The virtual server it is for (`None`: the listener's).
    vhost: Option<String>,
}

impl Wanted {
    /// Virtual servers' own certificates first (they win a name both claim), then the
    /// listener's. Relative paths are taken from `base`, as roots are.
    pub fn from_config(cfg: &Config, base: &Path) -> Wanted {
        let files = |f: &skiff_config::CertificateFiles| PairFiles {
            cert: base.join(&f.cert),
            key: base.join(&f.key),
            ocsp: f.ocsp.as_ref().map(|o| base.join(o)),
        };
        let mut wanted = Wanted::default();
        for vs in &cfg.virtual_servers {
            let own = vs.tls.as_ref().map(files);
            if let Some(f) = &vs.tls {
                wanted.entries.push(Entry {
                    files: files(f),
                    hosts: Some(vs.hosts.clone()),
                    default: vs.default,
                    optional: f.optional,
                    vhost: Some(vs.name.clone()),
                });
            }
            // A wildcard's certificate is found by any name one label below it.
            let probe = vs.hosts.first().map(|h| match h.strip_prefix("*.") {
                Some(parent) => format!("wildcard.{parent}"),
                None => h.clone(),
            });
            wanted.vhosts.push(VhostProbe {
                name: vs.name.clone(),
                probe,
                own,
            });
        }
        for f in cfg.tls.iter().flat_map(|t| &t.certificates) {
            wanted.entries.push(Entry {
                files: files(f),
                hosts: None,
                default: false,
                optional: f.optional,
                vhost: None,
            });
        }
        wanted
    }

    /// Each pair's files once, with whether every entry naming them is optional.
    fn pairs(&self) -> Vec<(&PairFiles, bool)> {
        let mut pairs: Vec<(&PairFiles, bool)> = Vec::new();
        for e in &self.entries {
            match pairs.iter_mut().find(|(f, _)| *f == &e.files) {
                Some((_, optional)) => *optional &= e.optional,
                None => pairs.push((&e.files, e.optional)),
            }
        }
        pairs
    }

    /// Loads every wanted pair as starting would (`skiff check`): the first that fails
    /// to parse, or whose key does not match, is the error. Optional pairs may wait.
    pub fn check(&self) -> Result<(), String> {
        let provider = policy::provider();
        for (files, optional) in self.pairs() {
            if !optional {
                pair::load(files, &provider)?;
            }
        }
        Ok(())
    }
}

/// What serves now: the wanted certificates and their last good loads. An optional pair
/// whose files have not loaded yet (pending) has none: its virtual server serves its
/// fallback meanwhile, if it has one, else its names get no certificate of their own.
struct Live {
    wanted: Wanted,
    loaded: HashMap<PairFiles, LoadedPair>,
    /// What serves for a pending pair meanwhile: the pair its virtual server had (a pod
    /// that cannot mount a Secret renamed since it started keeps its certificate).
    fallback: HashMap<PairFiles, LoadedPair>,
}

impl Live {
    /// The pair serving for `files`: its own, else its fallback.
    fn serving(&self, files: &PairFiles) -> Option<&LoadedPair> {
        self.loaded.get(files).or_else(|| self.fallback.get(files))
    }

    /// What the virtual servers `wanted` names with `files` serve now, if it names all
    /// their hosts (a pair lent to other hosts would only fail clients' checks).
    fn serving_for(&self, wanted: &Wanted, files: &PairFiles) -> Option<&LoadedPair> {
        let entries: Vec<&Entry> = wanted
            .entries
            .iter()
            .filter(|e| &e.files == files)
            .collect();
        let vhosts: Vec<&str> = entries.iter().filter_map(|e| e.vhost.as_deref()).collect();
        let hosts = entries.iter().flat_map(|e| e.hosts.iter().flatten());
        let pair = self
            .wanted
            .entries
            .iter()
            .filter(|e| e.vhost.as_deref().is_some_and(|v| vhosts.contains(&v)))
            .find_map(|e| self.serving(&e.files))?;
        hosts.clone().all(|h| pair.covers(h)).then_some(pair)
    }
}

/// The TLS side of the process: one `ServerConfig` whose resolver reads the live table.
pub struct Tls {
    pub config: Arc<ServerConfig>,
    pub settings: TlsSettings,
    table: Arc<ArcSwap<CertTable>>,
    live: Mutex<Live>,
    provider: CryptoProvider,
    metrics: Arc<Metrics>,
}

/// A configuration's certificates, loaded and checked, ready to replace the live ones.
pub struct Prepared {
    wanted: Wanted,
    loaded: HashMap<PairFiles, LoadedPair>,
    fallback: HashMap<PairFiles, LoadedPair>,
}

impl Tls {
    /// Loads every wanted certificate; any that fails to load fails the start.
    pub fn new(
        settings: TlsSettings,
        wanted: Wanted,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Tls>, String> {
        let table = Arc::new(ArcSwap::from_pointee(CertTable::default()));
        let resolver = Arc::new(Resolver {
            table: table.clone(),
        });
        let config = policy::server_config(resolver, settings.tls13_only, settings.ktls)?;
        let tls = Tls {
            config,
            settings,
            table,
            live: Mutex::new(Live {
                wanted: Wanted::default(),
                loaded: HashMap::new(),
                fallback: HashMap::new(),
            }),
            provider: policy::provider(),
            metrics,
        };
        let prepared = tls.prepare(wanted)?;
        tls.commit(prepared);
        Ok(Arc::new(tls))
    }

    /// Loads a new configuration's certificates (a reload): an error keeps the old
    /// configuration serving. Every pair is read again; one already serving is kept,
    /// as [`Tls::refresh`] would keep it, when its files now fail to load (caught
    /// mid-rotation) or hold a certificate outside its validity while the serving one
    /// is not. Only a new pair that fails to load fails the reload; an optional one waits
    /// (pending) instead.
    pub fn prepare(&self, wanted: Wanted) -> Result<Prepared, String> {
        let now = pair::unix_now();
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let mut loaded = HashMap::new();
        let mut fallback = HashMap::new();
        for (files, optional) in wanted.pairs() {
            let fresh = pair::load(files, &self.provider);
            let kept = |why: &str| {
                tracing::error!(
                    cert = %files.cert.display(),
                    "certificate not reloaded, the previous one keeps serving: {why}"
                );
                self.metrics
                    .tls_certificate_reloads
                    .get_or_create(&crate::metrics::ResultLabels { result: "failure" })
                    .inc();
            };
            let pair = match (fresh, live.loaded.get(files)) {
                (Err(e), Some(old)) => {
                    kept(&e);
                    old.clone()
                }
                (Ok(p), Some(old)) if !p.valid_at(now) && old.valid_at(now) => {
                    kept("the new certificate is outside its validity period");
                    old.clone()
                }
                (Err(e), None) if optional => {
                    self.report_pending(files, &e, false);
                    if let Some(old) = live.serving_for(&wanted, files) {
                        fallback.insert(files.clone(), old.clone());
                    }
                    continue;
                }
                (Err(e), None) => return Err(e),
                (Ok(p), _) => {
                    if !p.valid_at(now) {
                        // Nothing better exists for it: served, loudly (a browser will
                        // refuse it).
                        tracing::error!(
                            cert = %files.cert.display(),
                            not_after = p.not_after,
                            "certificate outside its validity period; serving it until it is replaced"
                        );
                    }
                    p
                }
            };
            loaded.insert(files.clone(), pair);
        }
        if wanted.entries.is_empty() {
            return Err("the TLS listener has no certificate".into());
        }
        Ok(Prepared {
            wanted,
            loaded,
            fallback,
        })
    }

    /// Makes prepared certificates the live ones. A pending pair a refresh loaded since
    /// `prepare` stays loaded.
    pub fn commit(&self, prepared: Prepared) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let Prepared {
            wanted,
            mut loaded,
            mut fallback,
        } = prepared;
        for (files, _) in wanted.pairs() {
            if let (None, Some(p)) = (loaded.get(files), live.loaded.get(files)) {
                loaded.insert(files.clone(), p.clone());
                fallback.remove(files);
            }
        }
        *live = Live {
            wanted,
            loaded,
            fallback,
        };
        self.install(&live);
    }

    /// Says why an optional pair waits: quietly (once, or not on rechecks) while its files
    /// do not exist, loudly and counted when they exist and do not load.
    fn report_pending(&self, files: &PairFiles, error: &str, recheck: bool) {
        if !pair::missing(files) {
            tracing::error!(cert = %files.cert.display(), "optional certificate does not load; its virtual server keeps what it had, if anything: {error}");
            self.metrics
                .tls_certificate_reloads
                .get_or_create(&crate::metrics::ResultLabels { result: "failure" })
                .inc();
        } else if !recheck {
            tracing::warn!(cert = %files.cert.display(), "optional certificate waits for its files; its virtual server keeps what it had, if anything: {error}");
        }
    }

    /// Reads every live certificate's files again (they changed on disk). A pair that
    /// changed and passes its checks replaces the old one; one that fails keeps the old
    /// one serving, logged and counted. A pending pair serves once its files load.
    /// Returns how many pairs were replaced or loaded.
    pub fn refresh(&self) -> usize {
        let now = pair::unix_now();
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let files: Vec<PairFiles> = live
            .wanted
            .pairs()
            .into_iter()
            .map(|(f, _)| f.clone())
            .collect();
        let mut replaced = 0;
        for files in files {
            if let std::collections::hash_map::Entry::Vacant(pending) =
                live.loaded.entry(files.clone())
            {
                if let Some(p) = self.load_pending(&files, now) {
                    pending.insert(p);
                    live.fallback.remove(&files);
                    replaced += 1;
                }
                continue;
            }
            let result = pair::load(&files, &self.provider).and_then(|p| {
                if p.valid_at(now) {
                    Ok(p)
                } else {
                    Err(format!(
                        "certificate {} is outside its validity period",
                        files.cert.display()
                    ))
                }
            });
            let old = &live.loaded[&files];
            let outcome = match result {
                Ok(p) if p.fingerprint == old.fingerprint => continue,
                Ok(p) => {
                    tracing::info!(
                        cert = %files.cert.display(),
                        serial = p.serial.as_str(),
                        not_after = p.not_after,
                        "certificate reloaded"
                    );
                    live.loaded.insert(files, p);
                    replaced += 1;
                    "success"
                }
                Err(e) => {
                    // A half-written pair (the key before the certificate) fails here
                    // once; the next event, with both files in place, loads it.
                    tracing::error!(
                        "certificate not reloaded, the previous one keeps serving: {e}"
                    );
                    "failure"
                }
            };
            self.metrics
                .tls_certificate_reloads
                .get_or_create(&crate::metrics::ResultLabels { result: outcome })
                .inc();
        }
        if replaced > 0 {
            self.install(&live);
        }
        replaced
    }

    /// A pending pair's files, if they load now (logged and counted; out of its validity
    /// period it still serves, as its files are what its Secret now holds). `None` while
    /// they do not load, said as [`Tls::report_pending`] says it on a recheck.
    fn load_pending(&self, files: &PairFiles, now: i64) -> Option<LoadedPair> {
        let p = match pair::load(files, &self.provider) {
            Ok(p) => p,
            Err(e) => {
                self.report_pending(files, &e, true);
                return None;
            }
        };
        if p.valid_at(now) {
            tracing::info!(cert = %files.cert.display(), serial = p.serial.as_str(), not_after = p.not_after, "optional certificate loaded");
        } else {
            tracing::error!(cert = %files.cert.display(), not_after = p.not_after, "optional certificate loaded outside its validity period");
        }
        self.metrics
            .tls_certificate_reloads
            .get_or_create(&crate::metrics::ResultLabels { result: "success" })
            .inc();
        Some(p)
    }

    /// Builds the table from the live pairs and swaps it in; sets the expiry metric.
    fn install(&self, live: &Live) {
        let mut table = CertTable::default();
        let mut first_listener_slot = None;
        for entry in &live.wanted.entries {
            let Some(pair) = live.serving(&entry.files) else {
                continue; // pending, with nothing to serve meanwhile
            };
            let i = table.slot(Slot {
                id: entry.files.cert.to_string_lossy().into(),
                key: pair.key.clone(),
                not_before: pair.not_before,
                not_after: pair.not_after,
                serial: pair.serial.clone(),
            });
            for name in entry.hosts.as_ref().unwrap_or(&pair.names) {
                table.claim(name, i);
            }
            if entry.default {
                table.default_to(i);
            }
            if entry.hosts.is_none() {
                first_listener_slot.get_or_insert(i);
            }
        }
        // No default virtual server with a certificate: the listener's first, else the
        // first at all, answers clients without SNI.
        if let Some(i) = first_listener_slot {
            table.default_to(i);
        }
        if !table.is_empty() {
            table.default_to(0);
        }
        let (expiry, issued) = (
            &self.metrics.tls_certificate_expiry,
            &self.metrics.tls_certificate_issued,
        );
        expiry.clear();
        issued.clear();
        let mut served = Vec::new();
        for v in &live.wanted.vhosts {
            if v.own.as_ref().is_some_and(|f| live.serving(f).is_none()) {
                continue; // pending: another entry's certificate is not its own
            }
            // Serving the pair it had while its own is pending: said, so the operator does
            // not count it as the new Secret's.
            let fallback = v.own.as_ref().is_some_and(|f| !live.loaded.contains_key(f));
            let vhost = &v.name;
            if let Some(slot) = table.find(v.probe.as_deref()) {
                let labels = crate::metrics::VhostNameLabels {
                    vhost: vhost.clone(),
                };
                expiry.get_or_create(&labels).set(slot.not_after);
                issued.get_or_create(&labels).set(slot.not_before);
                // Names are validated ([A-Za-z0-9._-]) and serials hex: nothing to escape.
                served.push(format!(
                    "{{\"vhost\":\"{vhost}\",\"serial\":\"{}\",\"not_after\":{}{}}}",
                    slot.serial,
                    slot.not_after,
                    if fallback { ",\"fallback\":true" } else { "" }
                ));
            }
        }
        self.metrics
            .served_certificates
            .store(Arc::new(format!("[{}]\n", served.join(","))));
        self.table.store(Arc::new(table));
    }

    /// The certificate slot a server name gets (SNI, or a Host's name).
    pub fn slot_for(&self, name: Option<&str>) -> Option<Arc<str>> {
        self.table.load().find(name).map(|s| s.id.clone())
    }

    /// Whether a request's Host belongs to another certificate than the one its
    /// connection was given (`given`), which RFC 9110 §15.5.20 answers with 421.
    pub fn misdirected(&self, given: Option<&str>, host: Option<&[u8]>) -> bool {
        let Some(host) = host else { return false };
        let Ok(authority) = skiff_http::host::parse_authority(host) else {
            return false; // an invalid Host is answered 400 by the front
        };
        let table = self.table.load();
        table.find(Some(&authority.name)).map(|s| &*s.id) != given
    }

    /// The folders holding the wanted certificate files (pending ones' too), which the
    /// watcher follows.
    pub fn folders(&self) -> Vec<PathBuf> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let mut dirs: Vec<PathBuf> = live
            .wanted
            .entries
            .iter()
            .map(|e| &e.files)
            .flat_map(|f| [Some(&f.cert), Some(&f.key), f.ocsp.as_ref()])
            .flatten()
            .filter_map(|p| p.parent().map(Path::to_owned))
            .collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Whether a file name is one of the live certificate files (or a Kubernetes
    /// volume's `..data` swap beside them).
    pub fn is_certificate_file(&self, name: &std::ffi::OsStr) -> bool {
        if name.as_encoded_bytes().starts_with(b"..") {
            return true;
        }
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.wanted.entries.iter().map(|e| &e.files).any(|f| {
            [Some(&f.cert), Some(&f.key), f.ocsp.as_ref()]
                .into_iter()
                .flatten()
                .any(|p| p.file_name() == Some(name))
        })
    }
}
