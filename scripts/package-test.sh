#!/usr/bin/env bash
# The packages, installed into a clean Debian root and used there:
#
#   1. scripts/package.sh builds them from a commit (HEAD by default), or
#      --dist DIR takes what it built before;
#   2. a Debian root from Debian's registry (mmdebstrap, bookworm minbase
#      and what the checks use: man-db, bash-completion, gcc, libc6-dev,
#      pkgconf, python3-venv), cached as a tarball in
#      ${UBIO_PKGTEST_CACHE:-~/.cache/ubio-pkgtest}, remade when a month old
#      or when the list changes; unpacked into a scratch directory on the
#      disk (not tmpfs: a cold file there can stay cold), which is bind
#      mounted onto itself, with /proc, /sys and /dev mounted inside;
#   3. inside it (chroot), with the list of its files taken first:
#      ubio alone: `ubio --version` names the git description; `ubio bench
#      --help` says how to get ubio-bench; a cold 64 MiB file read by plain
#      cat is cached (the control), by `ubio cat` and `ubio run -- cat` it is
#      not (fincore: mincore(2), as root), and reads the same; `man ubio-cp`
#      renders; bash completes `ubio c<TAB>` to cat and cp; where the
#      commit has the policy daemon's unit, it is installed with the
#      packaged binary's path and enabled;
#      libubio0 and libubio-dev: a C program built with `pkg-config --cflags
#      --libs ubio` reads the file (the same sum as with read(2)) and
#      leaves it uncached;
#      the wheel: pip installs it into a venv without cargo (--no-index), and
#      ubio.open reads the file;
#      ubio-bench: `ubio bench --help` lists the harness's commands;
#      purge: dpkg --purge of the four leaves no file behind;
#   4. the policy daemon's container image built from the packaged binary
#      (scripts/container.sh --deb) holds that binary.
#   Everything mounted is unmounted and the root removed on exit, also on
#   failure and Ctrl-C. Prints `PKGTEST <step>: ok (N s)` per step.
#
#   scripts/package-test.sh                 # build HEAD's packages, test them
#   scripts/package-test.sh --dist target/packages   # test packages built before
#   UBIO_DEBIAN_MIRROR=URL                  # another Debian mirror
#
# Needs root and mmdebstrap (installed with scripts/install-deps.sh).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dist=
rev=HEAD
while [ "$#" -gt 0 ]; do
    case $1 in
        --dist) dist=$2; shift ;;
        -h | --help)
            sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
            exit 0
            ;;
        -*) echo "package-test.sh: unknown option '$1' (see --help)" >&2; exit 1 ;;
        *) rev=$1 ;;
    esac
    shift
done
if [ "$(id -u)" -ne 0 ]; then
    echo "package-test.sh: needs root (chroot, mounts)" >&2
    exit 1
fi
"$repo/scripts/install-deps.sh" mmdebstrap >&2

started=$SECONDS
step_started=$SECONDS
step() { # NAME: the previous step is done
    echo "PKGTEST $1: ok ($((SECONDS - step_started)) s)"
    step_started=$SECONDS
}
fail() {
    echo "PKGTEST FAILED: $*" >&2
    exit 1
}

scratch=$(mktemp -d -p "${UBIO_PKGTEST_DIR:-$repo/target}" ubio-pkgtest.XXXXXX)
root="$scratch/root"
mounted=()
cleanup() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" || true
    done
    # Never remove through a mount that is still there (the host's /dev).
    if grep -qF " $scratch/" /proc/self/mountinfo; then
        echo "package-test.sh: mounts left under $scratch; not removing it" >&2
    else
        rm -rf --one-file-system "$scratch"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. The packages.
if [ -z "$dist" ]; then
    dist="$scratch/dist"
    "$repo/scripts/package.sh" --out "$dist" "$rev" > "$scratch/package.log" 2>&1 ||
        { cat "$scratch/package.log" >&2; fail "scripts/package.sh"; }
    step build
