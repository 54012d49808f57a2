//! What std's prelude would bring and the library uses, from `alloc`
//! (the crate is `no_std` in the builds users link; see platform.rs).

pub use alloc::boxed::Box;
pub use alloc::format;
pub use alloc::string::{String, ToString};
pub use alloc::vec;
pub use alloc::vec::Vec;
