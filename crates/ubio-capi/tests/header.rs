//! include/ubio.h is generated from src/lib.rs by cbindgen: regenerate it and
//! compare with the checked-in copy (`UBIO_BLESS=1` rewrites the copy).

use std::path::Path;

#[test]
fn header_matches_the_rust_source() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).unwrap();
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen failed on src/lib.rs")
        .write(&mut generated);
    let generated = String::from_utf8(generated).unwrap();
    let header = crate_dir.join("include/ubio.h");
    if std::env::var_os("UBIO_BLESS").is_some() {
        std::fs::write(&header, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&header).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is not what cbindgen makes of src/lib.rs: run \
         UBIO_BLESS=1 cargo test -p ubio-capi --test header, and review the diff",
        header.display()
    );
}
