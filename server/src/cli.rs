//! Command line: the flags, their translation into a configuration and restart-only
//! settings, and the commands. Every flag can also be set through an environment
//! variable (`env=`), which is how the Kubernetes manifests configure the server. The
//! serving process itself is `lifecycle`.

use crate::access_log::LogFormat;
use crate::app::{App, ServeOverrides};
use crate::cache::{CacheSettings, FileCache, RootRegistry};
use crate::error::{ConfigError, StartError};
use crate::lifecycle;
use crate::reload::ConfigFile;
use crate::settings::{ConnLimits, Settings};
use clap::{Args, Parser, Subcommand};
use http::HeaderValue;
use skiff_config::Config;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "skiff",
    version,
    about = "Skiff: a featherweight static edge server"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve a directory with zero configuration.
    Serve(Box<ServeArgs>),
    /// Serve a configuration file, reloading it when it changes (or on SIGHUP).
    Run(RunArgs),
    /// Validate a configuration file: exit 0 if it would be served (warnings, such as rules
    /// shadowing protected ones, go to stderr), 1 with the errors if not.
    Check(CheckArgs),
    /// Print the JSON Schema of the configuration file.
    ConfigSchema,
    /// Copy a folder tree, or one file (for init containers filling an emptyDir from a
    /// content image).
    CopyTree {
        /// The folder (or file) to copy.
        src: PathBuf,
        /// Where to copy it (created if missing).
        dst: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The YAML configuration file (see server/CONFIG.md).
    #[arg(long, env = "SKIFF_CONFIG")]
    pub config: PathBuf,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The YAML configuration file.
    #[arg(long, env = "SKIFF_CONFIG")]
    pub config: PathBuf,
}

