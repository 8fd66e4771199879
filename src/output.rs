//! What commands print. A reader that goes away early (`olmv2 crds print | head`, or kubectl failing first) ends
//! the output quietly instead of panicking, as `print!` would; any other write failure is an error.

use std::io::{ErrorKind, Write};

use crate::error::Error;

/// Writes `text` to standard output.
pub fn write(text: &str) -> Result<(), Error> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(error) if error.kind() != ErrorKind::BrokenPipe => Err(Error::WriteOutput(error)),
        _ => Ok(()),
    }
}
