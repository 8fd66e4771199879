//! How objects merge: the shape of their lists and maps (`shape`), sets of field paths (`fieldset`), field
//! ownership and server-side apply (`managed`), and the three patch types (`patch`). Pure functions over JSON.
//!
//! Imports nothing of the emulator.

pub mod fieldset;
pub mod managed;
pub mod patch;
pub mod shape;
