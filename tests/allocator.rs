//! The `olmv2` binary allocates with jemalloc, its options built in (`.cargo/config.toml`, measured in
//! `docs/operations.md`): jemalloc, asked to confirm its configuration, names the string it was built with.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design
#![cfg(all(target_os = "linux", not(target_env = "musl")))]

use std::process::Command;

#[test]
fn the_binary_runs_on_jemalloc_with_its_options_built_in() {
    // tikv-jemallocator prefixes jemalloc's symbols, and with them the variable it reads its options from.
    let output = Command::new(env!("CARGO_BIN_EXE_olmv2"))
        .arg("--version")
        .env("_RJEM_MALLOC_CONF", "confirm_conf:true")
        .output();
    let output = output.expect("runs");
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let built_in = stderr
        .lines()
        .find(|line| line.contains("--with-malloc-conf"))
        .unwrap_or_else(|| panic!("jemalloc did not report its configuration; is it the global allocator? {stderr}"));
    for option in ["background_thread:true", "dirty_decay_ms:1000", "muzzy_decay_ms:0", "narenas:1"] {
        assert!(built_in.contains(option), "{option} not built in: {built_in}");
    }
}