fi
dist=$(cd "$dist" && pwd)
deb() { ls "$dist"/"$1"_*.deb 2>/dev/null | tail -n1 || true; }
for p in ubio ubio-bench libubio0 libubio-dev; do
    [ -n "$(deb "$p")" ] || fail "no $p package in $dist"
done
wheel=$(ls "$dist"/ubio-*.whl 2>/dev/null | tail -n1 || true)
[ -n "$wheel" ] || fail "no wheel in $dist"
version=$(dpkg-deb -f "$(deb ubio)" Version)

# 2. The Debian root, from the cache or from Debian's registry.
suite=bookworm
include=man-db,bash-completion,gcc,libc6-dev,pkgconf,python3-venv
cache="${UBIO_PKGTEST_CACHE:-$HOME/.cache/ubio-pkgtest}"
mkdir -p "$cache"
tarball="$cache/$suite-$(printf '%s' "$include" | sha256sum | cut -c1-12).tar"
exec 9> "$cache/lock"
flock 9
if [ -f "$tarball" ] && [ -z "$(find "$tarball" -mtime +30)" ]; then
    cached=yes
else
    cached=no
    rm -f "$tarball"
    mmdebstrap --quiet --variant=minbase --format=tar --include="$include" "$suite" "$tarball.new" \
        "${UBIO_DEBIAN_MIRROR:-http://deb.debian.org/debian}" || fail "mmdebstrap $suite"
    mv "$tarball.new" "$tarball"
fi
flock -u 9
mkdir "$root"
tar -xf "$tarball" -C "$root"
step "debian root ($suite, cached: $cached)"

# Bind mounted onto itself, so that the chroot's / is a mount point (as a
# container's is) and ubio finds it in /proc/self/mountinfo.
mount --bind "$root" "$root"
mounted+=("$root")
mount -t proc proc "$root/proc"
mounted+=("$root/proc")
mount -t sysfs sysfs "$root/sys"
mounted+=("$root/sys")
mount --bind /dev "$root/dev"
mounted+=("$root/dev")
mkdir -p "$root/tmp/pkg"
cp "$dist"/*.deb "$wheel" "$root/tmp/pkg/"
git -C "$repo" show "$(git -C "$repo" rev-parse "$rev"):crates/ubio-capi/examples/ubio-sum.c" > "$root/tmp/pkg/ubio-sum.c"

inside() { # SCRIPT: run by bash in the root, as root, with a clean environment
    chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 TERM=dumb PYTHONDONTWRITEBYTECODE=1 bash -euo pipefail -c "$1"
}
files() { # the root's files, apart from what dpkg, man-db and logs keep
    inside 'find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /tmp -o -path /var/lib/dpkg \
        -o -path /var/log -o -path /var/cache/man -o -path /var/cache/debconf -o -path /var/cache/ldconfig \) -prune \
        -o -print | LC_ALL=C sort'
}
files > "$scratch/before"

# 3a. ubio alone.
inside 'dpkg -i /tmp/pkg/ubio_*.deb >/dev/null' || fail "dpkg -i ubio"
out=$(inside 'ubio --version')
describe=$(dpkg-deb -f "$(deb ubio)" Version)
[[ $out == "ubio "*"(git "*")" ]] || fail "ubio --version: $out"
echo "  $out (package $describe)"
err=$(inside 'if ubio bench --help 2>&1; then echo "(it succeeded)"; fi')
[[ $err == *"apt install ubio-bench"* ]] || fail "ubio bench --help without ubio-bench: $err"
shim=$(inside 'ubio run -- sh -c "echo \$LD_PRELOAD"')
[[ $shim == /usr/lib/*/ubio/libubio_preload.so ]] ||
    fail "ubio run preloads '$shim', not the packaged shim"
[ -z "$(inside 'ls /root/.cache 2>/dev/null || true')" ] || fail "ubio wrote to /root/.cache"
step "ubio alone: --version, the packaged shim, bench without ubio-bench"

