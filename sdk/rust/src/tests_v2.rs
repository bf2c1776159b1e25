//! ABI v2 tests.
