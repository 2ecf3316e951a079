//! The snapshot store's integration tests, one binary (a module per file beside this one; `common` their
//! helpers): a local directory and an S3-compatible server.

mod common;
mod dir;
mod s3;
