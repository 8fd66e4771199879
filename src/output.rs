//! What commands print, and the aligned tables they print it in. A reader that goes away early (`olmv2 crds print |
//! head`, or kubectl failing first) ends the output quietly instead of panicking, as `print!` would; any other write
//! failure is an error.

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

/// Left-aligned columns separated by two spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        format!("  {}\n", padded.join("  ").trim_end())
    };
    out.push_str(&line(headers.to_vec()));
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
