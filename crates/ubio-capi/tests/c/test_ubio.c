/*
 * C tests of libubio, compiled by tests/c_api.rs against the installed
 * header and library (pkg-config ubio). One case per run:
 *
 *   test_ubio CASE DIR      DIR: an empty directory on a filesystem whose
 *                           page cache ubio manages (ext4 here)
 *
 * Residency is read with cachestat() on the file itself (ubio_cachestat),
 * and a plain read() of the same file is the control that shows the pages
 * would have stayed without ubio.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ubio.h>

#define MiB (1024ULL * 1024)
#define CHUNK (1 << 20)

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__,   \
                    #cond);                                                    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, " (errno %d, ubio_last_error: %s)\n", errno,      \
                    ubio_last_error());                                        \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static const char *dir;

static char *path_in(const char *name)
{
    char *p;
    CHECK(asprintf(&p, "%s/%s", dir, name) > 0, "asprintf");
    return p;
}

/* The byte at `off` of test file `seed`. */
static unsigned char pattern(uint64_t seed, uint64_t off)
{
    uint64_t x = (off / 8 + 1) * 0x9e3779b97f4a7c15ULL ^ seed;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    return (unsigned char)(x >> (8 * (off % 8)));
}

static void fill(uint64_t seed, uint64_t off, unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(seed, off + i);
}

static int same(uint64_t seed, uint64_t off, const unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(seed, off + i))
            return 0;
    return 1;
}

static struct ubio_cachestat cs(const char *path)
{
    struct ubio_cachestat c;
    CHECK(ubio_cachestat(path, &c) == 0, "cachestat %s", path);
    CHECK(!c.from_mincore, "cachestat() must work here (root, Linux 6.5+)");
    return c;
}

static uint64_t mib(uint64_t pages, uint64_t page) { return pages * page / MiB; }

/* Write `size` bytes with ubio_write; the file's cached and dirty pages are
 * sampled after every chunk. */
static void write_file(const char *path, uint64_t seed, uint64_t size,
                       uint64_t *peak_cached)
{
    struct ubio_options o;
    ubio_options_init(&o);
    o.window = 8 * MiB;
    struct ubio_file *f = ubio_open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &o);
    CHECK(f, "open for writing");
    unsigned char *buf = malloc(CHUNK);
    *peak_cached = 0;
    for (uint64_t off = 0; off < size; off += CHUNK) {
        fill(seed, off, buf, CHUNK);
        CHECK(ubio_write(f, buf, CHUNK) == CHUNK, "write at %llu", (unsigned long long)off);
        struct ubio_cachestat c = cs(path);
        if (c.cached > *peak_cached)
            *peak_cached = c.cached;
    }
    struct ubio_stats st;
    CHECK(ubio_close(f, &st) == 0, "close after writing");
    CHECK(st.bytes_written == size, "bytes_written %llu", (unsigned long long)st.bytes_written);
    CHECK(st.managed, "the page cache of %s is managed (%s)", path, st.reason);
    free(buf);
}

/* The residency contract: a write and a cold read leave (almost) nothing
 * cached and stay within a bound while they run; pages cached before the
 * read stay; a plain read of the same file (the control) leaves it cached. */
