//! glibc's large copies on AMD CPUs: before anything else runs, `skiff` executes itself
//! again once with glibc told to copy with vector loops instead of `rep movsb`.
//!
//! glibc 2.36 (Debian 12, the images' base) copies blocks over a few KiB with `rep movsb`,
//! which AMD Zen CPUs run at about a tenth of their speed when the destination sits a few
//! bytes after the source modulo 4 KiB. rustls copies every record's plaintext to just
//! after a 5-byte header, so HTTPS bodies hit that case: 64 MiB over TLS cost 57 ms of CPU
//! instead of 32 (BENCHMARKS.md, "HTTPS on the fast path"). The tunable is read only at
//! process start, hence the exec; a `GLIBC_TUNABLES` that already sets it is kept as is.

/// The tunable, and a threshold no single copy reaches (glibc still switches to
/// non-temporal stores for copies larger than its cache-based threshold).
pub const TUNABLE: &str = "glibc.cpu.x86_rep_movsb_threshold";
const NEVER: &str = "1073741824";
/// Set on the exec, so there is never a second one: glibc drops the tunable from the
/// environment of a binary run with file capabilities or setuid (AT_SECURE), and
/// checking for the tunable alone would then execute again for ever.
const DONE: &str = "SKIFF_COPY_TUNING_DONE";

/// Executes the binary again with the tunable set, on AMD x86-64 with glibc, unless the
/// environment already sets it. Returns (doing nothing) where that does not apply or the
/// exec fails: copies are then only slower.
pub fn reexec_with_vector_copies() {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    {
        use std::os::unix::process::CommandExt;
        if std::env::var_os(DONE).is_some() {
            return;
        }
        let Ok(current) = std::env::var("GLIBC_TUNABLES").or_else(|e| match e {
            std::env::VarError::NotPresent => Ok(String::new()),
            e => Err(e),
        }) else {
            return;
        };
        if current.contains(TUNABLE) || !is_amd() {
            return;
        }
        let tunables = if current.is_empty() {
            format!("{TUNABLE}={NEVER}")
        } else {
            format!("{current}:{TUNABLE}={NEVER}")
        };
        let mut args = std::env::args_os();
        let argv0 = args.next().unwrap_or_else(|| "skiff".into());
        let err = std::process::Command::new("/proc/self/exe")
            .arg0(argv0)
            .args(args)
            .env("GLIBC_TUNABLES", tunables)
            .env(DONE, "1")
            .exec();
        eprintln!("skiff: could not re-execute with vector copies ({err}); going on without");
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn is_amd() -> bool {
    // Leaf 0: the vendor's 12 ASCII bytes, in EBX, EDX, ECX.
    let id = std::arch::x86_64::__cpuid(0);
    let mut vendor = [0u8; 12];
    vendor[..4].copy_from_slice(&id.ebx.to_le_bytes());
    vendor[4..8].copy_from_slice(&id.edx.to_le_bytes());
    vendor[8..].copy_from_slice(&id.ecx.to_le_bytes());
    &vendor == b"AuthenticAMD" || &vendor == b"HygonGenuine"
}

#[cfg(test)]
mod tests {
    /// The vendor string is read in CPUID's register order (EBX, EDX, ECX): whatever the
    /// CPU, it is one of the known vendors' 12 ASCII bytes, never garbage.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    fn the_vendor_matches_proc_cpuinfo() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        let listed = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("vendor_id"))
            .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
            .unwrap();
        assert_eq!(
            super::is_amd(),
            listed == "AuthenticAMD" || listed == "HygonGenuine"
        );
    }
}
