//! Where `ubio run` finds its LD_PRELOAD shim when none is installed where it
//! looks first (see src/shim.rs):
//!
//! - UBIO_SHIM_DIR set at build time (the packages: /usr/lib/<triplet>/ubio):
//!   that directory is compiled in and the binary carries no copy;
//! - otherwise the binary carries the shim built with it (ubio-preload is a
//!   dependency; its build script says where cargo puts the .so), so that a
//!   lone `cargo build -p ubio-cli` or `cargo install --path crates/ubio-cli`
//!   gives a `ubio run` that works;
//! - a static build (crt-static, as scripts/guest/run.sh makes for its
//!   guests) has no shim to carry: rustc makes no cdylib then.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ubio_carries_shim)");
    println!("cargo:rerun-if-env-changed=UBIO_SHIM_DIR");
    let crt_static = std::env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|f| f.split(',').any(|feature| feature == "crt-static"));
    match std::env::var("UBIO_SHIM_DIR") {
        Ok(dir) if !dir.is_empty() => println!("cargo:rustc-env=UBIO_SHIM_DIR={dir}"),
        _ if crt_static => {}
        _ => {
            let so = std::env::var("DEP_UBIO_PRELOAD_SO")
                .expect("ubio-preload's build script names its .so");
            println!("cargo:rustc-env=UBIO_CARRIED_SHIM={so}");
            println!("cargo:rustc-cfg=ubio_carries_shim");
        }
    }
}
