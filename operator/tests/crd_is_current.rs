//! crds/virtualserver.yaml is generated from the Rust types and never edited by hand: this
//! fails when the committed copy differs from what crdgen prints. Regenerate with
//! `SKIFF_BLESS=1 cargo test -p skiff-operator --test crd_is_current`, which writes both
//! crds/virtualserver.yaml and the chart's copy.

#[test]
fn committed_crd_matches_the_rust_types() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let generated = skiff_operator::crd_yaml();
    // The chart carries the same file (helm cannot read outside the chart).
    for copy in [
        "crds/virtualserver.yaml",
        "charts/skiff/files/virtualserver.yaml",
    ] {
        let path = root.join(copy);
        if std::env::var("SKIFF_BLESS").as_deref() == Ok("1") {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{copy} is stale; run: SKIFF_BLESS=1 cargo test -p skiff-operator --test crd_is_current"
        );
    }
}

#[test]
fn crd_names_and_subresources() {
    let yaml = skiff_operator::crd_yaml();
    for needle in [
        "name: virtualservers.skiff.dev",
        "- skiffvs",
        "status: {}",
        "specReplicasPath: .spec.replicas",
        "labelSelectorPath: .status.selector",
        "x-kubernetes-validations",
    ] {
        assert!(yaml.contains(needle), "the CRD lacks {needle:?}");
    }
}