static void test_contract(void)
{
    const uint64_t size = 256 * MiB;
    char *path = path_in("contract.dat");
    uint64_t peak;

    write_file(path, 1, size, &peak);
    struct ubio_cachestat after_write = cs(path);
    uint64_t page = after_write.page_size;
    printf("write: peak %llu MiB cached, after close %llu MiB cached, %llu dirty\n",
           (unsigned long long)mib(peak, page),
           (unsigned long long)mib(after_write.cached, page),
           (unsigned long long)after_write.dirty);
    CHECK(mib(peak, page) < 64, "peak cached while writing: %llu MiB", (unsigned long long)mib(peak, page));
    CHECK(after_write.cached * page <= 2 * MiB, "cached after the write: %llu pages",
          (unsigned long long)after_write.cached);
    CHECK(after_write.dirty == 0, "dirty after close: %llu", (unsigned long long)after_write.dirty);

    /* Cold read; the first 4 MiB are cached beforehand by another reader. */
    CHECK(ubio_evict(path, UBIO_EVICT_SYNC, NULL) == 0, "evict");
    CHECK(cs(path).cached * page <= MiB, "cold before the read");
    unsigned char *buf = malloc(CHUNK);
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "open %s", path);
    for (uint64_t off = 0; off < 4 * MiB; off += CHUNK)
        CHECK(pread(fd, buf, CHUNK, (off_t)off) == CHUNK, "precache");
    close(fd);
    uint64_t precached = cs(path).cached;

    struct ubio_file *f = ubio_open(path, O_RDONLY, 0, NULL);
    CHECK(f, "open for reading");
    uint64_t total = 0, peak_read = 0;
    ssize_t n;
    while ((n = ubio_read(f, buf, CHUNK)) > 0) {
        CHECK(same(1, total, buf, (size_t)n), "data at %llu", (unsigned long long)total);
        total += (uint64_t)n;
        uint64_t c = cs(path).cached;
        if (c > peak_read)
            peak_read = c;
    }
    CHECK(n == 0 && total == size, "read %llu of %llu", (unsigned long long)total,
          (unsigned long long)size);
    struct ubio_stats st;
    CHECK(ubio_close(f, &st) == 0, "close after reading");
    struct ubio_cachestat after_read = cs(path);
    printf("read: peak %llu MiB cached, after close %llu pages cached (%llu precached), "
           "%llu dropped, %llu preserved\n",
           (unsigned long long)mib(peak_read, page), (unsigned long long)after_read.cached,
           (unsigned long long)precached, (unsigned long long)st.pages_dropped,
           (unsigned long long)st.pages_preserved);
    CHECK(mib(peak_read, page) < 64, "peak cached while reading: %llu MiB",
          (unsigned long long)mib(peak_read, page));
    /* (The VM reclaims cold pages by itself now and then: allow a few.) */
    CHECK(after_read.cached + precached / 64 >= precached, "precached pages kept: %llu of %llu",
          (unsigned long long)after_read.cached, (unsigned long long)precached);
    CHECK(after_read.cached <= precached + MiB / page, "cached after the read: %llu pages",
          (unsigned long long)after_read.cached);
    CHECK(st.pages_dropped > 0 && st.bytes_read == size, "stats: %llu dropped",
          (unsigned long long)st.pages_dropped);

    /* Control: plain read() of the same cold file leaves it cached. */
    CHECK(ubio_evict(path, 0, NULL) == 0, "evict");
    fd = open(path, O_RDONLY);
    while ((n = read(fd, buf, CHUNK)) > 0)
        ;
    close(fd);
    uint64_t control = cs(path).cached;
    printf("control: plain read left %llu MiB cached\n", (unsigned long long)mib(control, page));
    CHECK(control * page >= size / 2, "control: plain read left only %llu pages",
          (unsigned long long)control);
    CHECK(ubio_evict(path, 0, NULL) == 0, "evict");
    free(buf);
    unlink(path);
    free(path);
}

