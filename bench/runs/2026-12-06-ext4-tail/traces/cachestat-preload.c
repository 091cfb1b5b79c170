/* How traces/cachestat-ranges.txt was made: strace 6.1 does not decode
 * cachestat(2) (syscall 451), so this LD_PRELOAD wrapper of syscall(3), which
 * ubio calls it through, prints each call's range and answer on stderr.
 *   cc -shared -fPIC -O1 -o cachestat-preload.so cachestat-preload.c -ldl
 *   LD_PRELOAD=./cachestat-preload.so ubio cp -r --backend direct --sync SRC DST
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/syscall.h>
long syscall(long n, ...) {
    va_list ap; va_start(ap, n);
    long a[6]; for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    static long (*real)(long, ...);
    if (!real) real = dlsym(RTLD_NEXT, "syscall");
    long r = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (n == 451) {
        uint64_t *rg = (uint64_t *)a[1], *st = (uint64_t *)a[2];
        char buf[200];
        int k = snprintf(buf, sizeof buf, "CACHESTAT fd=%ld off=%lu len=%lu -> %ld cache=%lu dirty=%lu wb=%lu\n", a[0], rg[0], rg[1], r, st[0], st[1], st[2]);
        write(2, buf, k);
    }
    return r;
}