/// Send-path and shutdown tuning, shared by `serve` and `run`.
#[derive(Debug, Args)]
pub struct TuningArgs {
    /// Bodies of at least this size go out with sendfile(2) on plaintext HTTP/1.1 (cached
    /// files keep a descriptor for it); smaller ones from memory or with pread(2)+write.
    #[arg(long, default_value_t = 16 * 1024, env = "SKIFF_SENDFILE_MIN_BYTES")]
    pub sendfile_min_bytes: u64,
    /// Bodies at least this large use pread(2)+write instead of sendfile (0: never). Off by
    /// default: sendfile costs the least CPU at every size; pread only sends huge bodies
    /// faster over loopback, whose receiver copies sendfile's 4 KiB fragments slowly.
    #[arg(long, default_value_t = 0, env = "SKIFF_SENDFILE_MAX_BYTES")]
    pub sendfile_max_bytes: u64,
    /// Largest single sendfile(2) call; after each, the connection lets the worker's other
    /// connections go.
    #[arg(long, default_value_t = 512 * 1024, env = "SKIFF_SENDFILE_CHUNK_BYTES")]
    pub sendfile_chunk_bytes: usize,
    /// SO_SNDBUF for client sockets in bytes; 0 keeps the kernel's autotuning.
    #[arg(long, default_value_t = 0, env = "SKIFF_SEND_BUFFER_BYTES")]
    pub send_buffer_bytes: usize,
    /// Set TCP_CORK while a file body streams (full segments only).
    #[arg(long, default_value_t = false, env = "SKIFF_TCP_CORK", action = clap::ArgAction::Set)]
    pub tcp_cork: bool,
    /// Read buffer for bodies not sent with sendfile.
    #[arg(long, default_value_t = 1 << 20, env = "SKIFF_READ_CHUNK_BYTES")]
    pub read_chunk_bytes: usize,
    /// After SIGTERM, keep listening this long with /readyz failing (endpoint removal).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, env = "SKIFF_SHUTDOWN_DELAY")]
    pub shutdown_delay: Duration,
    /// Longest time in-flight responses get after listening stops.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, env = "SKIFF_SHUTDOWN_GRACE")]
    pub shutdown_grace: Duration,
    /// CPU scheduling of the serving threads: `batch` (SCHED_BATCH) lets a backend that
    /// shares the core finish its time slice instead of being preempted by every event,
    /// which the workers then handle together; `normal` is the kernel's default.
    #[arg(
        long,
        value_enum,
        default_value = "batch",
        env = "SKIFF_CPU_SCHEDULING"
    )]
    pub cpu_scheduling: crate::settings::CpuScheduling,
    /// The HTTP/2 implementation: `skiff` (its own, one task per connection) or `hyper`.
    #[arg(long, value_enum, default_value = "skiff", env = "SKIFF_H2_ENGINE")]
    pub h2_engine: crate::settings::H2Engine,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The document root.
    #[arg(default_value = ".", env = "SKIFF_ROOT")]
    pub root: PathBuf,
    /// Address to serve HTTP on (HTTP/1.1 and h2c). Default 0.0.0.0:8080, or none when
    /// --tls-listen is given (HTTPS only).
    #[arg(long, env = "SKIFF_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Address to serve HTTPS on (HTTP/1.1 and HTTP/2 by ALPN).
    #[arg(long, env = "SKIFF_TLS_LISTEN")]
    pub tls_listen: Option<SocketAddr>,
    /// A PEM certificate chain for --tls-listen; repeat for several, each with its
    /// --tls-key in the same order. Each serves the names it covers; the first also
    /// serves clients that send no SNI. Files are watched and reloaded when they change.
    #[arg(long, value_delimiter = ',', env = "SKIFF_TLS_CERT")]
    pub tls_cert: Vec<PathBuf>,
    /// The PEM private key of the --tls-cert in the same position.
    #[arg(long, value_delimiter = ',', env = "SKIFF_TLS_KEY")]
    pub tls_key: Vec<PathBuf>,
    /// The lowest TLS version accepted.
    #[arg(long, value_enum, default_value = "1.2", env = "SKIFF_TLS_MIN_VERSION")]
    pub tls_min_version: TlsMinVersion,
    /// Move established TLS sessions into the kernel (kTLS) so files go out with
    /// sendfile: `auto` where the kernel offers it, falling back quietly; `off` never.
    #[arg(long, value_enum, default_value = "auto", env = "SKIFF_KTLS")]
    pub ktls: KtlsFlag,
    /// Redirect plain-HTTP requests to HTTPS (308).
    #[arg(long, env = "SKIFF_HTTPS_REDIRECT")]
    pub https_redirect: bool,
    /// Address of the admin listener (/healthz, /readyz, /metrics).
    #[arg(long, default_value = "127.0.0.1:9145", env = "SKIFF_ADMIN_LISTEN")]
    pub admin_listen: SocketAddr,
    /// Serving threads; each runs its own event loop. Default: the number of cores.
    #[arg(long, env = "SKIFF_THREADS")]
    pub threads: Option<usize>,
    /// Files up to this size (bytes) are held in the in-memory I/O cache.
    #[arg(long, default_value_t = 256 * 1024, env = "SKIFF_CACHE_MAX_FILE_SIZE")]
    pub cache_max_file_size: u64,
    /// Total bytes the I/O cache may hold.
    #[arg(long, default_value_t = 64 * 1024 * 1024, env = "SKIFF_CACHE_MAX_BYTES")]
    pub cache_max_bytes: u64,
    /// How often a cached file is re-checked with stat (e.g. "1s", "250ms").
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration, env = "SKIFF_CACHE_REVALIDATE")]
    pub cache_revalidate: Duration,
    /// Index files tried, in order, for a directory.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "index.html,index.htm",
        env = "SKIFF_INDEX"
    )]
    pub index: Vec<String>,
    /// Generate an HTML listing for directories without an index file.
    #[arg(long, env = "SKIFF_LISTING")]
    pub listing: bool,
    /// A single-page app: GET and HEAD of a path that names no file or folder get this
    /// file, a path from the root such as /index.html (nginx's try_files $uri $uri/
    /// /index.html).
    #[arg(long, value_name = "PATH", env = "SKIFF_FALLBACK")]
    pub fallback: Option<String>,
    /// Pretty URLs of static exports: a path that names no file is tried with .html
    /// appended (/about serves /about.html).
    #[arg(long, env = "SKIFF_HTML_EXTENSION")]
    pub html_extension: bool,
    /// Serve files whose names start with a dot (.well-known is always served).
    #[arg(long, env = "SKIFF_HIDDEN_FILES")]
    pub hidden_files: bool,
    /// Follow symlinks that point outside the document root.
    #[arg(long, env = "SKIFF_FOLLOW_SYMLINKS_OUTSIDE_ROOT")]
    pub follow_symlinks_outside_root: bool,
    /// Cache-Control value sent with files and their 304s (none by default).
    #[arg(long, env = "SKIFF_CACHE_CONTROL")]
    pub cache_control: Option<String>,
    /// Compress text files on the fly (br, zstd, gzip), once per file version.
    #[arg(long, env = "SKIFF_COMPRESS")]
    pub compress: bool,
    /// Access log format on stdout.
    #[arg(long, value_enum, default_value = "combined", env = "SKIFF_ACCESS_LOG")]
    pub access_log: LogFormat,
    /// Append the access log to this file instead of stdout.
    #[arg(long, env = "SKIFF_ACCESS_LOG_FILE")]
    pub access_log_file: Option<String>,
    /// Largest request head in bytes (431 beyond).
    #[arg(long, default_value_t = 16 * 1024, env = "SKIFF_MAX_HEADER_BYTES")]
    pub max_header_bytes: usize,
    /// Longest request line in bytes (414 beyond).
    #[arg(long, default_value_t = 8 * 1024, env = "SKIFF_MAX_REQUEST_LINE")]
    pub max_request_line: usize,
    /// Time to receive a request head once it has started (slowloris guard).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, env = "SKIFF_HEADER_TIMEOUT")]
    pub header_timeout: Duration,
    /// Idle keep-alive connections are closed after this long.
    #[arg(long, default_value = "75s", value_parser = humantime::parse_duration, env = "SKIFF_KEEPALIVE_TIMEOUT")]
    pub keepalive_timeout: Duration,
    /// Connections beyond this are held, unserved, until others close.
    #[arg(long, default_value_t = 10_000, env = "SKIFF_MAX_CONNECTIONS")]
    pub max_connections: usize,
    /// A request body silent this long gets 408; also the window --body-min-rate is held over.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration, env = "SKIFF_BODY_TIMEOUT")]
    pub body_timeout: Duration,
    /// Bytes per second each --body-timeout window of a request body must bring (0: no minimum).
    #[arg(long, default_value_t = 500, env = "SKIFF_BODY_MIN_RATE")]
    pub body_min_rate: u64,
    /// A client that takes no response bytes for this long is disconnected.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, env = "SKIFF_SEND_TIMEOUT")]
    pub send_timeout: Duration,
    #[command(flatten)]
    pub tuning: TuningArgs,
}