/* Errors: errno as the kernel says, and a message naming the file. */
static void test_errors(void)
{
    char *missing = path_in("missing/nothing.dat");
    errno = 0;
    CHECK(ubio_open(missing, O_RDONLY, 0, NULL) == NULL, "open of a missing file");
    CHECK(errno == ENOENT, "errno %d", errno);
    CHECK(strstr(ubio_last_error(), missing) && strstr(ubio_last_error(), "open"),
          "message names the operation and file");

    /* The message is per thread: another thread's error does not show here. */
    char *ro = path_in("readonly.dat");
    int fd = open(ro, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "abc", 3) == 3, "create %s", ro);
    close(fd);
    struct ubio_file *f = ubio_open(ro, O_RDONLY, 0, NULL);
    CHECK(f, "open %s", ro);
    errno = 0;
    CHECK(ubio_write(f, "x", 1) == -1, "write to a read-only handle");
    CHECK(errno == EBADF, "errno %d", errno);
    CHECK(strstr(ubio_last_error(), ro), "message names the file: %s", ubio_last_error());
    char c;
    errno = 0;
    CHECK(ubio_pread(f, &c, 1, -1) == -1 && errno == EINVAL, "negative offset");
    CHECK(ubio_seek(f, 0, 42) == -1 && errno == EINVAL, "bad whence");
    CHECK(ubio_read(f, NULL, 1) == -1 && errno == EINVAL, "NULL buffer");
    CHECK(ubio_pread(f, &c, 1, 2) == 1 && c == 'c', "handle still works");
    CHECK(ubio_close(f, NULL) == 0, "close");

    struct ubio_options o;
    ubio_options_init(&o);
    o.backend = 99;
    errno = 0;
    CHECK(ubio_open(ro, O_RDONLY, 0, &o) == NULL && errno == EINVAL, "unknown backend");
    CHECK(strstr(ubio_last_error(), "backend"), "message: %s", ubio_last_error());
    errno = 0;
    CHECK(ubio_open(NULL, O_RDONLY, 0, NULL) == NULL && errno == EINVAL, "NULL path");
    errno = 0;
    CHECK(ubio_wrap_fd(-1, NULL) == NULL && errno == EBADF, "bad descriptor");
    errno = 0;
    CHECK(ubio_copy(missing, ro, NULL) == -1 && errno == ENOENT, "copy from a missing file");
    CHECK(strstr(ubio_last_error(), missing), "message: %s", ubio_last_error());
    struct ubio_cachestat st;
    errno = 0;
    CHECK(ubio_cachestat(missing, &st) == -1 && errno == ENOENT, "cachestat of a missing file");
    struct ubio_probe p;
    errno = 0;
    CHECK(ubio_probe(missing, &p) == -1 && errno == ENOENT, "probe of a missing file");
    CHECK(ubio_close(NULL, NULL) == 0, "close(NULL)");
    unlink(ro);
    free(ro);
    free(missing);
}

/* Threads sharing one handle: pwrite of disjoint blocks, then pread, then
 * ubio_read whose position moves atomically (every block read exactly once). */
#define THREADS 4
#define BLOCKS 64
static struct ubio_file *shared;
static int seen[BLOCKS];
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static void *pwriter(void *arg)
{
    long t = (long)arg;
    unsigned char *buf = malloc(CHUNK);
    for (long b = t; b < BLOCKS; b += THREADS) {
        fill(7, (uint64_t)b * CHUNK, buf, CHUNK);
        CHECK(ubio_pwrite(shared, buf, CHUNK, (off_t)b * CHUNK) == CHUNK, "pwrite %ld", b);
    }
    free(buf);
    return NULL;
}

static void *preader(void *arg)
{
    long t = (long)arg;
    unsigned char *buf = malloc(CHUNK);
    for (long b = BLOCKS - 1 - t; b >= 0; b -= THREADS) {
        CHECK(ubio_pread(shared, buf, CHUNK, (off_t)b * CHUNK) == CHUNK, "pread %ld", b);
        CHECK(same(7, (uint64_t)b * CHUNK, buf, CHUNK), "data of block %ld", b);
    }
    free(buf);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    unsigned char *buf = malloc(CHUNK);
    ssize_t n;
    /* Reads of whole blocks from a position that moves by whole blocks. */
    while ((n = ubio_read(shared, buf, CHUNK)) > 0) {
        CHECK(n == CHUNK, "short read %zd", n);
        long b = -1;
        for (long i = 0; i < BLOCKS; i++)
            if (same(7, (uint64_t)i * CHUNK, buf, 64)) {
                b = i;
                break;
            }
        CHECK(b >= 0 && same(7, (uint64_t)b * CHUNK, buf, CHUNK), "a whole block");
        pthread_mutex_lock(&seen_lock);
        seen[b]++;
        pthread_mutex_unlock(&seen_lock);
    }
    CHECK(n == 0, "read error");
    free(buf);
    return NULL;
}

static void run_threads(void *(*fn)(void *))
{
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, fn, (void *)t) == 0, "pthread_create");
    for (long t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
}

