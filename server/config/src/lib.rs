//! Skiff's configuration: the typed model (serde + schemars), YAML parsing with errors that
//! point to a line and column, and the semantic validation that both the server and the
//! operator run, so the operator refuses exactly what the server would.

mod hosts;
mod locate;
pub mod model;
mod restart;
mod shadow;
mod template;
mod validate;

pub use hosts::HostPattern;
pub use model::*;
pub use restart::{restart_fields_changed, restart_fields_hash};
pub use shadow::{shadowed_rules, warnings, Shadowing};
pub use template::{Piece, Template};
pub use validate::{validate, Issue};

/// The upper bounds (seconds) of skiff's request-duration histogram
/// (`skiff_http_request_duration_seconds`, and `skiff_upstream_duration_seconds`): round
/// numbers, so a VirtualServer's SLO latency threshold (`spec.slo.latency.thresholdSeconds`,
/// which the operator checks against this list) is one of them and a rule can count the
/// requests under it from one bucket.
pub const DURATION_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not YAML, or not the shape of a config; the message has the line, column and a snippet.
    #[error("{0}")]
    Syntax(String),
    /// Well-formed but wrong; one line per problem.
    #[error("{}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

/// A semantic problem with its location in the file, when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, "line {l} column {c}: ")?;
        }
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Parses and validates a YAML configuration.
pub fn parse_yaml(text: &str) -> Result<Config, ConfigError> {
    let cfg: Config =
        serde_saphyr::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
    let issues = validate(&cfg);
    if issues.is_empty() {
        return Ok(cfg);
    }
    Err(ConfigError::Invalid(located(text, issues)))
}

/// The [`warnings`] about a configuration parsed from `text`, located in it.
pub fn yaml_warnings(text: &str, cfg: &Config) -> Vec<Problem> {
    located(text, warnings(cfg))
}

/// Issues with the line and column of their path in `text`, in document order.
fn located(text: &str, issues: Vec<Issue>) -> Vec<Problem> {
    let mut problems: Vec<Problem> = issues
        .into_iter()
        .map(|i| {
            let at = locate::locate(text, &i.path);
            Problem {
                line: at.map(|a| a.0),
                column: at.map(|a| a.1),
                path: i.path,
                message: i.message,
            }
        })
        .collect();
    // Document order; problems without a location last.
    problems.sort_by_key(|p| (p.line.unwrap_or(usize::MAX), p.column.unwrap_or(usize::MAX)));
    problems
}

/// Renders a configuration as YAML (what the operator writes into a ConfigMap).
pub fn to_yaml(cfg: &Config) -> String {
    serde_saphyr::to_string(cfg).expect("the config model always serializes")
}

/// The JSON Schema of the configuration, as committed in `config.schema.json`.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Config);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    text.push('\n');
    text
}

/// A stable identifier of a configuration text (FNV-1a, 64 bits, as 16 hex digits), exported
/// by servers as `skiff_config_info{hash}` and computed the same way by the operator.
pub fn config_hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Parses a CIDR (`10.0.0.0/8`) or a single address (`192.0.2.7`, taken as /32 or /128).
pub fn parse_cidr(text: &str) -> Result<ipnet::IpNet, String> {
    if let Ok(net) = text.parse::<ipnet::IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<std::net::IpAddr>()
        .map(ipnet::IpNet::from)
        .map_err(|_| format!("{text:?} is not a CIDR such as 10.0.0.0/8 or an IP address"))
}

#[cfg(test)]
mod action_tests;
#[cfg(test)]
mod tests;
