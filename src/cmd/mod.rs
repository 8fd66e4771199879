//! The subcommands of the `olmv2` binary, one module each: its options (clap arguments) and the function that runs
//! it. They sit on top of the library and nothing in the library reads them; option groups more than one command
//! takes (registries and the bundle cache) are in `registry`. `main.rs` parses the command line and dispatches here.

pub mod approve;
pub mod bundle;
pub mod crds;
pub mod migrate;
pub mod registry;
pub mod run;
