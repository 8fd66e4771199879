//! Fuzzes layer unpacking: no input may panic or write outside the target directory.
#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::unpack_layer_input(data));
