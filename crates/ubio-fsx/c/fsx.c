/*
 * fsx.c: the exerciser's idea as a plain C program (POSIX and Linux calls
 * only), to run unmodified under `ubio run` and so test the LD_PRELOAD shim.
 *
 * A seeded sequence of operations on one file, every read checked against
 * an in-memory model (bytes and size):
 *   pread and read(2)-at-a-position, pwrite and write(2)-at-a-position on
 *   the main descriptor; ftruncate up and down (main or second descriptor);
 *   fallocate (keep-size, extending) and FALLOC_FL_PUNCH_HOLE; fsync and
 *   fdatasync; close and reopen of the main descriptor; and through other
 *   descriptors: plain pwrite (a second descriptor), aligned O_DIRECT
 *   pwrite (where the filesystem accepts O_DIRECT), mmap reads and writes
 *   (MAP_SHARED, sometimes msync) through a descriptor opened for the map.
 * Every so many operations the whole file is read back with read(2).
 *
 * usage: fsx [-s SEED] [-N OPS] [-S MAXSIZE] [-L MAXLEN] [-v VERIFY_EVERY]
 *            [-D (no O_DIRECT)] [-M (no mmap)] FILE
 * Exit 0: every check passed (a summary line on stdout); 1: a mismatch or an
 * unexpected error (seed, operation number, log tail and differing bytes on
 * stderr); 2: usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096
#define TAIL 30
#define MAX_DIFFS 16

enum kind { K_READ, K_WRITE, K_TRUNC, K_FALLOC, K_PUNCH, K_SYNC, K_REOPEN,
            K_BUFWRITE, K_DIRECTWRITE, K_MAPREAD, K_MAPWRITE, K_VERIFY, K_COUNT };
static const char *kind_name[K_COUNT] = {
    "read", "write", "truncate", "fallocate", "punch_hole", "sync", "reopen",
    "buffered_write", "direct_write", "mmap_read", "mmap_write", "verify" };
static unsigned weight[K_COUNT] = { 20, 20, 4, 3, 3, 2, 1, 5, 4, 4, 4, 0 };

struct op { uint64_t n; enum kind kind; uint64_t off, len; int flag; };

static uint64_t rng_state, seed;
static uint64_t max_size = 2u << 20, max_len = 256u << 10, verify_every = 500;
static const char *path;
static int fd = -1, fd2 = -1, dfd = -1;
static unsigned char *model, *buf, *got, *dbuf;
static uint64_t size;
static uint64_t opno, counts[K_COUNT], unsupported;
static struct op tail[TAIL];
static uint64_t tail_len;

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t next(void) { rng_state += 0x9E3779B97F4A7C15ull; return mix(rng_state); }
static uint64_t below(uint64_t n) { return (uint64_t)(((unsigned __int128)next() * n) >> 64); }

static void fill(uint64_t s, unsigned char *p, uint64_t len)
{
    for (uint64_t i = 0; i < len; i += 8) {
        uint64_t w = mix(s ^ (i / 8) * 0x9E3779B97F4A7C15ull);
        uint64_t n = len - i < 8 ? len - i : 8;
        memcpy(p + i, &w, n);
    }
}

static void print_op(FILE *f, const struct op *o)
{
    fprintf(f, "    #%-9" PRIu64 " %-14s %#10" PRIx64 " .. %#10" PRIx64 " (%" PRIu64 " bytes) flag %d\n",
            o->n, kind_name[o->kind], o->off, o->off + o->len, o->len, o->flag);
}

static void record(const struct op *o)
{
    tail[tail_len % TAIL] = *o;
    tail_len++;
}

static void die(const struct op *o, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fsx: FAILED at operation %" PRIu64 " (%s): ", o->n, kind_name[o->kind]);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  seed %" PRIu64 " file %s model size %#" PRIx64 "\n", seed, path, size);
    uint64_t first = tail_len > TAIL ? tail_len - TAIL : 0;
    fprintf(stderr, "  last %" PRIu64 " operations:\n", tail_len - first);
    for (uint64_t i = first; i < tail_len; i++)
        print_op(stderr, &tail[i % TAIL]);
    exit(1);
}

static void compare(const struct op *o, const char *what, uint64_t off, const unsigned char *p, uint64_t len)
{
    if (memcmp(model + off, p, len) == 0)
        return;
    uint64_t count = 0;
    fprintf(stderr, "fsx: %s at %#" PRIx64 " differs from the model:\n        offset  expected  got\n", what, off);
    for (uint64_t i = 0; i < len; i++)
        if (model[off + i] != p[i] && count++ < MAX_DIFFS)
            fprintf(stderr, "    %#10" PRIx64 "  %#04x      %#04x\n", off + i, model[off + i], p[i]);
    die(o, "%s: %" PRIu64 " bytes differ", what, count);
}

static void model_write(uint64_t off, const unsigned char *p, uint64_t len)
{
    if (off + len > size) {
        memset(model + size, 0, off + len - size);
        size = off + len;
    }
    memcpy(model + off, p, len);
}

static void model_resize(uint64_t n)
{
    if (n > size)
        memset(model + size, 0, n - size);
    size = n;
}

static void open_main(int create)
{
    fd = open(path, O_RDWR | (create ? O_CREAT | O_TRUNC : 0), 0644);
    if (fd < 0) {
        fprintf(stderr, "fsx: open %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static uint64_t rand_len(uint64_t max)
{
    if (max < 1)
        max = 1;
    if (below(8) == 0)
        return 1 + below(max < 16 ? max : 16);
    unsigned bits = 64 - __builtin_clzll(max);
    uint64_t cap = 1ull << below(bits + 1);
    if (cap > max)
        cap = max;
    return 1 + below(cap);
}

static void write_range(uint64_t *off, uint64_t *len)
{
    *off = below(max_size);
    uint64_t room = max_size - *off;
    *len = rand_len(max_len < room ? max_len : room);
    if (below(4) == 0) {
        *off = *off / PAGE * PAGE;
        room = max_size - *off;
        *len = (*len + PAGE - 1) / PAGE * PAGE;
        if (*len > room / PAGE * PAGE)
            *len = room / PAGE * PAGE;
        if (*len == 0)
            *len = room < PAGE ? room : PAGE;
    }
}

/* Read through the main descriptor (pread, or lseek + read) and check. */
static void read_check(const struct op *o, uint64_t off, uint64_t len, int use_read)
{
    uint64_t done = 0;
    if (use_read && lseek(fd, (off_t)off, SEEK_SET) < 0)
        die(o, "lseek: %s", strerror(errno));
    while (done < len) {
        ssize_t n = use_read ? read(fd, got + done, len - done)
                             : pread(fd, got + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die(o, "%s: %s", use_read ? "read" : "pread", strerror(errno));
        if (n == 0)
            break;
        done += (uint64_t)n;
    }
    uint64_t want = off >= size ? 0 : (size - off < len ? size - off : len);
    if (done != want)
        die(o, "read %" PRIu64 " bytes at %#" PRIx64 ", the model has %" PRIu64, done, off, want);
    compare(o, use_read ? "read" : "pread", off, got, done);
}

static void check_size(const struct op *o)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        die(o, "fstat: %s", strerror(errno));
    if ((uint64_t)st.st_size != size)
        die(o, "file size %#" PRIx64 ", model %#" PRIx64, (uint64_t)st.st_size, size);
}

