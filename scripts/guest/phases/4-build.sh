# shellcheck shell=bash
# A phase of scripts/guest/run.sh, which sources the phases in order: the
# settings, helpers and variables used here are run.sh's (not run alone).

# 4. ubio and the contract tests, static. Every test in these binaries runs
# in the guest (a test added to them runs there too, in guest mode).
echo "== guest: building static ubio and contract tests (target/guest)"
export CARGO_TARGET_DIR="$root/target/guest"
export RUSTFLAGS="-C target-feature=+crt-static"
target=x86_64-unknown-linux-gnu
test_args=()
for t in $TESTS; do test_args+=(--test "$t"); done
cargo build -q --release --target "$target" -p ubio-cli --bin ubio
: > "$work/build.log"
if [ -n "$TESTS" ]; then
    cargo test --release --target "$target" -p ubio-tests "${test_args[@]}" --no-run 2> "$work/build.log" ||
        { cat "$work/build.log" >&2; exit 1; }
fi
r="$work/bins"
mkdir -p "$r/usr/bin" "$r/tests" "$r/cli-tests" "$r/usr/share/ubio"
strip -o "$r/usr/bin/ubio" "$CARGO_TARGET_DIR/$target/release/ubio"
if [ -n "$CLI_TESTS" ] && [ -n "$POLICY_KERNELS" ]; then
    cli_args=()
    for t in $CLI_TESTS; do cli_args+=(--test "$t"); done
    cargo test --release --target "$target" -p ubio-cli "${cli_args[@]}" --no-run 2> "$work/build-cli.log" ||
        { cat "$work/build-cli.log" >&2; exit 1; }
    for t in $CLI_TESTS; do
        exe=$(sed -n "s|.*Executable tests/$t.rs (\(.*\))|\1|p" "$work/build-cli.log" | tail -1)
        [ -n "$exe" ] || { echo "guest: no executable for $t in cargo's output" >&2; cat "$work/build-cli.log" >&2; exit 1; }
        strip -o "$r/cli-tests/$t" "$exe"
    done
    # The static Go copier the tests run (they build it where Go is).
    CGO_ENABLED=0 go build -o "$r/usr/bin/gocopy" crates/ubio-cli/tests/run_programs/gocopy.go
    # Where the tests look for `ubio` and their scratch directories (paths
    # cargo compiled in: the host's checkout): /init links them to the
    # scratch filesystem.
    # (The crate's directory too: a path through its `..` must resolve;
    # and the files of the checkout the tests read: the systemd unit.)
    printf 'UBIO_HOST_TARGET=%s\nUBIO_BIN_DIR=%s\n' "$root/target" "$CARGO_TARGET_DIR/$target/release" \
        > "$r/usr/share/ubio/guest.env"
    mkdir -p "$r$root/crates/ubio-cli" "$r$root/dist"
    cp -r dist/systemd "$r$root/dist/"
fi
if [ -n "$PYTHON_SCRIPT" ]; then
    read -r script script_args <<< "$PYTHON_SCRIPT"
    cp "$script" "$r/usr/share/ubio/script.py"
    echo "$script_args" > "$r/usr/share/ubio/script.args"
    echo "== guest: and python3 $script $script_args"
fi
if [ -n "$MATRIX" ]; then
    cargo build -q --release --target "$target" -p ubio-bench --bin ubio-bench
    strip -o "$r/usr/bin/ubio-bench" "$CARGO_TARGET_DIR/$target/release/ubio-bench"
    echo "$MATRIX" > "$r/usr/share/ubio/matrix.args"
    cp scripts/guest/matrix.sh "$r/usr/share/ubio/matrix.sh"
    echo "== guest: and ubio-bench matrix $MATRIX"
fi
if [ -n "$POWERCUT$DISKFAULT" ]; then
    cargo build -q --release --target "$target" -p ubio-fsx --bin ubio-powercut --bin ubio-diskfault
    strip -o "$r/usr/bin/ubio-powercut" "$CARGO_TARGET_DIR/$target/release/ubio-powercut"
    strip -o "$r/usr/bin/ubio-diskfault" "$CARGO_TARGET_DIR/$target/release/ubio-diskfault"
    # `ubio run`'s shim, beside ubio (where it looks first after
    # UBIO_PRELOAD): a cdylib, so built without crt-static, against the
    # host's glibc that the image carries, in a target directory of its own:
    # the host's build and tests hold the main one while this runs beside
    # them (scripts/test.sh), and target/guest's flags differ.
    env -u RUSTFLAGS CARGO_TARGET_DIR="$root/target/guest-shim" cargo build -q --release -p ubio-preload
    add_program "$r" "$root/target/guest-shim/release/libubio_preload.so" /usr/bin
    strip "$r/usr/bin/libubio_preload.so"
fi
if [ -n "$TAILDETECT" ]; then
    cargo build -q --release --target "$target" -p ubio-fsx --bin ubio-taildetect
    strip -o "$r/usr/bin/ubio-taildetect" "$CARGO_TARGET_DIR/$target/release/ubio-taildetect"
fi
for t in $TESTS; do
    exe=$(sed -n "s|.*Executable tests/$t.rs (\(.*\))|\1|p" "$work/build.log" | tail -1)
    [ -n "$exe" ] || { echo "guest: no executable for $t in cargo's output" >&2; cat "$work/build.log" >&2; exit 1; }
    strip -o "$r/tests/$t" "$exe"
done
(cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$work/bins.cpio"
for k in $KERNELS; do
    cat "$work/base.cpio" "$work/modules-$k.cpio" "$work/bins.cpio" > "$work/initramfs-$k.cpio"
done
phase build
if [ -n "$BUILD_ONLY" ]; then
    echo "== guest: built, not booted (UBIO_GUEST_BUILD_ONLY); timings: ${timings[*]}"
    exit 0
fi