/// `--tls-min-version`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum TlsMinVersion {
    #[value(name = "1.2")]
    Tls12,
    #[value(name = "1.3")]
    Tls13,
}

/// `--ktls`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum KtlsFlag {
    Auto,
    Off,
}

impl ServeArgs {
    /// The TLS listener the flags ask for, if any.
    fn tls_config(&self) -> Result<Option<skiff_config::TlsConfig>, ConfigError> {
        let Some(listen) = self.tls_listen else {
            if !self.tls_cert.is_empty() || !self.tls_key.is_empty() || self.https_redirect {
                return Err(ConfigError::Flag(
                    "--tls-cert, --tls-key and --https-redirect need --tls-listen".into(),
                ));
            }
            return Ok(None);
        };
        if self.tls_cert.len() != self.tls_key.len() || self.tls_cert.is_empty() {
            return Err(ConfigError::Flag(format!(
                "--tls-listen needs --tls-cert and --tls-key in pairs (got {} certificates and {} keys)",
                self.tls_cert.len(),
                self.tls_key.len()
            )));
        }
        let path = |p: &PathBuf| p.to_string_lossy().into_owned();
        let mut tls = skiff_config::TlsConfig::new(listen.to_string());
        tls.certificates = self
            .tls_cert
            .iter()
            .zip(&self.tls_key)
            .map(|(cert, key)| skiff_config::CertificateFiles {
                cert: path(cert),
                key: path(key),
                ocsp: None,
                optional: false,
            })
            .collect();
        tls.min_version = match self.tls_min_version {
            TlsMinVersion::Tls12 => skiff_config::TlsVersion::Tls12,
            TlsMinVersion::Tls13 => skiff_config::TlsVersion::Tls13,
        };
        tls.ktls = match self.ktls {
            KtlsFlag::Auto => skiff_config::KtlsMode::Auto,
            KtlsFlag::Off => skiff_config::KtlsMode::Off,
        };
        Ok(Some(tls))
    }

