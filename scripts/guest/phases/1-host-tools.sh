# shellcheck shell=bash
# A phase of scripts/guest/run.sh, which sources the phases in order: the
# settings, helpers and variables used here are run.sh's (not run alone).

# 1. Host tools (what is missing), and Rust.
"$root/scripts/install-deps.sh" qemu-system-x86 cpio xz-utils zstd f2fs-tools xfsprogs btrfs-progs e2fsprogs \
    dmsetup binutils libc6-dev |
    sed 's/^/== guest: /'
export PATH="$PATH:/usr/sbin:/sbin"
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
    # shellcheck disable=SC1091
    . "$HOME/.cargo/env"
fi

mkdir -p "$CACHE/debs"
chmod 755 "$CACHE" "$CACHE/debs"
# One run at a time fills the cache (another run may share it).
exec 9> "$CACHE/.lock"
flock 9

# apt-get/apt-cache on one Debian release only, with its own package lists
# under the cache (the host's sources and lists are not used or touched).
apt_in() { # suite command args...
    local suite=$1 cmd=$2 dir="$CACHE/apt-$1"
    shift 2
    "$cmd" -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o Dir::State::status=/dev/null \
        -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false "$@"
}
apt_update() { # suite
    local dir="$CACHE/apt-$1"
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $1 main" \
        > "$dir/sources.list"
    echo "== guest: apt-get update ($1 only, lists in $dir)"
    apt_in "$1" apt-get update > "$work/apt-update.log" 2>&1 ||
        { cat "$work/apt-update.log" >&2; echo "guest: apt-get update for $1 failed" >&2; exit 1; }
}
# The newest generic kernel of a series in a suite: "package version".
kernel_pkg() { # series suite
    local pkg
    pkg=$(apt_in "$2" apt-cache depends linux-image-amd64 2>/dev/null |
        awk -v s="$1" '$1 == "Depends:" && index($2, "linux-image-" s ".") == 1 && $2 ~ /-amd64$/ && !p {print $2; p = 1}')
    [ -n "$pkg" ] || return 0
    echo "$pkg $(apt_in "$2" apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')"
}
deb_of() { # package version -> cached .deb path, or nothing
    find "$CACHE/debs" -name "$1_$(printf %s "$2" | sed 's/:/%3a/')_*.deb" -print -quit
}
fetch() { # suite package version
    local f
    f=$(deb_of "$2" "$3")
    if [ -z "$f" ]; then
        (cd "$CACHE/debs" && apt_in "$1" apt-get download "$2=$3" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2 || true)
        f=$(deb_of "$2" "$3")
    fi
    [ -n "$f" ] || return 1
    echo "$f"
}
