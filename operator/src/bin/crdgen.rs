//! Prints the VirtualServer CRD as YAML; `crdgen > crds/virtualserver.yaml` regenerates the
//! committed copy, which CI compares against.
fn main() {
    print!("{}", skiff_operator::crd_yaml());
}
