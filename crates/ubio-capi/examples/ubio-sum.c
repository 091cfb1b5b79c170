/*
 * ubio-sum: read a file through libubio and print its size and a checksum,
 * leaving the page cache as it was. With --plain it uses read(2) instead
 * (the comparison in bench/python-c.sh).
 *
 *   cc -O2 ubio-sum.c $(pkg-config --cflags --libs ubio) -o ubio-sum
 *   ./ubio-sum big.dat
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ubio.h>

#define CHUNK (1 << 20)

/* A cheap checksum (the sum of the 64-bit words), so that the I/O dominates. */
static uint64_t sum(uint64_t h, const unsigned char *p, size_t n)
{
    size_t i = 0;
    for (uint64_t w; i + 8 <= n; i += 8)
        memcpy(&w, p + i, 8), h += w;
    for (; i < n; i++)
        h += p[i];
    return h;
}

int main(int argc, char **argv)
{
    int plain = argc == 3 && strcmp(argv[1], "--plain") == 0;
    if (argc != 2 + plain) {
        fprintf(stderr, "usage: %s [--plain] FILE\n", argv[0]);
        return 2;
    }
    const char *path = argv[1 + plain];
    unsigned char *buf = malloc(CHUNK);
    uint64_t h = 0, total = 0;
    ssize_t n;

    if (plain) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "open %s: %s\n", path, strerror(errno));
            return 1;
        }
        while ((n = read(fd, buf, CHUNK)) > 0)
            h = sum(h, buf, (size_t)n), total += (uint64_t)n;
        close(fd);
    } else {
        struct ubio_file *f = ubio_open(path, O_RDONLY, 0, NULL); /* backend auto */
        if (!f) {
            fprintf(stderr, "ubio-sum: %s\n", ubio_last_error());
            return 1;
        }
        while ((n = ubio_read(f, buf, CHUNK)) > 0)
            h = sum(h, buf, (size_t)n), total += (uint64_t)n;
        struct ubio_stats st;
        if (ubio_close(f, &st) < 0 || n < 0) {
            fprintf(stderr, "ubio-sum: %s\n", ubio_last_error());
            return 1;
        }
        fprintf(stderr, "backend %s, %" PRIu64 " pages dropped, %" PRIu64 " kept\n",
                ubio_backend_name(st.backend), st.pages_dropped, st.pages_preserved);
    }
    if (n < 0 && plain) {
        fprintf(stderr, "read %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("%" PRIu64 " bytes, sum %016" PRIx64 "\n", total, h);
    free(buf);
    return 0;
}
