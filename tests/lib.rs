//! Attest's cross-role test suites live in the package's one test binary (`integration.rs`, a module per suite):
//! `attest dev` and the cluster roles driven through the real binary, and in-process stacks (control plane,
//! router, answer tier) for what needs to reach inside. Shared helpers are in `common/`. Nothing here is used
//! outside the tests.
