#!/usr/bin/env bash
# The address space `cp` needs: the least `ulimit -v` (KiB, found to 256 KiB
# by bisection) under which each command succeeds, and its peak RSS
# (GNU time's %M; here maxrss.c, built with gcc) without a limit, for GNU's cp and for each ubio given.
#
#   run.sh UBIO...      (each a path to a ubio binary; prints a table)
#
# The trees: link-heap.sh's (two directories of 10,000 empty files, one the
# hard links of the other, and 10,000 directories: 40,000 entries) and a
# tree with data (2,000 files of 37 B to 74 KB and one of 64 MiB).
set -euo pipefail
work=$(mktemp -d -t cpmem.XXXXXX)
trap 'rm -rf "$work"' EXIT
ubios=()
for u in "$@"; do ubios+=("$(realpath "$u")"); done
set -- "${ubios[@]}"
cd "$work"
a=$(printf %031d 0); b=$(printf %031d 1)
(mkdir $a && cd $a && seq --format=%031g 10000 | xargs touch && seq --format=d%030g 10000 | xargs mkdir)
/bin/cp -al $a $b && mkdir e && mv $a $b e
mkdir data && for i in $(seq 1 2000); do head -c $((i * 37)) /dev/urandom >data/f$i; done
head -c 64M /dev/urandom >data/big
touch f

runs() { rm -rf out; (ulimit -v "$1" && exec "${@:2}") >/dev/null 2>&1; }
least() {
    local lo=1000 hi=400000 mid
    runs $hi "$@" || { echo "fails"; return; }
    while [ $((hi - lo)) -gt 256 ]; do
        mid=$(((lo + hi) / 2))
        if runs $mid "$@"; then hi=$mid; else lo=$mid; fi
    done
    echo $hi
}
# Peak RSS in KiB, as GNU time's %M: a small C program (gcc) that runs the
# command and prints its rusage's ru_maxrss.
cat > maxrss.c <<'C'
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    pid_t pid = fork();
    if (pid == 0) { execvp(argv[1], argv + 1); _exit(127); }
    int status; struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) return 1;
    fprintf(stderr, "%ld\n", ru.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
C
gcc -O2 -o maxrss maxrss.c
rss() { rm -rf out; "$work/maxrss" "$@" 2>&1 >/dev/null | tail -1; }

printf '%-40s %-28s %12s %14s\n' cp command "ulimit -v KiB" "peak RSS KiB"
for cp in /bin/cp "$@"; do
    [ "$cp" = /bin/cp ] && pre=() || pre=(cp)
    for args in "-al f out" "-al e out" "-al --jobs 1 e out" "-r data out" "-r --jobs 1 data out"; do
        [ "$cp" = /bin/cp ] && [[ $args == *jobs* ]] && continue
        # shellcheck disable=SC2086
        printf '%-40s %-28s %12s %14s\n' "$cp" "$args" "$(least "$cp" "${pre[@]}" $args)" "$(rss "$cp" "${pre[@]}" $args)"
    done
done
