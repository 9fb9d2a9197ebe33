//! Which namespaces the operator reconciles VirtualServers in: all of them (a ClusterRole),
//! or a list (Roles in each, as NGINX Ingress's `-watch-namespace`), one controller each.

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client, Resource};

/// What one controller watches: every namespace, or one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    Cluster,
    Namespace(String),
}

impl Scope {
    /// The scopes for `--watch-namespaces`: the cluster when the list is empty, else one
    /// per namespace named (blanks and repeats dropped). A name that is no namespace name
    /// (a DNS-1123 label) is refused, rather than watched and never matched.
    pub fn from_list(names: &[String]) -> Result<Vec<Scope>, String> {
        let mut scopes = Vec::new();
        for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            if !is_dns1123_label(name) {
                return Err(format!(
                    "--watch-namespaces: {name:?} is not a namespace name (lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit)"
                ));
            }
            let scope = Scope::Namespace(name.to_owned());
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        if scopes.is_empty() {
            scopes.push(Scope::Cluster);
        }
        Ok(scopes)
    }

    /// The API of a namespaced kind within this scope.
    pub fn api<K>(&self, client: Client) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        match self {
            Scope::Cluster => Api::all(client),
            Scope::Namespace(ns) => Api::namespaced(client, ns),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Cluster => f.write_str("all namespaces"),
            Scope::Namespace(ns) => write!(f, "namespace {ns}"),
        }
    }
}

fn is_dns1123_label(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && alnum(bytes[0])
        && alnum(bytes[bytes.len() - 1])
        && bytes.iter().all(|&b| alnum(b) || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Result<Vec<Scope>, String> {
        Scope::from_list(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn no_namespaces_is_the_cluster_and_a_list_is_one_scope_each() {
        assert_eq!(list(&[]).unwrap(), vec![Scope::Cluster]);
        assert_eq!(list(&[" ", ""]).unwrap(), vec![Scope::Cluster]);
        assert_eq!(
            list(&["shop", " blog ", "shop"]).unwrap(),
            vec![
                Scope::Namespace("shop".into()),
                Scope::Namespace("blog".into())
            ]
        );
    }

    #[test]
    fn a_name_that_is_no_namespace_is_refused_by_name() {
        for bad in [
            "Shop",
            "-shop",
            "shop-",
            "sh_op",
            "shop.example",
            &"a".repeat(64),
        ] {
            let err = list(&["ok", bad]).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        assert!(list(&[&"a".repeat(63)]).is_ok());
    }
}
