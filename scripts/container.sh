#!/usr/bin/env bash
# The policy daemon's container image, built offline: the ubio binary (the
# packaged one, from a .deb, or the workspace's) with the shared libraries it
# links, FROM scratch (dist/container/Containerfile), by podman from Debian;
# and the seccomp profile it needs under podman: podman's default with
# cachestat() allowed (podman 4.3's refuses it with ENOSYS; Docker's and
# containerd's RuntimeDefault allow it since 2024).
#
#   scripts/container.sh                      # from target/release/ubio
#   scripts/container.sh --deb target/packages    # from the packaged binary (ubio_*.deb)
#   scripts/container.sh --binary PATH --tag localhost/ubio-policy:test --out DIR
#
# Prints the image's tag. Writes DIR/seccomp.json (default
# target/container). podman's own settings (storage, runtime) come from its
# environment: CONTAINERS_CONF, CONTAINERS_STORAGE_CONF. Needs root and
# podman (scripts/install-deps.sh podman).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
binary="$repo/target/release/ubio"
deb=
tag=
out="$repo/target/container"
while [ "$#" -gt 0 ]; do
    case $1 in
        --deb) deb=$2; shift ;;
        --binary) binary=$2; shift ;;
        --tag) tag=$2; shift ;;
        --out) out=$2; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "container.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
    esac
    shift
done
command -v podman >/dev/null || "$repo/scripts/install-deps.sh" podman runc >&2

work=$(mktemp -d -t ubio-container.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ -n "$deb" ]; then
    pkg=$(find "$deb" -maxdepth 1 -name 'ubio_*.deb' -print -quit)
    [ -n "$pkg" ] || { echo "container.sh: no ubio_*.deb in $deb" >&2; exit 1; }
    dpkg-deb -x "$pkg" "$work/deb"
    binary="$work/deb/usr/bin/ubio"
fi
[ -x "$binary" ] || { echo "container.sh: no ubio binary at $binary (build it, or give --deb or --binary)" >&2; exit 1; }
version=$("$binary" --version | awk '{print $2}')
tag=${tag:-localhost/ubio-policy:$version}

# The root: ubio and what ldd says it links, a passwd and group that name
# root and nobody (the configuration may name users), and the directories
# the daemon uses.
r="$work/context/rootfs"
mkdir -p "$r/usr/bin" "$r/etc/ubio" "$r/run/ubio" "$r/tmp"
if [ -n "$deb" ]; then
    cp "$binary" "$r/usr/bin/ubio"
else
    # Stripped, as the package's is (the workspace's keeps debug information).
    strip -o "$r/usr/bin/ubio" "$binary"
fi
for lib in $(ldd "$binary" | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}'); do
    mkdir -p "$r$(dirname "$lib")"
    cp -L "$lib" "$r$lib"
done
printf 'root:x:0:0:root:/:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/:/usr/sbin/nologin\n' > "$r/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
cp "$repo/dist/container/Containerfile" "$work/context/Containerfile"
podman build --quiet --pull=never --network=none -t "$tag" "$work/context" >&2

mkdir -p "$out"
python3 - "$out/seccomp.json" <<'PY'
import json, sys
profile = json.load(open("/usr/share/containers/seccomp.json"))
allow = next(s for s in profile["syscalls"] if s["action"] == "SCMP_ACT_ALLOW" and not s.get("args") and not s.get("includes"))
if "cachestat" not in allow["names"]:
    allow["names"].append("cachestat")
json.dump(profile, open(sys.argv[1], "w"), indent=1)
PY
echo "$tag"