    /// The zero-config server as a configuration: one default virtual server.
    pub fn into_config(self) -> Result<(Config, ServeOverrides, TuningArgs), ConfigError> {
        let cache_control = match &self.cache_control {
            Some(v) => Some(HeaderValue::from_str(v).map_err(|_| {
                ConfigError::Flag(format!("--cache-control {v:?} is not a valid header value"))
            })?),
            None => None,
        };
        let tls = self.tls_config()?;
        let listen = match (self.listen, &tls) {
            (Some(addr), _) => addr.to_string(),
            (None, Some(_)) => String::new(),
            (None, None) => "0.0.0.0:8080".into(),
        };
        let cfg = Config {
            listen,
            admin_listen: self.admin_listen.to_string(),
            tls,
            threads: self.threads,
            cache: skiff_config::CacheConfig {
                max_file_size: self.cache_max_file_size,
                max_bytes: self.cache_max_bytes.max(self.cache_max_file_size),
                revalidate: self.cache_revalidate,
            },
            limits: skiff_config::LimitsConfig {
                max_header_bytes: self.max_header_bytes.max(1024),
                max_request_line: self.max_request_line.max(256),
                header_timeout: self.header_timeout,
                keepalive_timeout: self.keepalive_timeout,
                max_connections: self.max_connections.max(1),
                body_timeout: self.body_timeout,
                body_min_rate: self.body_min_rate,
                send_timeout: self.send_timeout,
            },
            access_log: skiff_config::AccessLogConfig {
                format: match self.access_log {
                    LogFormat::Combined => skiff_config::AccessLogFormat::Combined,
                    LogFormat::Json => skiff_config::AccessLogFormat::Json,
                    LogFormat::Off => skiff_config::AccessLogFormat::Off,
                },
                path: self.access_log_file.clone(),
            },
            trusted_proxies: vec![],
            use_forwarded_headers: false,
            dns: Default::default(),
            unknown_host: Default::default(),
            virtual_servers: vec![skiff_config::VirtualServer {
                name: "default".into(),
                hosts: vec![],
                default: true,
                root: self.root.to_string_lossy().into_owned(),
                index: self.index,
                listing: self.listing,
                hidden_files: self.hidden_files,
                follow_symlinks_outside_root: self.follow_symlinks_outside_root,
                error_pages: Default::default(),
                compression: self.compress.then(Default::default),
                bandwidth: None,
                tls: None,
                hsts: None,
                https_redirect: self.https_redirect,
                rules: match (&self.fallback, self.html_extension) {
                    (None, false) => vec![],
                    (fallback, html_extension) => {
                        vec![skiff_config::Rule::new(skiff_config::Action::Static {
                            html_extension,
                            fallback: fallback.clone(),
                        })]
                    }
                },
            }],
            pools: vec![],
        };
        let issues = skiff_config::validate(&cfg);
        if let Some(i) = issues.first() {
            let flag = match i.path.as_str() {
                "virtual_servers[0].rules[0].action.static.fallback" => "--fallback",
                path => path,
            };
            return Err(ConfigError::Flag(format!("{flag}: {}", i.message)));
        }
        Ok((cfg, ServeOverrides { cache_control }, self.tuning))
    }
}

