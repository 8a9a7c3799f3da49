//! The C ABI of gil-core. Not written yet: this crate exports nothing until
//! the C ABI issue lands.
