//! Gives libgil.so a soname carrying the ABI's major version, so programs
//! linked against it keep working across compatible updates.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgil.so.0");
    }
}