# The policy daemon's unit, where the commit has it (dist/systemd/): installed
# for systemd with the packaged binary's path, enabled, and the command it
# runs first accepts the packaged example configuration.
if git -C "$repo" cat-file -e "$rev:dist/systemd/ubio-policy.service.in" 2>/dev/null; then
    unit=$(inside 'cat /lib/systemd/system/ubio-policy.service') || fail "no /lib/systemd/system/ubio-policy.service"
    [[ $unit != *@BINDIR@* ]] || fail "ubio-policy.service still says @BINDIR@"
    grep -q '^ExecStart=/usr/bin/ubio policy run ' <<< "$unit" || fail "ubio-policy.service does not run /usr/bin/ubio: $unit"
    inside '[ -L /etc/systemd/system/multi-user.target.wants/ubio-policy.service ]' ||
        fail "ubio-policy.service is not enabled"
    inside 'ubio policy check /usr/share/doc/ubio/examples/policy.toml.example' ||
        fail "ubio policy check of the packaged example"
    step "ubio-policy.service: /usr/bin/ubio, enabled, its example passes ubio policy check"
fi

# The cold file: written, made durable and dropped by coreutils' dd (not by
# ubio); fincore (util-linux, mincore) measures what stays cached.
size=$((64 << 20))
inside "dd if=/dev/urandom of=/var/tmp/cold bs=1M count=64 status=none && sync /var/tmp/cold"
evict='dd if=/var/tmp/cold iflag=nocache count=0 status=none'
cached() { inside "fincore --bytes --noheadings --output RES /var/tmp/cold"; }
read_cold() { # COMMAND: bytes of the file cached after COMMAND read it cold
    inside "$evict"
    local before
    before=$(cached)
    [ "$before" -eq 0 ] || fail "the file is not cold ($before bytes cached) before: $1"
    inside "$1 > /dev/null"
    cached
}
control=$(read_cold 'cat /var/tmp/cold')
[ "$control" -ge $((size / 8 * 7)) ] ||
    fail "plain cat left only $control of $size bytes cached: the check below would prove nothing"
for cmd in 'ubio cat /var/tmp/cold' 'ubio run -- cat /var/tmp/cold'; do
    left=$(read_cold "$cmd")
    [ "$left" -le $((size / 8)) ] || fail "$cmd left $left of $size bytes cached"
    echo "  $cmd: $left bytes cached after (plain cat: $control)"
done
[ "$(inside 'ubio cat /var/tmp/cold | sha256sum')" = "$(inside 'sha256sum < /var/tmp/cold')" ] ||
    fail "ubio cat read other bytes"
step "ubio cat and ubio run -- cat keep a cold file uncached"

page=$(inside 'MANPAGER=cat MANWIDTH=100 man ubio-cp 2>&1')
for want in "ubio-cp" "--parents" "EXAMPLES"; do
    [[ $page == *"$want"* ]] || fail "man ubio-cp lacks $want"
