//! What a configuration loads with but its operator should be told: fallbacks that
//! serve no file.

use super::rules::{Action, Rule};
use crate::static_files::{Misses, StaticFiles};

/// Each `static` fallback (also a split target's) that serves no file now, so a typo
/// shows at load rather than as every client-side route's 404. Not an error: a root a
/// sidecar fills after start may hold it by the first request.
pub(super) fn fallbacks_serving_no_file(
    statics: &StaticFiles,
    rules: &[Rule],
    vhost: usize,
) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut check = |at: String, misses: &Misses| {
        if let Some(shell) = &misses.fallback {
            if let Some(why) = statics.serves_no_file(shell) {
                found.push((
                    format!("{at}.static.fallback"),
                    format!("{:?} {why}", shell.as_str()),
                ));
            }
        }
    };
    for (j, rule) in rules.iter().enumerate() {
        let at = format!("virtual_servers[{vhost}].rules[{j}].action");
        match &rule.action {
            Action::Static { misses: Some(m) } => check(at, m),
            Action::Split(split) => {
                for (i, (_, action)) in split.targets().enumerate() {
                    if let Action::Static { misses: Some(m) } = action {
                        check(format!("{at}.split[{i}].action"), m);
                    }
                }
            }
            _ => {}
        }
    }
    found
}
