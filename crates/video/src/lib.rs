//! The Vidboard network camera and its receiver (work in progress).
#![forbid(unsafe_code)]

pub mod command;
pub mod frame;
pub mod source;
pub mod val;
pub mod vidboard;
pub mod client;