static void test_threads(void)
{
    char *path = path_in("threads.dat");
    shared = ubio_open(path, O_RDWR | O_CREAT | O_TRUNC, 0644, NULL);
    CHECK(shared, "open");
    run_threads(pwriter);
    CHECK(ubio_flush(shared) == 0, "flush");
    run_threads(preader);
    run_threads(reader);
    for (long b = 0; b < BLOCKS; b++)
        CHECK(seen[b] == 1, "block %ld read %d times", b, seen[b]);
    struct ubio_stats st;
    CHECK(ubio_stats(shared, &st) == 0, "stats");
    CHECK(st.bytes_written == (uint64_t)BLOCKS * CHUNK, "bytes_written %llu",
          (unsigned long long)st.bytes_written);
    CHECK(st.bytes_read == 2ULL * BLOCKS * CHUNK, "bytes_read %llu",
          (unsigned long long)st.bytes_read);
    CHECK(ubio_close(shared, NULL) == 0, "close");
    struct ubio_cachestat c = cs(path);
    CHECK(c.cached * c.page_size <= 2 * MiB && c.dirty == 0, "cached after close: %llu pages",
          (unsigned long long)c.cached);
    unlink(path);
    free(path);
}

/* A descriptor the caller opened stays the caller's: usable, fsync-able,
 * its offset moved by the handle's writes as by write(2). */
static void test_wrap_fd(void)
{
    char *path = path_in("wrapped.dat");
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0, "open");
    struct ubio_file *f = ubio_wrap_fd(fd, NULL);
    CHECK(f, "wrap");
    CHECK(ubio_fd(f) != fd && ubio_fd(f) >= 0, "a duplicate");
    unsigned char *buf = malloc(CHUNK);
    for (int i = 0; i < 8; i++) {
        fill(3, (uint64_t)i * CHUNK, buf, CHUNK);
        CHECK(ubio_write(f, buf, CHUNK) == CHUNK, "write");
    }
    CHECK(ubio_close(f, NULL) == 0, "close the handle");
    CHECK(lseek(fd, 0, SEEK_CUR) == 8 * CHUNK, "the caller's offset moved with the writes");
    CHECK(fsync(fd) == 0, "the caller's descriptor is still open");
    CHECK(pread(fd, buf, CHUNK, 7 * CHUNK) == CHUNK && same(3, 7 * CHUNK, buf, CHUNK), "data");
    close(fd);
    struct ubio_cachestat c = cs(path);
    CHECK(c.cached <= 2 * CHUNK / c.page_size, "only the control pread's pages: %llu",
          (unsigned long long)c.cached);
    free(buf);
    unlink(path);
    free(path);
}

/* Run `script` with /bin/sh, its stdin and stdout the descriptor `fd`
 * (inherited: the child shares the open file description and its offset). */
static void child_on(int fd, const char *script)
{
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0)
            _exit(126);
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "child %s: status %d", script, status);
}

static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0, "open %s", path);
    struct stat st;
    CHECK(fstat(fd, &st) == 0, "fstat");
    char *buf = malloc((size_t)st.st_size + 1);
    CHECK(pread(fd, buf, (size_t)st.st_size, 0) == st.st_size, "read %s", path);
    buf[st.st_size] = 0;
    *len = (size_t)st.st_size;
    close(fd);
    return buf;
}

/* A wrapped descriptor keeps POSIX semantics (issue 25), with every backend
 * that runs here: ubio_read/ubio_write/ubio_seek use and move the caller's
 * offset, the caller's own read/write/lseek and a child writing through an
 * inherited copy ("header / from child / tail") are seen by the handle,
 * ubio_pread/ubio_pwrite move nothing, O_APPEND appends. */
