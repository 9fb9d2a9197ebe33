//! Where basic auth's users come from across reloads: the htpasswd files a config reads
//! (which the reload loop watches), and the users a rule of the previous generation had
//! (kept by a rule whose htpasswd folder this pod does not have).

use super::basic_auth::BasicAuth;
use super::rules::Rule;
use skiff_config::Config;
use std::path::{Path, PathBuf};

/// The htpasswd files a config's rules read.
pub fn htpasswd_files(cfg: &Config, base: &Path) -> Vec<PathBuf> {
    cfg.virtual_servers
        .iter()
        .flat_map(|vs| &vs.rules)
        .filter_map(|r| r.basic_auth.as_ref())
        .map(|b| base.join(&b.htpasswd))
        .collect()
}

/// The users of the first of `rules` with basic auth and this configured match, and the
/// file they came from: what a rule of the next generation keeps when its htpasswd
/// folder is not on this pod.
pub(super) fn users_for<'a>(
    mut rules: impl Iterator<Item = &'a Rule>,
    matches: &skiff_config::Match,
) -> Option<(&'a BasicAuth, &'a Path)> {
    let rule = rules.find(|r| {
        r.auth_origin
            .as_ref()
            .is_some_and(|o| &o.matches == matches)
    })?;
    Some((
        rule.basic_auth.as_ref()?,
        &rule.auth_origin.as_ref()?.source,
    ))
}

/// htpasswd lines left out (refused entries) of the files the rules read, each file
/// counted once however many rules read it.
pub(super) fn left_out<'a>(rules: impl Iterator<Item = &'a Rule>) -> usize {
    let per_file: std::collections::HashMap<&Path, usize> = rules
        .filter_map(|r| {
            Some((
                r.auth_origin.as_ref()?.source.as_path(),
                r.basic_auth.as_ref()?,
            ))
        })
        .map(|(file, auth)| (file, auth.left_out))
        .collect();
    per_file.values().sum()
}
