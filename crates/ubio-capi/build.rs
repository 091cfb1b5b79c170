// The shared library is installed as libubio.so.0 (Makefile): give it that
// soname, so programs linked with -lubio look for libubio.so.0 at run time.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libubio.so.0");
}
