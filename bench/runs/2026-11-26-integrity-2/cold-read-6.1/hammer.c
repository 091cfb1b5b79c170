/* mincore() the whole of FILE in a loop until SIGTERM, as the residency
 * sampler's fallback does before Linux 6.5: each call takes and drops a
 * reference on every cached folio of the file. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
static volatile sig_atomic_t stop;
static void on_term(int s) { (void)s; stop = 1; }
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) { perror(argv[1]); return 1; }
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = (st.st_size + page - 1) / page;
    void *m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    unsigned char *vec = malloc(pages);
    signal(SIGTERM, on_term);
    unsigned long calls = 0;
    while (!stop) {
        if (mincore(m, st.st_size, vec)) { perror("mincore"); return 1; }
        calls++;
    }
    fprintf(stderr, "hammer: %lu mincore calls over %zu pages\n", calls, pages);
    return 0;
}
