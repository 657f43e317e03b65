//! The commands of the `sdkbox` binary, one file each.

pub mod compiler;
pub mod docs;
pub mod exec;
pub mod serve;
pub mod worker;
