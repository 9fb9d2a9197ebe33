//! The fields a running server cannot change: a reload that changes one is refused as
//! needing a restart, so the operator rolls its pods when one changes instead.

use crate::Config;

/// The restart-only fields, in the order a change among them is reported.
fn restart_fields(c: &Config) -> [(&'static str, String); 7] {
    let tls_listener = c
        .tls
        .as_ref()
        .map(|t| (t.listen.clone(), t.min_version, t.ktls, t.handshake_timeout));
    [
        ("listen", format!("{:?}", c.listen)),
        (
            "tls (all but its certificates)",
            format!("{tls_listener:?}"),
        ),
        ("admin_listen", format!("{:?}", c.admin_listen)),
        ("threads", format!("{:?}", c.threads)),
        ("cache", format!("{:?}", c.cache)),
        ("limits", format!("{:?}", c.limits)),
        ("access_log", format!("{:?}", c.access_log)),
    ]
}

/// The first restart-only field that differs between two configurations.
pub fn restart_fields_changed(old: &Config, new: &Config) -> Option<&'static str> {
    restart_fields(old)
        .into_iter()
        .zip(restart_fields(new))
        .find(|(a, b)| a.1 != b.1)
        .map(|(a, _)| a.0)
}

/// A hash of the restart-only fields: the operator puts it on the pod template, so a
/// change that a reload cannot apply rolls the pods instead of leaving them on the old
/// values while new pods start with the new.
pub fn restart_fields_hash(c: &Config) -> String {
    let text: String = restart_fields(c)
        .iter()
        .map(|(name, value)| format!("{name}={value}\n"))
        .collect();
    crate::config_hash(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(extra: &str) -> Config {
        crate::parse_yaml(&format!(
            "{extra}virtual_servers:\n  - name: a\n    default: true\n    root: /srv\n"
        ))
        .unwrap()
    }

    #[test]
    fn only_restart_fields_change_the_hash_and_the_first_is_named() {
        let base = parsed("");
        let rules = crate::parse_yaml(
            "virtual_servers:\n  - name: a\n    default: true\n    root: /other\n",
        )
        .unwrap();
        assert_eq!(restart_fields_changed(&base, &rules), None);
        assert_eq!(restart_fields_hash(&base), restart_fields_hash(&rules));
        for (extra, field) in [
            ("cache: { max_bytes: 1000000 }\n", "cache"),
            ("access_log: { format: json }\n", "access_log"),
            ("threads: 3\n", "threads"),
            ("limits: { send_timeout: 5s }\n", "limits"),
        ] {
            let changed = parsed(extra);
            assert_eq!(restart_fields_changed(&base, &changed), Some(field));
            assert_ne!(
                restart_fields_hash(&base),
                restart_fields_hash(&changed),
                "{field}"
            );
        }
    }
}
