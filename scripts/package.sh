#!/usr/bin/env bash
# Build ubio's packages from a clean export of a commit:
#
#   Debian and derivatives   ubio (the command, its LD_PRELOAD shim, man pages,
#                            completions), ubio-bench (the harness), libubio0
#                            (libubio.so.0) and libubio-dev (ubio.h, libubio.a,
#                            ubio.pc), built by dpkg-buildpackage with debhelper
#                            from packaging/debian
#   Python                   a wheel for CPython 3.11 and later (abi3) that pip
#                            installs without cargo
#
#   scripts/package.sh                    # HEAD, into target/packages/
#   scripts/package.sh --out DIR REV      # another commit, elsewhere
#   scripts/package.sh --no-wheel         # the .debs only
#
# The export (git archive) holds what the commit holds and nothing else: an
# uncommitted change never reaches a package. Versions carry the git
# description: the crate version where the commit is tagged v<version>,
# else <version>+git<commits>.<hash> (Debian: 0.1.0+git412.7dd5c53; the wheel:
# the same as a PEP 440 local version), and `ubio --version` prints the
# description (UBIO_GIT_DESCRIBE, crates/ubio-cmd/build.rs). The copyright
# file lists the Rust crates the binaries link statically, from `cargo
# metadata`.
#
# lintian checks the packages: an error, or a warning that is not explained
# in packaging/lintian-explained, fails the script.
#
# Installs what it needs with scripts/install-deps.sh: dpkg-dev, debhelper
# and lintian, cargo, and for the wheel maturin in
# ${UBIO_PYENV:-~/.cache/ubio/pyenv}.
# Cargo's build directory is kept between runs in
# ${UBIO_PACKAGE_TARGET_DIR:-target/package} (a cache: the sources come from
# the export).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$repo/target/packages"
rev=HEAD
wheel=1
while [ "$#" -gt 0 ]; do
    case $1 in
        --out) out=$2; shift ;;
        --out=*) out=${1#--out=} ;;
        --no-wheel) wheel=0 ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        -*) echo "package.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
        *) rev=$1 ;;
    esac
    shift
done

"$repo/scripts/install-deps.sh" dpkg-dev debhelper lintian >&2
if ! command -v cargo >/dev/null 2>&1; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi
pyenv="${UBIO_PYENV:-$HOME/.cache/ubio/pyenv}"
if [ "$wheel" = 1 ] && [ ! -x "$pyenv/bin/maturin" ]; then
    "$repo/scripts/install-deps.sh" --pyenv >&2
fi

commit=$(git -C "$repo" rev-parse --verify "$rev^{commit}")
describe=$(git -C "$repo" describe --tags --always --match 'v[0-9]*' "$commit")
crate_version=$(git -C "$repo" show "$commit:Cargo.toml" | sed -n 's/^version = "\(.*\)"/\1/p' | head -n1)
if [ "$describe" = "v$crate_version" ]; then
    version=$crate_version
else
    version="$crate_version+git$(git -C "$repo" rev-list --count "$commit").$(git -C "$repo" rev-parse --short=7 "$commit")"
fi
echo "package.sh: $commit ($describe) as version $version" >&2

work=$(mktemp -d -t ubio-package.XXXXXX)
trap 'rm -rf "$work"' EXIT
src="$work/ubio-$version"
mkdir -p "$src"
git -C "$repo" archive --format=tar "$commit" | tar -x -C "$src"
cp -r "$src/packaging/debian" "$src/debian"
export UBIO_GIT_DESCRIBE=$describe
export CARGO_TARGET_DIR="${UBIO_PACKAGE_TARGET_DIR:-$repo/target/package}"
mkdir -p "$CARGO_TARGET_DIR"

# debian/changelog: one entry for this build, dated by the commit (so that
# the same commit gives the same packages).
maintainer=$(sed -n 's/^Maintainer: //p' "$src/debian/control")
{
    echo "ubio ($version) unstable; urgency=medium"
    echo
    echo "  * Built from commit $commit"
    echo "    (git describe: $describe)."
    echo
    echo " -- $maintainer  $(git -C "$repo" log -1 --format=%aD "$commit")"
} > "$src/debian/changelog"

# debian/copyright: the project's licence, and the crates linked statically
# into what the packages ship.
(cd "$src" && cargo metadata --locked --format-version 1 \
    --filter-platform "$(rustc -vV | sed -n 's/^host: //p')") > "$work/metadata.json"
python3 - "$work/metadata.json" "$src/debian/copyright.in" "$src/debian/copyright" <<'EOF'
import json, sys
metadata, template, target = sys.argv[1:]
m = json.load(open(metadata))
nodes = {n["id"]: n for n in m["resolve"]["nodes"]}
pkgs = {p["id"]: p for p in m["packages"]}
# What the packages ship, and everything those link: not build or dev
# dependencies, nor proc-macro crates (and theirs), which run in the compiler.
def proc_macro(p):
    return any("proc-macro" in t["kind"] for t in p["targets"])
todo = [i for i, p in pkgs.items() if p["name"] in ("ubio-cli", "ubio-bench", "ubio-preload", "ubio-capi")]
seen = set()
while todo:
    i = todo.pop()
    if i not in seen and not proc_macro(pkgs[i]):
        seen.add(i)
        todo += [d["pkg"] for d in nodes[i]["deps"] if any(k["kind"] is None for k in d["dep_kinds"])]
crates = sorted((pkgs[i] for i in seen if pkgs[i]["source"]), key=lambda p: p["name"])
lines = "\n".join(" {} {}: {}".format(p["name"], p["version"], p["license"] or "see its source") for p in crates)
open(target, "w").write(open(template).read().replace("@CRATES@", lines))
EOF
rm "$src/debian/copyright.in"

echo "package.sh: dpkg-buildpackage (cargo build into $CARGO_TARGET_DIR)" >&2
# -d: the Build-Depends name Debian's cargo and rustc, and rustup's are used
# here (Debian bookworm's rustc 1.63 is too old for this code).
(cd "$src" && dpkg-buildpackage -b -us -uc -d)

mkdir -p "$out"
out=$(cd "$out" && pwd) # maturin runs in the export
cp "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out"/
changes=$(ls "$out"/ubio_"${version}"_*.changes)

if [ "$wheel" = 1 ]; then
    # The wheel's version: PEP 440 spells the same description as a local
    # version. abi3 for CPython 3.11 and later: the buffer protocol the
    # extension uses is in the stable ABI from 3.11.
    sed -i "s/^version = \".*\"/version = \"$version\"/" "$src/python/pyproject.toml"
    echo "package.sh: maturin build (abi3, CPython >= 3.11)" >&2
    (cd "$src" && "$pyenv/bin/maturin" build --release --locked -m python/Cargo.toml \
        --features pyo3/abi3-py311 --out "$out" >&2)
fi

echo "package.sh: lintian" >&2
findings=$(lintian --fail-on none --pedantic --display-info "$changes" || true)
explained="$repo/packaging/lintian-explained"
unexplained=$(printf '%s\n' "$findings" | grep -E '^[EW]: ' | while read -r line; do
    tag=$(printf '%s\n' "$line" | awk '{print $3}')
    grep -qE "^$tag( |$)" "$explained" || printf '%s\n' "$line"
done || true)
printf '%s\n' "$findings" | sed 's/^/  lintian: /' >&2
ls -1 "$out" | sed "s|^|package.sh: $out/|" >&2
if [ -n "$unexplained" ]; then
    echo "package.sh: lintian reports what packaging/lintian-explained does not explain:" >&2
    printf '%s\n' "$unexplained" >&2
    exit 1
fi
