#!/usr/bin/env bash
# Install ubio: the `ubio` binary, the LD_PRELOAD shim behind `ubio run`, man
# pages (ubio(1), ubio-cp(1), ...) and bash, zsh and fish completions. The man
# pages and completions are generated from the command's own definitions
# (`ubio __generate-docs`), so they match `ubio --help`.
#
#   scripts/install.sh                          # build, then install into /usr/local
#   PREFIX=$HOME/.local scripts/install.sh      # or --prefix=DIR
#   DESTDIR=/tmp/stage PREFIX=/usr scripts/install.sh   # staged, for packaging
#   scripts/install.sh --no-build               # install what target/release holds
#   UBIO_BIN_DIR=DIR scripts/install.sh --no-build      # ... or what DIR holds
#
# Layout under DESTDIR/PREFIX:
#   bin/ubio
#   lib/libubio_preload.so                      (`ubio run` looks in ../lib)
#   share/man/man1/ubio*.1
#   share/bash-completion/completions/ubio
#   share/zsh/site-functions/_ubio
#   share/fish/vendor_completions.d/ubio.fish
#   lib/systemd/system/ubio-policy.service      (the policy daemon's unit, from dist/systemd/)
#   share/doc/ubio/policy.toml.example          (copy it to /etc/ubio/policy.toml)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
build=1
for arg in "$@"; do
    case $arg in
        --no-build) build=0 ;;
        --prefix=*) PREFIX=${arg#--prefix=} ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "install.sh: unknown argument '$arg' (see --help)" >&2
            exit 1
            ;;
    esac
done
case $PREFIX in
    /*) ;;
    *)
        echo "install.sh: PREFIX must be an absolute path, not '$PREFIX'" >&2
        exit 1
        ;;
esac

bin_dir=${UBIO_BIN_DIR:-$repo/target/release}
if [ "$build" = 1 ]; then
    cargo build --release --manifest-path "$repo/Cargo.toml" -p ubio-cli -p ubio-preload
fi
for f in ubio libubio_preload.so; do
    if [ ! -f "$bin_dir/$f" ]; then
        echo "install.sh: $bin_dir/$f not found (build with: cargo build --release -p ubio-cli -p ubio-preload)" >&2
        exit 1
    fi
done

root=$DESTDIR$PREFIX
docs=$(mktemp -d)
trap 'rm -rf "$docs"' EXIT
"$bin_dir/ubio" __generate-docs "$docs"

install -d "$root/bin" "$root/lib" "$root/share/man/man1" \
    "$root/share/bash-completion/completions" "$root/share/zsh/site-functions" \
    "$root/share/fish/vendor_completions.d" "$root/lib/systemd/system" "$root/share/doc/ubio"
install -m 755 "$bin_dir/ubio" "$root/bin/ubio"
install -m 755 "$bin_dir/libubio_preload.so" "$root/lib/libubio_preload.so"
install -m 644 "$docs"/man/*.1 "$root/share/man/man1/"
install -m 644 "$docs/completions/ubio.bash" "$root/share/bash-completion/completions/ubio"
install -m 644 "$docs/completions/_ubio" "$root/share/zsh/site-functions/_ubio"
install -m 644 "$docs/completions/ubio.fish" "$root/share/fish/vendor_completions.d/ubio.fish"
# The unit runs the binary where it is installed (PREFIX, without DESTDIR).
sed "s|@BINDIR@|$PREFIX/bin|g" "$repo/dist/systemd/ubio-policy.service.in" >"$docs/ubio-policy.service"
install -m 644 "$docs/ubio-policy.service" "$root/lib/systemd/system/ubio-policy.service"
install -m 644 "$repo/dist/policy.toml.example" "$root/share/doc/ubio/policy.toml.example"
echo "install.sh: installed ubio into $root ($(ls "$docs/man" | wc -l) man pages, bash/zsh/fish completions, the ubio-policy.service unit)"
