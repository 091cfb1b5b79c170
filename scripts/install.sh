#!/usr/bin/env bash
# Install ubio from the source tree: the `ubio` binary, the LD_PRELOAD shim
# behind `ubio run`, man pages (ubio(1), ubio-cp(1), ...) and bash, zsh and
# fish completions; with --bench also the benchmark harness, `ubio-bench`
# (what `ubio bench` and `ubio demo` run), with its own pages and
# completions. The man pages and completions are generated from the
# programs' own definitions (`ubio __generate-docs`), so they match --help.
# (Debian packages: scripts/package/build.sh.)
#
#   scripts/install.sh                          # build, then install into /usr/local
#   scripts/install.sh --bench                  # ... and ubio-bench
#   PREFIX=$HOME/.local scripts/install.sh      # or --prefix=DIR
#   DESTDIR=/tmp/stage PREFIX=/usr scripts/install.sh   # staged
#   scripts/install.sh --no-build               # install what target/release holds
#   UBIO_BIN_DIR=DIR scripts/install.sh --no-build      # ... or what DIR holds
#
# Layout under DESTDIR/PREFIX:
#   bin/ubio, bin/ubio-bench (--bench)
#   lib/libubio_preload.so                      (`ubio run` looks in ../lib)
#   share/man/man1/ubio*.1
#   share/bash-completion/completions/ubio, ubio-bench
#   share/zsh/site-functions/_ubio, _ubio-bench
#   share/fish/vendor_completions.d/ubio.fish, ubio-bench.fish
#   lib/systemd/system/ubio-policy.service      (the policy daemon's unit, from dist/systemd/)
#   share/doc/ubio/policy.toml.example          (copy it to /etc/ubio/policy.toml)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
build=1
programs=(ubio)
for arg in "$@"; do
    case $arg in
        --no-build) build=0 ;;
        --bench) programs+=(ubio-bench) ;;
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
packages=(-p ubio-cli -p ubio-preload)
[ "${#programs[@]}" = 1 ] || packages+=(-p ubio-bench)
if [ "$build" = 1 ]; then
    cargo build --release --manifest-path "$repo/Cargo.toml" "${packages[@]}"
fi
for f in "${programs[@]}" libubio_preload.so; do
    if [ ! -f "$bin_dir/$f" ]; then
        echo "install.sh: $bin_dir/$f not found (build with: cargo build --release ${packages[*]})" >&2
        exit 1
    fi
done

root=$DESTDIR$PREFIX
docs=$(mktemp -d)
trap 'rm -rf "$docs"' EXIT
install -d "$root/bin" "$root/lib" "$root/share/man/man1" \
    "$root/share/bash-completion/completions" "$root/share/zsh/site-functions" \
    "$root/share/fish/vendor_completions.d" "$root/lib/systemd/system" "$root/share/doc/ubio"
install -m 755 "$bin_dir/libubio_preload.so" "$root/lib/libubio_preload.so"
for p in "${programs[@]}"; do
    "$bin_dir/$p" __generate-docs "$docs/$p"
    install -m 755 "$bin_dir/$p" "$root/bin/$p"
    install -m 644 "$docs/$p"/man/*.1 "$root/share/man/man1/"
    install -m 644 "$docs/$p/completions/$p.bash" "$root/share/bash-completion/completions/$p"
    install -m 644 "$docs/$p/completions/_$p" "$root/share/zsh/site-functions/_$p"
    install -m 644 "$docs/$p/completions/$p.fish" "$root/share/fish/vendor_completions.d/$p.fish"
done
# The policy daemon's unit runs the binary where it is installed (PREFIX, without DESTDIR).
sed "s|@BINDIR@|$PREFIX/bin|g" "$repo/dist/systemd/ubio-policy.service.in" >"$docs/ubio-policy.service"
install -m 644 "$docs/ubio-policy.service" "$root/lib/systemd/system/ubio-policy.service"
install -m 644 "$repo/dist/policy.toml.example" "$root/share/doc/ubio/policy.toml.example"
echo "install.sh: installed ${programs[*]} into $root ($(cat "$docs"/*/man/*.1 | grep -c '^\.TH') man pages, bash/zsh/fish completions, the ubio-policy.service unit)"
