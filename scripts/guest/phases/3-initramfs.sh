# shellcheck shell=bash
# A phase of scripts/guest/run.sh, which sources the phases in order: the
# settings, helpers and variables used here are run.sh's (not run alone).

# 3. The base initramfs: busybox, filesystem tools and their libraries, /init.
# The checkers and dmsetup: the power-cut and disk-fault suites. GNU cp (the host's, with its
# libraries, in /opt/gnu/bin: busybox's cp stays the guest's `cp`): the
# power-cut suite's unmodified dynamic program under `ubio run`.
tools="mkfs.f2fs mkfs.ext4 mkfs.xfs mkfs.btrfs losetup mount umount dmsetup e2fsck xfs_repair btrfs fsck.f2fs"
# GNU programs the policy tests run (cp also for the power-cut suite), in
# /opt/gnu/bin, with dash as their `sh` there (busybox's sh runs its own
# applets before the PATH's programs); setpriv and unshare (util-linux's:
# busybox's lack the options) in /usr/bin; Python with the part of its
# library a copy needs.
gnu_tools="cp tar sha256sum dash"
util_tools="setpriv unshare"
# Debian's (not a pyenv shim earlier on the PATH): its library is the package's.
python=$(readlink -f /usr/bin/python3)
pyver=${python##*/}
toolver=$(dpkg-query -W -f '${Version} ' f2fs-tools e2fsprogs xfsprogs btrfs-progs util-linux mount coreutils \
    tar "lib$pyver-stdlib" 2>/dev/null || true)
# A program into the image under root R, in directory DIR, with the
# libraries ldd names (the NFS tools' from their extracted package).
add_program() { # R program DIR
    local r=$1 p=$2 lib
    mkdir -p "$r$3"
    cp -L "$p" "$r$3/${p##*/}"
    for lib in $(LD_LIBRARY_PATH=${nfsdir:+$nfsdir/usr/lib/x86_64-linux-gnu} ldd "$p" |
        awk '/=> \// {print $3} /^\t\/lib64/ {print $1}'); do
        [ -e "$r${lib#"$nfsdir"}" ] && continue
        mkdir -p "$r$(dirname "${lib#"$nfsdir"}")"
        cp -L "$lib" "$r${lib#"$nfsdir"}"
    done
}
key=$(cat scripts/guest/init.sh - <<<"$bbver $toolver ${nfsvers:-} $gnu_tools $util_tools $pyver" | sha256sum | cut -c1-16)
base="$CACHE/base-$key.cpio"
if [ ! -f "$base" ]; then
    echo "== guest: building the base initramfs ($key)"
    r="$work/base"
    mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,lib64,lib/x86_64-linux-gnu,tests,etc,proc,sys,dev,tmp,mnt}
    cp "$busybox" "$r/bin/busybox"
    ln -s busybox "$r/bin/sh"
    cp scripts/guest/init.sh "$r/init"
    chmod 755 "$r/init"
    echo "root:x:0:0:root:/:/bin/sh" > "$r/etc/passwd"
    echo "nobody:x:65534:65534:nobody:/:/bin/sh" >> "$r/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$r/etc/group"
    paths=()
    for t in $tools; do paths+=("$(command -v "$t")"); done
    if [ -n "$nfsdir" ]; then
        for t in rpc.nfsd rpc.mountd exportfs; do paths+=("$nfsdir/usr/sbin/$t"); done
        mkdir -p "$r/var/lib/nfs"
        cp /etc/netconfig "$r/etc/netconfig"
        printf '127.0.0.1 localhost\n' > "$r/etc/hosts"
    fi
    for p in "${paths[@]}"; do add_program "$r" "$p" /usr/sbin; done
    for t in $gnu_tools; do add_program "$r" "$(command -v "$t")" /opt/gnu/bin; done
    ln -s dash "$r/opt/gnu/bin/sh"
    for t in $util_tools; do add_program "$r" "$(command -v "$t")" /usr/bin; done
    add_program "$r" "$python" /usr/bin
    ln -s "$pyver" "$r/usr/bin/python3"
    # The library without what a test never imports (tests, tools, Tk, the
    # build configuration, the GUI and network packages): about a third.
    (cd "/usr/lib/$pyver" && find . \( -path ./test -o -path ./config-\* -o -path ./idlelib \
        -o -path ./tkinter -o -path ./turtledemo -o -path ./lib2to3 -o -path ./pydoc_data \
        -o -path ./distutils -o -path ./ensurepip -o -path ./site-packages -o -path ./dist-packages \
        -o -path ./asyncio -o -path ./email -o -path ./xml -o -path ./http -o -path ./unittest \
        -o -path ./multiprocessing -o -path ./sqlite3 -o -path ./xmlrpc -o -path ./wsgiref \) -prune \
        -o -print | cpio -pdm --quiet "$r/usr/lib/$pyver")
    (cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc --quiet) > "$base.tmp"
    mv "$base.tmp" "$base"
fi
# Only the current kernels and base image are kept.
find "$CACHE" -maxdepth 1 -name 'base-*.cpio' ! -name "base-$key.cpio" -delete
find "$CACHE" -maxdepth 1 -name 'busybox-*' ! -name "busybox-$bbver" -delete
keep=()
for k in $KERNELS; do keep+=(! -name "kernel-${kver[$k]}"); done
find "$CACHE" -maxdepth 1 -type d -name 'kernel-*' "${keep[@]}" -exec rm -rf {} +
for k in $KERNELS; do
    cp "${kdir[$k]}/vmlinux" "$work/vmlinux-$k"
    cp "${kdir[$k]}/modules.cpio" "$work/modules-$k.cpio"
done
cp "$base" "$work/base.cpio"
flock -u 9
phase kernels+initramfs