static void test_descriptor_offset(void)
{
    static const char want[] = "HEADer\nfrom child\ntail\nraw\nend\n";
    for (int backend = UBIO_BACKEND_AUTO; backend <= UBIO_BACKEND_BUFFERED; backend++) {
        const char *name = ubio_backend_name(backend);
        char *path = path_in("offset.dat");
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK(fd >= 0, "open");
        struct ubio_options o;
        ubio_options_init(&o);
        o.backend = backend;
        struct ubio_file *f = ubio_wrap_fd(fd, &o);
        if (!f && errno == EOPNOTSUPP) {
            printf("%s: refused here: %s\n", name, ubio_last_error());
            close(fd);
            unlink(path);
            free(path);
            continue;
        }
        CHECK(f, "wrap with %s", name);
        CHECK(ubio_write(f, "header\n", 7) == 7, "%s: write", name);
        CHECK(lseek(fd, 0, SEEK_CUR) == 7, "%s: the caller's offset after ubio_write", name);
        child_on(fd, "echo from child");
        CHECK(ubio_seek(f, 0, SEEK_CUR) == 18, "%s: the handle's offset after the child", name);
        CHECK(ubio_write(f, "tail\n", 5) == 5, "%s: write after the child", name);
        CHECK(write(fd, "raw\n", 4) == 4, "%s: the caller's write", name);
        CHECK(ubio_write(f, "end\n", 4) == 4, "%s: write after the caller's", name);
        CHECK(ubio_pwrite(f, "HEAD", 4, 0) == 4, "%s: pwrite", name);
        char four[4];
        CHECK(ubio_pread(f, four, 4, 7) == 4 && !memcmp(four, "from", 4), "%s: pread", name);
        CHECK(lseek(fd, 0, SEEK_CUR) == 31, "%s: positional calls moved the offset", name);
        CHECK(ubio_flush(f) == 0, "%s: flush", name);
        size_t len;
        char *got = slurp(path, &len);
        CHECK(len == sizeof want - 1 && !memcmp(got, want, len), "%s: contents %s", name, got);
        free(got);

        /* Reads: the handle, the caller, a child, the handle again. */
        CHECK(lseek(fd, 0, SEEK_SET) == 0, "lseek");
        char buf[16] = {0};
        CHECK(ubio_read(f, buf, 4) == 4 && !memcmp(buf, "HEAD", 4), "%s: read", name);
        CHECK(read(fd, buf, 3) == 3 && !memcmp(buf, "er\n", 3), "%s: the caller's read", name);
        CHECK(ubio_read(f, buf, 5) == 5 && !memcmp(buf, "from ", 5), "%s: read after the caller's", name);
        child_on(fd, "read line; test \"$line\" = child");
        CHECK(ubio_read(f, buf, 5) == 5 && !memcmp(buf, "tail\n", 5), "%s: read after the child's", name);
        CHECK(ubio_seek(f, 0, SEEK_END) == 31 && lseek(fd, 0, SEEK_CUR) == 31, "%s: seek end", name);
        CHECK(ubio_read(f, buf, 4) == 0, "%s: end of file", name);
        CHECK(ubio_close(f, NULL) == 0, "%s: close", name);
        CHECK(lseek(fd, 0, SEEK_CUR) == 31, "%s: offset after close", name);
        close(fd);

        /* O_APPEND: to the end whatever the offset, which then stays there. */
        fd = open(path, O_RDWR | O_APPEND);
        CHECK(fd >= 0, "open append");
        f = ubio_wrap_fd(fd, &o);
        CHECK(f, "wrap append");
        CHECK(ubio_write(f, "a1\n", 3) == 3 && lseek(fd, 0, SEEK_CUR) == 34, "%s: append", name);
        child_on(fd, "echo a2");
        CHECK(ubio_seek(f, 2, SEEK_SET) == 2, "seek");
        CHECK(ubio_write(f, "a3\n", 3) == 3 && ubio_seek(f, 0, SEEK_CUR) == 40, "%s: append after seek", name);
        CHECK(ubio_pwrite(f, "a4\n", 3, 0) == 3 && lseek(fd, 0, SEEK_CUR) == 40, "%s: pwrite appends, offset stays", name);
        CHECK(ubio_close(f, NULL) == 0, "%s: close append", name);
        close(fd);
        got = slurp(path, &len);
        CHECK(len == 43 && !memcmp(got + 31, "a1\na2\na3\na4\n", 12), "%s: appended %s", name, got);
        free(got);
        printf("%s: ok\n", name);
        unlink(path);
        free(path);
    }
}