done
# (bash-completion's loader returns 124 once it has loaded a completion.)
completed=$(inside '. /usr/share/bash-completion/bash_completion
    _completion_loader ubio || [ $? -eq 124 ]
    complete -p ubio >/dev/null
    COMP_WORDS=(ubio c); COMP_CWORD=1; COMP_LINE="ubio c"; COMP_POINT=6
    _ubio ubio c ubio; printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "')
[ "$completed" = "cat cp " ] || fail "ubio c<TAB> completes to '$completed'"
step "man ubio-cp, ubio c<TAB>"

# 3b. The C library.
inside 'dpkg -i /tmp/pkg/libubio0_*.deb /tmp/pkg/libubio-dev_*.deb >/dev/null
    cc -O2 -o /tmp/ubio-sum /tmp/pkg/ubio-sum.c $(pkg-config --cflags --libs ubio)
    ldd /tmp/ubio-sum | grep "libubio.so.0 => /" >/dev/null' || fail "a C program with pkg-config --cflags --libs ubio"
inside "$evict"
with_ubio=$(inside '/tmp/ubio-sum /var/tmp/cold')
left=$(cached)
plain=$(inside '/tmp/ubio-sum --plain /var/tmp/cold')
[ "$with_ubio" = "$plain" ] || fail "ubio-sum: '$with_ubio' with libubio, '$plain' with read(2)"
[ "$left" -le $((size / 8)) ] || fail "ubio-sum left $left of $size bytes cached"
echo "  ubio-sum: $with_ubio; $left bytes cached after"
step "a C program built with pkg-config --cflags --libs ubio"

# 3c. The wheel, without cargo or a network.
inside 'if command -v cargo; then exit 1; fi
    python3 -m venv /tmp/venv
    /tmp/venv/bin/pip install --quiet --no-cache-dir --no-index /tmp/pkg/*.whl
    /tmp/venv/bin/python -c "
import hashlib, ubio
with ubio.open(\"/var/tmp/cold\", \"rb\") as f:
    got = hashlib.sha256(f.read()).hexdigest()
want = hashlib.sha256(open(\"/var/tmp/cold\", \"rb\").read()).hexdigest()
assert got == want, (got, want)
print(\"  ubio.open read the file: sha256\", got[:16])
"' || fail "the wheel in a venv"
inside 'rm -rf /tmp/venv'
step "the wheel in a venv: ubio.open"

# 3d. The harness.
inside 'dpkg -i /tmp/pkg/ubio-bench_*.deb >/dev/null' || fail "dpkg -i ubio-bench"
help=$(inside 'ubio bench --help')
for cmd in run compare report suite demo; do
    grep -qE "^  $cmd " <<< "$help" || fail "ubio bench --help lacks $cmd: $help"
done
inside 'MANPAGER=cat man ubio-bench-run >/dev/null' || fail "man ubio-bench-run"
step "ubio bench --help with ubio-bench"

# 3e. Purge: nothing left.
inside 'rm -f /var/tmp/cold /tmp/ubio-sum
    dpkg --purge ubio-bench libubio-dev libubio0 ubio >/dev/null' || fail "dpkg --purge"
files > "$scratch/after"
if ! diff "$scratch/before" "$scratch/after" > "$scratch/diff"; then
    cat "$scratch/diff" >&2
    fail "the purge left files behind, or removed others"
fi
step "purge leaves nothing behind"

# 4. The policy daemon's container image, from the packaged binary
# (scripts/container.sh --deb), with podman's storage in the scratch
# directory: it runs and names the package's version.
if command -v podman >/dev/null; then
    pod="$scratch/podman"
    mkdir -p "$pod"
    printf '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\ntmp_dir = "%s/tmp"\n[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n' "$pod" > "$pod/containers.conf"
    printf '[storage]\ndriver = "vfs"\ngraphroot = "%s/graph"\nrunroot = "%s/run"\n' "$pod" "$pod" > "$pod/storage.conf"
    export CONTAINERS_CONF="$pod/containers.conf" CONTAINERS_STORAGE_CONF="$pod/storage.conf"
    tag=$("$repo/scripts/container.sh" --deb "$dist" --tag localhost/ubio-policy:pkgtest --out "$pod") ||
        fail "scripts/container.sh --deb"
    # Its binary is the package's (a container made, not started: nothing
    # runs, so no cgroup is made; tests/policy_fleet.rs runs the image).
    podman create --name pkgtest "$tag" >/dev/null || fail "podman create $tag"
    podman cp pkgtest:/usr/bin/ubio "$pod/ubio" || fail "podman cp from $tag"
    podman rm pkgtest >/dev/null
    dpkg-deb --fsys-tarfile "$(deb ubio)" | tar -xO ./usr/bin/ubio > "$pod/packaged"
    cmp -s "$pod/ubio" "$pod/packaged" || fail "the image's /usr/bin/ubio is not the package's"
    said=$("$pod/ubio" --version)
    podman rmi -f "$tag" >/dev/null
    echo "  $tag: /usr/bin/ubio is the package's ($said); $(du -sh "$pod/graph" | cut -f1) of storage"
    step "the policy daemon's image from the packaged binary"
fi

echo "PKGTEST all: ok, $version in a clean $suite root ($((SECONDS - started)) s)"
