//! Link the `agentsite` binary with packed relative relocations (DT_RELR).
//!
//! A position-independent executable carries one 24-byte `.rela.dyn`
//! entry per pointer the loader must adjust at start: about 120,000 of
//! them here (2.9 MB), all read at every start and then kept in the
//! server's resident set. RELR packs runs of adjacent pointers into
//! bitmaps, a few KB in all. The binary stays position-independent (the
//! address randomisation is unchanged); BENCHMARKS.md ("Issue 65: what the
//! resident set is") has the figures.
//!
//! rust-lld (Rust's default linker on x86_64 Linux) has the option since
//! LLVM 15, GNU ld since 2.38 (older ones warn and ignore it). The binary
//! then needs glibc 2.36 or later to start, as the machine that links it
//! has; the container image carries that machine's C library.

fn main() {
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os == "linux" && target_env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
