//! Rule shadowing. The first rule that matches a request answers it, so a rule that carries
//! basic auth, an address list or a rate limit protects nothing for the requests an earlier
//! rule without them takes first: `extensions: [php]` above `prefix: /admin/` serves
//! `/admin/x.php` with neither. This finds, for each such protected rule, the earlier rules
//! that can take one of its requests, with a sample request ([`paths`] decides the overlap).
//! They are warnings, not errors: the order may be what was meant.

mod paths;

#[cfg(test)]
mod tests;

use crate::model::{Action, Config, Rule};
use crate::validate::Issue;
use paths::{Overlap, Prepared};

/// An earlier rule that takes requests a later, protected rule would match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowing {
    /// Index of the earlier rule, which answers first.
    pub earlier: usize,
    /// Index of the later rule, whose modifiers those requests skip.
    pub later: usize,
    /// A request both rules match (`/admin/x.php`, `POST /api/`), or `None` when a regex
    /// may match one but neither a sample nor a proof that none exists was found.
    pub sample: Option<String>,
    /// The warning, naming both rules and what the later one requires.
    pub message: String,
}

/// The shadowing among one virtual server's rules, by later rule, then earlier rule.
pub fn shadowed_rules(rules: &[Rule]) -> Vec<Shadowing> {
    let guarded = |r: &Rule| r.basic_auth.is_some() || r.access.is_some() || r.rate_limit.is_some();
    if !rules.iter().any(guarded) {
        return Vec::new();
    }
    let prepared: Vec<Prepared<'_>> = rules.iter().map(|r| Prepared::new(&r.matches)).collect();
    let mut found = Vec::new();
    for (later, protected) in rules.iter().enumerate() {
        for (earlier, first) in rules[..later].iter().enumerate() {
            // Such a rule exposes nothing the later rule guards.
            if reaches_nothing(&first.action) {
                continue;
            }
            let missing = missing_modifiers(first, protected);
            if missing.is_empty() {
                continue;
            }
            let sample = match paths::overlap(&prepared[earlier], &prepared[later]) {
                Overlap::Disjoint => continue,
                Overlap::Sample(s) => Some(s),
                Overlap::Maybe => None,
            };
            let message = message(
                (earlier, first),
                (later, protected),
                sample.as_deref(),
                &missing,
            );
            found.push(Shadowing {
                earlier,
                later,
                sample,
                message,
            });
        }
    }
    found
}

/// A redirect, fixed answer or refusal (or a split whose drawn targets are all such)
/// reaches neither the files nor a pool.
fn reaches_nothing(action: &Action) -> bool {
    match action {
        Action::Redirect { .. } | Action::Return { .. } | Action::Deny { .. } => true,
        Action::Split(targets) => targets
            .iter()
            .all(|t| t.weight == 0 || reaches_nothing(&t.action)),
        _ => false,
    }
}

/// Every shadowing in a configuration, as warnings at the protected rule's path.
pub fn warnings(cfg: &Config) -> Vec<Issue> {
    let mut issues = Vec::new();
    for (v, vs) in cfg.virtual_servers.iter().enumerate() {
        for s in shadowed_rules(&vs.rules) {
            issues.push(Issue {
                path: format!("virtual_servers[{v}].rules[{}]", s.later),
                message: s.message,
            });
        }
    }
    issues
}

/// What `protected` requires that `first` does not apply at least as strictly.
fn missing_modifiers(first: &Rule, protected: &Rule) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if let Some(auth) = &protected.basic_auth {
        // The same htpasswd file admits the same users; the realm is only a label.
        if first.basic_auth.as_ref().map(|a| &a.htpasswd) != Some(&auth.htpasswd) {
            missing.push("basic auth");
        }
    }
    if let Some(access) = &protected.access {
        let (allow, deny) = first
            .access
            .as_ref()
            .map_or((&[][..], &[][..]), |a| (&a.allow[..], &a.deny[..]));
        if !allow_at_least_as_strict(allow, &access.allow) {
            missing.push("an address allow list");
        }
        // Every network the later rule refuses, the earlier one refuses too.
        if !access.deny.iter().all(|d| within_any(d, deny)) {
            missing.push("an address deny list");
        }
    }
    if let Some(limit) = &protected.rate_limit {
        let as_strict = first.rate_limit.as_ref().is_some_and(|r| {
            r.requests_per_second <= limit.requests_per_second && r.burst <= limit.burst
        });
        if !as_strict {
            missing.push("a rate limit");
        }
    }
    missing
}

/// Whether an earlier allow list admits only clients the later one admits.
fn allow_at_least_as_strict(earlier: &[String], later: &[String]) -> bool {
    later.is_empty() || (!earlier.is_empty() && earlier.iter().all(|e| within_any(e, later)))
}

/// Whether the network `cidr` lies inside one of `nets` (unparsable ones never do).
fn within_any(cidr: &str, nets: &[String]) -> bool {
    let Ok(inner) = crate::parse_cidr(cidr) else {
        return false;
    };
    nets.iter()
        .filter_map(|n| crate::parse_cidr(n).ok())
        .any(|outer| outer.contains(&inner))
}

/// `rule "php" (index 0)` and `"php"`, or `rule 0` twice for a rule without a name.
fn labels(index: usize, rule: &Rule) -> (String, String) {
    match &rule.name {
        Some(name) => (
            format!("rule {name:?} (index {index})"),
            format!("{name:?}"),
        ),
        None => (format!("rule {index}"), format!("rule {index}")),
    }
}

fn message(
    (earlier, first): (usize, &Rule),
    (later, protected): (usize, &Rule),
    sample: Option<&str>,
    missing: &[&str],
) -> String {
    let (first_full, first_short) = labels(earlier, first);
    let (protected_full, protected_short) = labels(later, protected);
    let needs = match missing {
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
        [] => String::new(),
    };
    let fix = format!(
        "move {protected_short} above {first_short} or give {first_short} the same modifiers"
    );
    match sample {
        Some(sample) => format!(
            "{first_full} matches {sample} before {protected_full}, which requires {needs}; {fix}"
        ),
        None => format!(
            "{first_full} may shadow {protected_full}, which requires {needs}: a regular \
             expression may match the same requests (no sample was found, and regular \
             expressions cannot always be compared); {fix}"
        ),
    }
}
