//! crds/virtualserver.yaml is generated from the Rust types and never edited by hand: this
//! fails when the committed copy differs from what crdgen prints. Regenerate with
//! `cargo run -p skiff-operator --bin crdgen > crds/virtualserver.yaml`
//! (or `SKIFF_BLESS=1 cargo test -p skiff-operator --test crd_is_current`).

#[test]
fn committed_crd_matches_the_rust_types() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds/virtualserver.yaml");
    let generated = skiff_operator::crd_yaml();
    if std::env::var("SKIFF_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "crds/virtualserver.yaml is stale; run: cargo run -p skiff-operator --bin crdgen > crds/virtualserver.yaml"
    );
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
