//! Benchmarks and demos of gil-core. The library part is empty for now: the
//! crate holds the criterion benches (`benches/`) and the `gil-demo` binary.
