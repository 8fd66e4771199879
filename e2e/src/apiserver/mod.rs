//! The Kubernetes API emulator: storage semantics (`store`) and request syntax (`selectors`). The HTTP layer, built
//! on these, is what tests and kubectl talk to.

pub mod resources;
pub mod selectors;
pub mod store;
