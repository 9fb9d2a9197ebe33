//! The project's task runner (`cargo xtask <target>`).

fn main() {
    eprintln!("xtask: no targets yet");
    std::process::exit(2);
}