/* Vectored and positional forms, seek, copy and probe. */
static void test_vectored_copy_probe(void)
{
    char *path = path_in("vec.dat"), *copy = path_in("copy.dat");
    struct ubio_file *f = ubio_open(path, O_RDWR | O_CREAT | O_TRUNC, 0640, NULL);
    CHECK(f, "open");
    char a[] = "hello, ", b[] = "vectored ", c[] = "world";
    struct iovec w[3] = {{a, 7}, {b, 9}, {c, 5}};
    CHECK(ubio_writev(f, w, 3) == 21, "writev");
    CHECK(ubio_pwritev(f, w + 2, 1, 100) == 5, "pwritev");
    CHECK(ubio_seek(f, 0, SEEK_END) == 105, "seek end");
    CHECK(ubio_seek(f, 7, SEEK_SET) == 7, "seek set");
    char x[9] = {0}, y[5] = {0};
    struct iovec r[2] = {{x, 9}, {y, 5}};
    CHECK(ubio_readv(f, r, 2) == 14 && !memcmp(x, "vectored ", 9) && !memcmp(y, "world", 5), "readv");
    CHECK(ubio_seek(f, 0, SEEK_CUR) == 21, "position after readv");
    memset(y, 0, 5);
    CHECK(ubio_preadv(f, r + 1, 1, 100) == 5 && !memcmp(y, "world", 5), "preadv");
    CHECK(ubio_sync(f, true) == 0, "fdatasync");
    CHECK(ubio_close(f, NULL) == 0, "close");

    CHECK(ubio_copy(path, copy, NULL) == 105, "copy");
    struct stat s;
    CHECK(stat(copy, &s) == 0 && (s.st_mode & 0777) == 0640 && s.st_size == 105, "copy's mode and size");
    f = ubio_open(copy, O_RDONLY, 0, NULL);
    char all[105];
    CHECK(ubio_pread(f, all, 105, 0) == 105 && !memcmp(all, "hello, vectored world", 21) &&
              !memcmp(all + 100, "world", 5), "copied data");
    CHECK(ubio_close(f, NULL) == 0, "close");

    struct ubio_probe p;
    CHECK(ubio_probe(dir, &p) == 0, "probe");
    CHECK(strlen(p.fs_type) > 0 && ubio_backend_name(p.auto_backend), "fs %s", p.fs_type);
    printf("probe %s: fs %s, auto %s (%s)\n", dir, p.fs_type, ubio_backend_name(p.auto_backend),
           p.auto_reason);
    char *json = ubio_probe_json(path);
    CHECK(json && strstr(json, "\"auto\""), "probe json");
    ubio_string_free(json);
    CHECK(strcmp(ubio_version(), "") != 0, "version");
    unlink(path);
    unlink(copy);
    free(path);
    free(copy);
}

/* A sampler thread: the peak cached and dirty + writeback pages of `path`,
 * every millisecond until stopped (a single long call cannot be sampled
 * from the calling thread). */
struct sampler {
    const char *path;
    volatile int stop;
    uint64_t samples, cached, dirty_wb;
    pthread_t th;
};

static void *sample_loop(void *arg)
{
    struct sampler *s = arg;
    for (;;) {
        int last = s->stop;
        struct ubio_cachestat c = cs(s->path);
        s->samples++;
        if (c.cached > s->cached)
            s->cached = c.cached;
        if (c.dirty + c.writeback > s->dirty_wb)
            s->dirty_wb = c.dirty + c.writeback;
        if (last)
            return NULL;
        usleep(1000);
    }
}

static void sampler_start(struct sampler *s, const char *path)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    CHECK(pthread_create(&s->th, NULL, sample_loop, s) == 0, "pthread_create");
}

static void sampler_stop(struct sampler *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->th, NULL);
}

/* One long call keeps the contract: a single ubio_write / ubio_pwritev of
 * 512 MiB with a 16 MiB window keeps dirty + writeback within two windows
 * and a MiB, a single ubio_read / ubio_preadv keeps under 64 MiB cached;
 * each moves all of it (the read, 1 MiB longer than the file, is short
 * only at its end) and leaves the offset where write(2) or read(2) would.
 * A single plain read() of the cold file is the control. */
