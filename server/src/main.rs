//! The `skiff` binary: everything lives in the library; see `skiff::cli`.
fn main() {
    std::process::exit(skiff::cli::main());
}
