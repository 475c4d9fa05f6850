//! Links the `concord` binary as a position-dependent executable on Linux (glibc).
//!
//! Each command is a short-lived process, so start-up is part of every command's cost.
//! As a position-independent executable, the dynamic loader applied ~246,000
//! relocations at every start, copying ~950 pages on write: 6 ms of CPU before
//! `main`, half of a cold 100-row append's CPU. Position-dependent, the linker resolves
//! them once and pages are mapped only when touched. The cost: the binary's own
//! code and data load at a fixed address (its libraries, heap and stack are still
//! randomised). The library and the Python module are unaffected.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
