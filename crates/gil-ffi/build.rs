//! Gives libgil.so a soname carrying its ABI version, as cargo-c does: the
//! major and minor version while the major is 0 (a 0.x minor release may
//! break the ABI, as semver allows), the major alone from 1.0. So
//! `libgil.so.0.1` now: programs linked against it keep working across
//! compatible updates, and a breaking 0.2 gets a new soname. On Apple
//! systems the same version goes into the install name
//! (`@rpath/libgil.0.1.dylib`); Windows' `gil.dll` carries none (its
//! import library names the DLL).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let vendor = std::env::var("CARGO_CFG_TARGET_VENDOR").unwrap_or_default();
    let elf = matches!(
        os.as_str(),
        "linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly"
    );
    if elf || vendor == "apple" {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
        let minor = std::env::var("CARGO_PKG_VERSION_MINOR").expect("cargo sets CARGO_PKG_VERSION_MINOR");
        let abi = if major == "0" {
            format!("{major}.{minor}")
        } else {
            major
        };
        if elf {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgil.so.{abi}");
        } else {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libgil.{abi}.dylib");
        }
    }
}