static void test_long_calls(void)
{
    const size_t size = 512 * MiB, window = 16 * MiB, extra = MiB;
    char *path = path_in("long.dat");
    unsigned char *data = malloc(size), *buf = malloc(size + extra);
    CHECK(data && buf, "malloc");
    fill(11, 0, data, size);
    struct ubio_options o;
    ubio_options_init(&o);
    o.window = window;
    struct sampler s;
    for (int positional = 0; positional < 2; positional++) {
        const char *how = positional ? "ubio_pwritev" : "ubio_write";
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        CHECK(fd >= 0, "create %s", path);
        close(fd);
        struct ubio_file *f = ubio_open(path, O_WRONLY, 0, &o);
        CHECK(f, "open for writing");
        sampler_start(&s, path);
        ssize_t n;
        if (positional) {
            struct iovec iov[2] = {{data, size / 3 + 123}, {data + size / 3 + 123, size - size / 3 - 123}};
            n = ubio_pwritev(f, iov, 2, 0);
        } else {
            n = ubio_write(f, data, size);
        }
        CHECK(n == (ssize_t)size, "%s wrote %zd of %zu", how, n, size);
        off_t pos = lseek(ubio_fd(f), 0, SEEK_CUR);
        CHECK(pos == (positional ? 0 : (off_t)size), "%s: offset %lld after", how, (long long)pos);
        CHECK(ubio_close(f, NULL) == 0, "close after writing");
        sampler_stop(&s);
        struct ubio_cachestat after = cs(path);
        uint64_t page = after.page_size;
        printf("%s of 512 MiB: peak %llu MiB dirty+writeback, %llu MiB cached over %llu samples\n",
               how, (unsigned long long)mib(s.dirty_wb, page), (unsigned long long)mib(s.cached, page),
               (unsigned long long)s.samples);
        CHECK(s.samples > 10, "%s: too few samples (%llu)", how, (unsigned long long)s.samples);
        CHECK(s.dirty_wb * page <= 2 * window + MiB, "%s: dirty+writeback peak %llu pages", how,
              (unsigned long long)s.dirty_wb);
        CHECK(after.dirty == 0, "%s: dirty after close", how);
    }
    for (int positional = 0; positional < 3; positional++) {
        const char *how = positional == 2 ? "read (control)" : positional ? "ubio_preadv" : "ubio_read";
        CHECK(ubio_evict(path, UBIO_EVICT_SYNC, NULL) == 0, "evict");
        memset(buf, 0, size + extra);
        struct ubio_file *f = ubio_open(path, O_RDONLY, 0, NULL);
        CHECK(f, "open for reading");
        sampler_start(&s, path);
        ssize_t n;
        off_t want_pos = (off_t)size;
        if (positional == 2) {
            n = read(ubio_fd(f), buf, size + extra);
        } else if (positional) {
            struct iovec iov[2] = {{buf, size / 2 - 77}, {buf + size / 2 - 77, size / 2 + 77}};
            n = ubio_preadv(f, iov, 2, 0);
            want_pos = 0;
        } else {
            n = ubio_read(f, buf, size + extra);
        }
        sampler_stop(&s);
        CHECK(n == (ssize_t)size, "%s read %zd of %zu", how, n, size);
        CHECK(memcmp(buf, data, size) == 0, "%s: the data", how);
        off_t pos = lseek(ubio_fd(f), 0, SEEK_CUR);
        CHECK(pos == want_pos, "%s: offset %lld after", how, (long long)pos);
        CHECK(ubio_close(f, NULL) == 0, "close after reading");
        uint64_t page = cs(path).page_size;
        printf("%s of 512 MiB: peak %llu MiB cached over %llu samples\n", how,
               (unsigned long long)mib(s.cached, page), (unsigned long long)s.samples);
        if (positional == 2) {
            CHECK(s.cached * page > size / 2, "control: a plain read cached only %llu pages",
                  (unsigned long long)s.cached);
        } else {
            CHECK(s.samples > 10, "%s: too few samples (%llu)", how, (unsigned long long)s.samples);
            CHECK(mib(s.cached, page) <= 64, "%s: peak %llu MiB cached", how,
                  (unsigned long long)mib(s.cached, page));
            CHECK(cs(path).cached == 0, "%s: pages left after close", how);
        }
    }
    CHECK(ubio_evict(path, 0, NULL) == 0, "evict");
    free(data);
    free(buf);
    unlink(path);
    free(path);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        {"contract", test_contract},   {"errors", test_errors},
        {"threads", test_threads},     {"wrap_fd", test_wrap_fd},
        {"vectored_copy_probe", test_vectored_copy_probe},
        {"descriptor_offset", test_descriptor_offset},
        {"long_calls", test_long_calls},
    };
    if (argc != 3) {
        fprintf(stderr, "usage: %s CASE DIR\n", argv[0]);
        return 2;
    }
    dir = argv[2];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(cases[i].name, argv[1]) == 0) {
            cases[i].fn();
            printf("ok %s\n", argv[1]);
            return 0;
        }
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
}
