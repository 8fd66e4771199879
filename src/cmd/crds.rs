//! The `crds` subcommands: print the CustomResourceDefinitions the API types generate, write them to `crds/`, or
//! check that the committed ones are up to date. The generation itself is `crdgen`'s.

use std::path::PathBuf;

use clap::Subcommand;

use crate::crdgen;
use crate::error::Error;
use crate::output;

#[derive(Debug, Subcommand)]
pub enum CrdsCommand {
    /// Print every CRD as one YAML stream, for `kubectl apply --server-side -f -`.
    Print,
    /// Write every CRD to its file in DIR, removing files no type generates.
    Write {
        #[arg(long, default_value = crdgen::CRD_DIR)]
        dir: PathBuf,
    },
    /// Fail when the CRDs in DIR differ from what the types generate.
    Check {
        #[arg(long, default_value = crdgen::CRD_DIR)]
        dir: PathBuf,
    },
}

pub fn run(command: CrdsCommand) -> Result<(), Error> {
    match command {
        CrdsCommand::Print => output::write(&crdgen::all_as_yaml_stream()?),
        CrdsCommand::Write { dir } => {
            for path in crdgen::write_all(&dir)? {
                output::write(&format!("wrote {}\n", path.display()))?;
            }
            Ok(())
        }
        CrdsCommand::Check { dir } => {
            let staleness = crdgen::check(&dir)?;
            if staleness.is_fresh() {
                output::write(&format!("the CRDs in {} are up to date\n", dir.display()))
            } else {
                Err(Error::StaleCrds {
                    dir: dir.display().to_string(),
                    outdated: staleness.outdated,
                    unexpected: staleness.unexpected,
                })
            }
        }
    }
}