static void verify(const struct op *o)
{
    check_size(o);
    for (uint64_t off = 0; off < size + 1;) {
        uint64_t len = size + 1 - off < (1u << 20) ? size + 1 - off : (1u << 20);
        read_check(o, off, len, 1);
        off += len;
    }
}

static void write_all(const struct op *o, int f, const unsigned char *p, uint64_t len, uint64_t off, int use_write)
{
    if (use_write && lseek(f, (off_t)off, SEEK_SET) < 0)
        die(o, "lseek: %s", strerror(errno));
    for (uint64_t done = 0; done < len;) {
        ssize_t n = use_write ? write(f, p + done, len - done)
                              : pwrite(f, p + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die(o, "%s: %s", use_write ? "write" : "pwrite", n < 0 ? strerror(errno) : "wrote 0");
        done += (uint64_t)n;
    }
}

static unsigned char *map_range(const struct op *o, uint64_t start, uint64_t len, int prot, int *mfd)
{
    /* A descriptor of its own: under the shim, a mapped description is
     * passed through from then on, and the main one should stay managed. */
    *mfd = open(path, O_RDWR);
    if (*mfd < 0)
        die(o, "open for mmap: %s", strerror(errno));
    void *p = mmap(NULL, len, prot, MAP_SHARED, *mfd, (off_t)start);
    if (p == MAP_FAILED)
        die(o, "mmap: %s", strerror(errno));
    return p;
}

static void step(int force_verify)
{
    struct op o = { .n = opno };
    uint64_t total = 0;
    for (int k = 0; k < K_COUNT; k++)
        total += weight[k];
    uint64_t x = below(total);
    int k = 0;
    while (x >= weight[k]) {
        x -= weight[k];
        k++;
    }
    o.kind = force_verify ? K_VERIFY : (enum kind)k;
    uint64_t data = next();
    switch (o.kind) {
    case K_READ:
        o.off = below(size + size / 8 + 2 * PAGE);
        o.len = rand_len(max_len);
        o.flag = (int)below(2);
        record(&o);
        read_check(&o, o.off, o.len, o.flag);
        break;
    case K_WRITE:
        write_range(&o.off, &o.len);
        o.flag = (int)below(2);
        record(&o);
        fill(data, buf, o.len);
        write_all(&o, fd, buf, o.len, o.off, o.flag);
        model_write(o.off, buf, o.len);
        break;
    case K_TRUNC:
        o.off = below(max_size + 1);
        if (below(4) == 0)
            o.off = o.off / PAGE * PAGE;
        o.flag = (int)below(2);
        record(&o);
        if (ftruncate(o.flag ? fd2 : fd, (off_t)o.off) != 0)
            die(&o, "ftruncate: %s", strerror(errno));
        model_resize(o.off);
        break;
    case K_FALLOC:
    case K_PUNCH: {
        if (o.kind == K_FALLOC) {
            write_range(&o.off, &o.len);
            o.flag = (int)below(2); /* keep size */
        } else {
            o.off = below(size ? size : 1);
            o.len = rand_len(2 * max_len);
        }
        record(&o);
        int mode = o.kind == K_PUNCH ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                                     : (o.flag ? FALLOC_FL_KEEP_SIZE : 0);
        if (fallocate(fd, mode, (off_t)o.off, (off_t)o.len) != 0) {
            if (errno == EOPNOTSUPP) {
                unsupported++;
                break;
            }
            die(&o, "fallocate: %s", strerror(errno));
        }
        if (o.kind == K_PUNCH) {
            uint64_t end = o.off + o.len < size ? o.off + o.len : size;
            if (o.off < end)
                memset(model + o.off, 0, end - o.off);
        } else if (mode == 0 && o.off + o.len > size) {
            model_resize(o.off + o.len);
        }
        break;
    }
    case K_SYNC:
        o.flag = (int)below(2);
        record(&o);
        if ((o.flag ? fsync(fd) : fdatasync(fd)) != 0)
            die(&o, "fsync: %s", strerror(errno));
        break;
    case K_REOPEN:
        record(&o);
        if (close(fd) != 0)
            die(&o, "close: %s", strerror(errno));
        open_main(0);
        break;
    case K_BUFWRITE:
        write_range(&o.off, &o.len);
        record(&o);
        fill(data, buf, o.len);
        write_all(&o, fd2, buf, o.len, o.off, 0);
        model_write(o.off, buf, o.len);
        break;
    case K_DIRECTWRITE: {
        uint64_t blocks = max_size / PAGE, first = below(blocks);
        uint64_t most = max_len / PAGE ? max_len / PAGE : 1;
        if (most > blocks - first)
            most = blocks - first;
        o.off = first * PAGE;
        o.len = (1 + below(most)) * PAGE;
        record(&o);
        if (dfd < 0) {
            unsupported++;
            break;
        }
        fill(data, dbuf, o.len);
        write_all(&o, dfd, dbuf, o.len, o.off, 0);
        model_write(o.off, dbuf, o.len);
        break;
    }
    case K_MAPREAD: {
        o.off = below(size ? size : 1);
        o.len = rand_len(size > o.off ? (size - o.off < max_len ? size - o.off : max_len) : 1);
        record(&o);
        if (size == 0)
            break;
        uint64_t start = o.off / PAGE * PAGE, end = (o.off + o.len + PAGE - 1) / PAGE * PAGE;
        int mfd;
        unsigned char *p = map_range(&o, start, end - start, PROT_READ, &mfd);
        compare(&o, "mmap read", o.off, p + (o.off - start), o.len);
        if (end >= (size + PAGE - 1) / PAGE * PAGE && size % PAGE)
            for (uint64_t i = size; i < end; i++)
                if (p[i - start])
                    die(&o, "mmap: byte %#" PRIx64 " past end of file is %#x, not zero", i, p[i - start]);
        munmap(p, end - start);
        close(mfd);
        break;
    }
    case K_MAPWRITE: {
        write_range(&o.off, &o.len);
        o.flag = (int)below(2); /* msync */
        record(&o);
        if (o.off + o.len > size) {
            if (ftruncate(fd2, (off_t)(o.off + o.len)) != 0)
                die(&o, "ftruncate before mmap write: %s", strerror(errno));
            model_resize(o.off + o.len);
        }
        uint64_t start = o.off / PAGE * PAGE, end = (o.off + o.len + PAGE - 1) / PAGE * PAGE;
        int mfd;
        unsigned char *p = map_range(&o, start, end - start, PROT_READ | PROT_WRITE, &mfd);
        fill(data, buf, o.len);
        memcpy(p + (o.off - start), buf, o.len);
        if (o.flag && msync(p, end - start, MS_SYNC) != 0)
            die(&o, "msync: %s", strerror(errno));
        munmap(p, end - start);
        close(mfd);
        model_write(o.off, buf, o.len);
        break;
    }
    case K_VERIFY:
        record(&o);
        verify(&o);
        break;
    default:
        abort();
    }
    counts[o.kind]++;
    opno++;
}

int main(int argc, char **argv)
{
    uint64_t ops = 10000;
    int no_direct = 0, c;
    seed = 1;
    while ((c = getopt(argc, argv, "s:N:S:L:v:DM")) != -1) {
        switch (c) {
        case 's': seed = strtoull(optarg, NULL, 0); break;
        case 'N': ops = strtoull(optarg, NULL, 0); break;
        case 'S': max_size = strtoull(optarg, NULL, 0); break;
        case 'L': max_len = strtoull(optarg, NULL, 0); break;
        case 'v': verify_every = strtoull(optarg, NULL, 0); break;
        case 'D': no_direct = 1; break;
        case 'M': weight[K_MAPREAD] = weight[K_MAPWRITE] = 0; break;
        default:
            fprintf(stderr, "usage: fsx [-s SEED] [-N OPS] [-S MAXSIZE] [-L MAXLEN] [-v VERIFY_EVERY] [-D] [-M] FILE\n");
            return 2;
        }
    }
    if (optind + 1 != argc || max_size < PAGE || max_len < 1) {
        fprintf(stderr, "usage: fsx [-s SEED] [-N OPS] [-S MAXSIZE>=4096] [-L MAXLEN] [-v VERIFY_EVERY] [-D] [-M] FILE\n");
        return 2;
    }
    path = argv[optind];
    rng_state = seed;
    model = calloc(max_size + PAGE, 1);
    buf = malloc(max_size + PAGE);
    got = malloc(max_size + (1u << 20) + PAGE);
    if (!model || !buf || !got || posix_memalign((void **)&dbuf, PAGE, max_size + PAGE) != 0) {
        fprintf(stderr, "fsx: out of memory\n");
        return 1;
    }
    open_main(1);
    fd2 = open(path, O_RDWR);
    if (fd2 < 0) {
        fprintf(stderr, "fsx: open %s (second): %s\n", path, strerror(errno));
        return 1;
    }
    if (no_direct)
        weight[K_DIRECTWRITE] = 0;
    else if ((dfd = open(path, O_WRONLY | O_DIRECT)) < 0)
        fprintf(stderr, "fsx: O_DIRECT unsupported here (%s): direct writes are skipped\n", strerror(errno));
    for (uint64_t i = 0; i < ops; i++)
        step(verify_every && (opno + 1) % verify_every == 0);
    struct op last = { .n = opno, .kind = K_VERIFY };
    record(&last);
    verify(&last);
    if (close(fd) != 0 || close(fd2) != 0 || (dfd >= 0 && close(dfd) != 0)) {
        fprintf(stderr, "fsx: close: %s\n", strerror(errno));
        return 1;
    }
    printf("fsx: ops %" PRIu64 " mismatches 0 seed %" PRIu64 " size %" PRIu64 " unsupported %" PRIu64 " odirect %s;",
           opno, seed, size, unsupported, dfd >= 0 ? "yes" : "no");
    for (int k = 0; k < K_COUNT; k++)
        printf(" %s %" PRIu64, kind_name[k], counts[k]);
    printf("\n");
    return 0;
}
