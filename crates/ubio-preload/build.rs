//! Where this build's shim will be: cargo writes the cdylib of a workspace
//! member to <target>/<profile>/deps/libubio_preload.so (no hash in the
//! name), and OUT_DIR is <target>/<profile>/build/ubio-preload-HASH/out.
//! ubio-cli reads it as DEP_UBIO_PRELOAD_SO and embeds that file (see its
//! build.rs), which exists by then: a binary is compiled only once its
//! dependencies are built in full.

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let profile_dir = out
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is <profile>/build/<pkg>/out");
    println!(
        "cargo:so={}",
        profile_dir
            .join("deps")
            .join("libubio_preload.so")
            .display()
    );
}
