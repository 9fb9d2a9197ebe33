//! The `skiff` binary: everything lives in the library; see `skiff::cli`.

/// mimalloc instead of glibc malloc: per-request buffers are reused from thread-local
/// pages instead of going through glibc's consolidation (see BENCHMARKS.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // First, before any thread starts: it may replace this process (see the module).
    skiff::copy_tuning::reexec_with_vector_copies();
    std::process::exit(skiff::cli::main());
}
