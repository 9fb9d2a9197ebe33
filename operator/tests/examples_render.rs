//! The VirtualServers in examples/virtualservers/ stay valid: each parses as the CRD type,
//! renders into a server config the server's validator accepts without warnings, and
//! yields its children.

use kube::ResourceExt;
use skiff_operator::crd::VirtualServer;
use skiff_operator::Children;

#[test]
fn every_example_renders() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/virtualservers");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut vs: VirtualServer =
            serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        vs.metadata.namespace = Some("examples".into());
        vs.metadata.uid = Some("uid".into());
        let rendered = skiff_operator::server_config(&vs)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!rendered.hash.is_empty());
        // An example is copied: none may order its rules so that one skips another's
        // basic auth, address list or rate limit.
        assert_eq!(
            rendered.warnings,
            Vec::<String>::new(),
            "{}",
            path.display()
        );
        let children = Children::new(&vs, &rendered, None);
        let d = &children.deployment;
        assert_eq!(d.metadata.name.as_deref(), Some(vs.name_any().as_str()));
        assert_eq!(
            children.config_map.data.as_ref().unwrap()["skiff.yaml"],
            rendered.yaml
        );
        seen += 1;
    }
    assert_eq!(
        seen, 7,
        "static, single-page app, thumbnails, PHP, Django, TLS and canary examples"
    );
}