/// The restart-only settings of a validated configuration.
fn settings_for(cfg: &Config, t: &TuningArgs) -> Result<Settings, ConfigError> {
    let addr = |s: &str| {
        s.parse::<SocketAddr>()
            .map_err(|e| ConfigError::Invalid(format!("{s:?}: {e}")))
    };
    Ok(Settings {
        listen: match cfg.listen.as_str() {
            "" => None,
            listen => Some(addr(listen)?),
        },
        tls: match &cfg.tls {
            None => None,
            Some(tls) => {
                let listen = addr(&tls.listen)?;
                Some(crate::settings::TlsSettings {
                    listen,
                    tls13_only: tls.min_version == skiff_config::TlsVersion::Tls13,
                    ktls: tls.ktls == skiff_config::KtlsMode::Auto,
                    handshake_timeout: tls.handshake_timeout,
                })
            }
        },
        admin_listen: Some(addr(&cfg.admin_listen)?),
        threads: cfg
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        cache: CacheSettings {
            max_file_size: cfg.cache.max_file_size,
            max_bytes: cfg.cache.max_bytes,
            revalidate: cfg.cache.revalidate,
            keep_descriptor_from: t.sendfile_min_bytes,
        },
        limits: ConnLimits {
            max_header_bytes: cfg.limits.max_header_bytes,
            max_request_line: cfg.limits.max_request_line,
            header_timeout: cfg.limits.header_timeout,
            keepalive_timeout: cfg.limits.keepalive_timeout,
            max_connections: cfg.limits.max_connections,
            body_timeout: cfg.limits.body_timeout,
            body_min_rate: cfg.limits.body_min_rate,
            send_timeout: cfg.limits.send_timeout,
        },
        access_log: match cfg.access_log.format {
            skiff_config::AccessLogFormat::Combined => LogFormat::Combined,
            skiff_config::AccessLogFormat::Json => LogFormat::Json,
            skiff_config::AccessLogFormat::Off => LogFormat::Off,
        },
        access_log_destination: crate::access_log::Destination::open(
            cfg.access_log.path.as_deref(),
        )
        .map_err(|e| ConfigError::Invalid(format!("access_log.path: {e}")))?,
        sendfile_min_bytes: t.sendfile_min_bytes,
        sendfile_max_bytes: t.sendfile_max_bytes,
        sendfile_chunk_bytes: t.sendfile_chunk_bytes.max(64 * 1024),
        send_buffer_bytes: t.send_buffer_bytes,
        tcp_cork: t.tcp_cork,
        read_chunk_bytes: t.read_chunk_bytes.max(4096),
        shutdown_delay: t.shutdown_delay,
        shutdown_grace: t.shutdown_grace,
        cpu_scheduling: t.cpu_scheduling,
        h2_engine: t.h2_engine,
    })
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    lifecycle::init_logging();
    let result = match cli.command {
        Command::Serve(args) => serve_flags(*args),
        Command::Run(args) => {
            let file = ConfigFile {
                path: args.config.clone(),
            };
            run_file(file, &args.tuning)
        }
        Command::Check(args) => return check(&args.config),
        Command::ConfigSchema => {
            print!("{}", skiff_config::json_schema());
            return 0;
        }
        Command::CopyTree { src, dst } => {
            return match crate::copy_tree::copy_tree(&src, &dst) {
                Ok(c) => {
                    println!(
                        "copied {} files ({} bytes), {} folders, {} symlinks from {} to {}",
                        c.files,
                        c.bytes,
                        c.dirs,
                        c.symlinks,
                        src.display(),
                        dst.display()
                    );
                    0
                }
                Err(e) => {
                    eprintln!("skiff copy-tree: {e}");
                    1
                }
            };
        }
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("skiff: {e}");
            1
        }
    }
}

/// `skiff serve`: the configuration the flags make.
fn serve_flags(args: ServeArgs) -> Result<(), StartError> {
    let (cfg, overrides, tuning) = args.into_config()?;
    let base = std::env::current_dir().map_err(StartError::WorkingDir)?;
    // The command line identifies a zero-config server; rendering the config to YAML
    // only to hash it would pull the YAML serializer into every start.
    let hash = skiff_config::config_hash(&std::env::args().collect::<Vec<_>>().join(" "));
    let settings = settings_for(&cfg, &tuning)?;
    lifecycle::serve(cfg, hash, settings, &base, overrides, None)
}

/// `skiff run`: a configuration file, reloaded when it changes.
fn run_file(file: ConfigFile, tuning: &TuningArgs) -> Result<(), StartError> {
    // The hash of the file's text, so the reloader knows it unchanged.
    let (cfg, hash) = file.read()?;
    crate::reload::log_warnings(&cfg);
    let settings = settings_for(&cfg, tuning)?;
    let base = file.base();
    lifecycle::serve(
        cfg,
        hash,
        settings,
        &base,
        ServeOverrides::default(),
        Some(file),
    )
}

/// `skiff check`: what `run` would do up to serving, without listening.
fn check(path: &std::path::Path) -> i32 {
    let file = ConfigFile {
        path: path.to_owned(),
    };
    let verdict = file.read().and_then(|(cfg, hash)| {
        let cache = Arc::new(FileCache::new(CacheSettings::default()));
        App::build(
            &cfg,
            &file.base(),
            hash.clone(),
            &cache,
            &RootRegistry::default(),
            &ServeOverrides::default(),
            None,
        )
        .and_then(|app| {
            crate::tls::Wanted::from_config(&cfg, &file.base()).check()?;
            Ok(app.warnings)
        })
        .map(|found| (cfg, hash, found))
        .map_err(|message| ConfigError::InvalidFile {
            path: path.to_owned(),
            message,
        })
    });
    match verdict {
        Ok((cfg, hash, found)) => {
            // Read again for the warnings' line numbers; a file that changed in between
            // only loses them.
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for warning in skiff_config::yaml_warnings(&text, &cfg) {
                eprintln!("{}: warning: {warning}", path.display());
            }
            for (at, message) in found {
                eprintln!("{}: warning: {at}: {message}", path.display());
            }
            println!("{}: ok (hash {hash})", path.display());
            0
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}
