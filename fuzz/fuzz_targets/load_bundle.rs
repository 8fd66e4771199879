//! Fuzzes bundle loading and conversion: no file content may panic them.
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::load_bundle_input(data));
