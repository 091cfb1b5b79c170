# shellcheck shell=bash
# A phase of scripts/guest/run.sh, which sources the phases in order: the
# settings, helpers and variables used here are run.sh's (not run alone).

# 2. Packages and kernels (busybox-static from the first kernel's release).
declare -A kpkg kver kdir kdebs
for k in $KERNELS; do
    suite=$(suite_of "$k")
    # Lists a month old are refreshed (a newer kernel of the series may be out).
    if [ ! -f "$CACHE/apt-$suite/sources.list" ] ||
        [ -n "$(find "$CACHE/apt-$suite/sources.list" -mtime +30)" ]; then
        apt_update "$suite"
    fi
    read -r p v < <(kernel_pkg "$k" "$suite") || true
    if [ -z "${p:-}" ] || ! deb=$(fetch "$suite" "$p" "$v"); then
        # Lists too old (the mirror keeps only the newest version): refresh once.
        apt_update "$suite"
        read -r p v < <(kernel_pkg "$k" "$suite") || true
        [ -n "${p:-}" ] || { echo "guest: no linux-image-$k.*-amd64 in Debian $suite" >&2; exit 1; }
        deb=$(fetch "$suite" "$p" "$v") || { echo "guest: apt-get download $p=$v failed" >&2; exit 1; }
    fi
    kpkg[$k]=$p kver[$k]=$v kdir[$k]="$CACHE/kernel-$v"
    kdebs[$k]=$deb
done
bbsuite=$(suite_of "${KERNELS%% *}")
bbver=$(apt_in "$bbsuite" apt-cache policy busybox-static | awk '/Candidate:/ {print $2}')
bbdeb=$(fetch "$bbsuite" busybox-static "$bbver") ||
    { echo "guest: apt-get download busybox-static=$bbver failed" >&2; exit 1; }
busybox="$CACHE/busybox-$bbver"
if [ ! -x "$busybox" ]; then
    rm -rf "$work/bb" && dpkg-deb -x "$bbdeb" "$work/bb"
    # /bin/busybox up to bookworm, /usr/bin/busybox since trixie (merged /usr).
    cp "$(find "$work/bb" -path '*bin/busybox' -type f -print -quit)" "$busybox.tmp"
    mv "$busybox.tmp" "$busybox"
fi
phase download

# The kernel: PVH vmlinux (boots directly, no decompression under TCG) and
# a cpio of the modules, in load order (the NFS server and client ones in
# every kernel: loaded, they cost nothing where NFS is not tested).
guest_nfs_modules="nfsd nfsv4 nfs"
# device-mapper for the power-cut suite (log-writes) and disk faults (flakey).
guest_dm_modules="dm-mod dm-log-writes dm-flakey"
modkey=$(echo "$guest_nfs_modules $guest_dm_modules" | sha256sum | cut -c1-8)
extract_kernel() { # series
    local k=$1 d=${kdir[$1]} krel=${kpkg[$1]#linux-image-} vmlinuz off magic unpack mods dep name path seen m
    echo "== guest: extracting ${kpkg[$k]} ${kver[$k]}"
    rm -rf "$d" && mkdir -p "$d"
    dpkg-deb -x "${kdebs[$k]}" "$d/pkg"
    # trixie keeps modules in /usr/lib/modules; busybox depmod looks in /lib.
    [ -e "$d/pkg/lib" ] || ln -s usr/lib "$d/pkg/lib"
    vmlinuz="$d/pkg/boot/vmlinuz-$krel"
    if grep -q '^CONFIG_KERNEL_ZSTD=y' "$d/pkg/boot/config-$krel"; then
        magic='\x28\xb5\x2f\xfd' unpack="zstd -dcq"
    else
        magic='\xfd7zXZ\x00' unpack="xz -dc --single-stream"
    fi
    off=$(LC_ALL=C grep -obUaP -m1 "$magic" "$vmlinuz" | LC_ALL=C cut -d: -f1 | sed -n 1p)
    # The size trailer after the payload makes zstd complain: judge the ELF.
    { tail -c +$((off + 1)) "$vmlinuz" || true; } | { $unpack > "$d/vmlinux" 2> /dev/null || true; }
    [ "$(head -c 4 "$d/vmlinux" | od -An -c | tr -d ' ')" = '177ELF' ] ||
        { echo "guest: no vmlinux in $vmlinuz" >&2; exit 1; }
    "$busybox" depmod -b "$d/pkg" "$krel"
    # The modules wanted, their dependencies first (modules.dep lists each
    # module's dependencies, deepest last), softdeps added by hand.
    mods="$d/pkg/lib/modules/$krel"
    dep="$mods/modules.dep"
    order=()
    add() { # kernel/...ko[.xz]
        local m d
        m=$1
        for seen in "${order[@]}"; do [ "$seen" = "$m" ] && return 0; done
        for d in $(awk -v m="$m:" '$1 == m {for (i = NF; i > 1; i--) print $i}' "$dep"); do
            add "$d"
        done
        order+=("$m")
    }
    for name in crc32c_generic crc32c-intel crc32_generic xxhash_generic blake2b_generic sha256_generic \
        virtio_pci virtio_blk loop ext4 xfs btrfs f2fs $guest_nfs_modules $guest_dm_modules; do
        path=$(awk -F: -v n="/$name.ko" '!p && (substr($1, length($1) - length(n) + 1) == n ||
            substr($1, length($1) - length(n) - 2) == n ".xz") {print $1; p = 1}' "$dep")
        [ -n "$path" ] && add "$path"
    done
    mkdir -p "$d/root/modules"
    : > "$d/root/modules/load-order"
    for m in "${order[@]}"; do
        name=$(basename "$m" .xz)
        case "$m" in
        *.xz) xz -dc "$mods/$m" > "$d/root/modules/$name" ;;
        *) cp "$mods/$m" "$d/root/modules/$name" ;;
        esac
        echo "$name" >> "$d/root/modules/load-order"
    done
    (cd "$d/root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$d/modules.cpio"
    rm -rf "$d/pkg" "$d/root"
    touch "$d/ok-$modkey"
}
for k in $KERNELS; do
    [ -f "${kdir[$k]}/ok-$modkey" ] || extract_kernel "$k"
done

# The NFS server's userspace (rpc.nfsd, rpc.mountd, exportfs) from the
# host's Debian release, whose libraries the other tools bring: apt-get
# download and extract, never installed (its package starts services).
nfsdir=
if [ -n "$NFS_KERNELS" ]; then
    hsuite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    [ -f "$CACHE/apt-$hsuite/sources.list" ] || apt_update "$hsuite"
    nfsdir="$CACHE/nfs"
    nfsvers=
    for p in nfs-kernel-server libwrap0; do
        v=$(apt_in "$hsuite" apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
        deb=$(fetch "$hsuite" "$p" "$v") || { echo "guest: apt-get download $p=$v failed" >&2; exit 1; }
        nfsvers+="$p=$v "
        [ -f "$nfsdir/ok-$p-$v" ] || { dpkg-deb -x "$deb" "$nfsdir" && touch "$nfsdir/ok-$p-$v"; }
    done
fi
