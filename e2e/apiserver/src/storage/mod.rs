//! Storage with kube-apiserver's semantics at that layer (`store`: one resourceVersion sequence, conflicts on stale
//! writes, lists in pages, watches replayed from a history) and the label and field selectors lists and watches
//! filter by (`selectors`).
//!
//! The ground floor: imports nothing of the emulator.

pub mod selectors;
pub mod store;
