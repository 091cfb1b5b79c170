/* share: several processes writing and reading one file at once, each
 * checked byte for byte against a model, for programs under the shim
 * (`ubio run --backend B -- share ...`).
 *
 *   share [-p PROCS] [-n OPS] [-r REGION] [-s SEED] [-a ALIGN] FILE
 *
 * FILE (PROCS * 64 regions of REGION bytes) is first filled with a known
 * pattern. Then PROCS children (forked: each has the shim's state of its
 * own) run OPS operations each at the same time: region k belongs to child
 * k % PROCS, which writes random ranges of its regions (pwrite through its
 * own descriptor, or through the one inherited from the parent), reads random ranges of them back (pread) and compares them
 * with its model, and now and then calls fdatasync. Neighbouring regions
 * share pages (REGION need not be a multiple of the page): each process's
 * write-behind and drop-behind work next to another's writes. With
 * -a ALIGN, regions start on ALIGN bytes (the direct backend: its
 * read-modify-write of a block shared with another process can lose that
 * process's update, as any O_DIRECT user's can; documented).
 *
 * At the end the parent reads the whole file and compares it with the
 * union of the children's models (each child's operations follow from the
 * seed and its number alone, so the parent replays them in memory).
 * Prints "share: procs P ops N mismatches M" and exits 0 only if M is 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? next(s) % n : 0;
}

static size_t procs = 4, region = 12345, align_to = 1;
static long ops = 2000;
static uint64_t seed = 1;
static size_t size;

static size_t region_start(size_t k)
{
	return k * region;
}

/* The operations of child `id` applied to `model` (the whole file's bytes);
 * with fd >= 0 also done on the file and checked (returns mismatches). */
static long run_child(int id, unsigned char *model, int fd, int inherited)
{
	uint64_t s = seed * 1000003 + id, d;
	size_t mine = 64, i;
	long bad = 0, op;
	unsigned char *buf = malloc(region);
	for (op = 0; op < ops; op++) {
		size_t k = (below(&s, mine) * procs) + id;
		size_t start = region_start(k), off = start + below(&s, region);
		size_t len = 1 + below(&s, start + region - off);
		uint64_t kind = below(&s, 10);
		if (kind < 5) { /* write */
			d = next(&s);
			for (i = 0; i < len; i++)
				model[off + i] = (unsigned char)(next(&d) | 1);
			if (fd < 0)
				continue;
			ssize_t n;
			/* Now and then through the descriptor inherited from the
			 * parent: one open file description all children share. */
			n = pwrite(kind == 4 && inherited >= 0 ? inherited : fd, model + off, len, off);
			if (n != (ssize_t)len) {
				fprintf(stderr, "share[%d]: pwrite %zu at %zu: %zd (%s)\n", id, len, off, n, strerror(errno));
				bad++;
			}
		} else if (kind < 9) { /* read and check */
			if (fd < 0)
				continue;
			ssize_t n = pread(fd, buf, len, off);
			if (n != (ssize_t)len || memcmp(buf, model + off, len)) {
				size_t j = 0;
				while (n > 0 && j < (size_t)n && buf[j] == model[off + j])
					j++;
				fprintf(stderr, "share[%d] op %ld: pread %zu at %zu: got %zd bytes, first difference at %zu (got %#x, want %#x)\n",
					id, op, len, off, n, off + j, n > 0 && j < (size_t)n ? buf[j] : 0, model[off + j]);
				bad++;
			}
		} else if (fd >= 0) {
			if (fdatasync(fd)) {
				fprintf(stderr, "share[%d]: fdatasync: %s\n", id, strerror(errno));
				bad++;
			}
		}
	}
	free(buf);
	return bad;
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "p:n:r:s:a:")) != -1) {
		switch (c) {
		case 'p': procs = strtoul(optarg, 0, 0); break;
		case 'n': ops = strtol(optarg, 0, 0); break;
		case 'r': region = strtoul(optarg, 0, 0); break;
		case 's': seed = strtoull(optarg, 0, 0); break;
		case 'a': align_to = strtoul(optarg, 0, 0); break;
		default: fprintf(stderr, "usage: share [-p PROCS] [-n OPS] [-r REGION] [-s SEED] [-a ALIGN] FILE\n"); return 2;
		}
	}
	if (optind != argc - 1 || !procs || !region || !align_to)
		return 2;
	region = (region + align_to - 1) / align_to * align_to;
	size = procs * 64 * region;
	const char *path = argv[optind];
	unsigned char *model = malloc(size), *got = malloc(size);
	uint64_t s = seed;
	for (size_t i = 0; i < size; i++)
		model[i] = (unsigned char)(next(&s) | 1);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || pwrite(fd, model, size, 0) != (ssize_t)size || fsync(fd)) {
		perror(path);
		return 1;
	}
	for (size_t id = 0; id < procs; id++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			int own = open(path, O_RDWR);
			if (own < 0) {
				perror(path);
				_exit(1);
			}
			long bad = run_child(id, model, own, fd);
			if (close(own)) {
				fprintf(stderr, "share[%zu]: close: %s\n", id, strerror(errno));
				bad++;
			}
			_exit(bad ? 1 : 0);
		}
	}
	long bad = 0;
	int status;
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			bad++;
	for (size_t id = 0; id < procs; id++)
		run_child(id, model, -1, -1);
	if (pread(fd, got, size, 0) != (ssize_t)size) {
		perror("pread");
		return 1;
	}
	for (size_t i = 0; i < size; i++) {
		if (got[i] != model[i]) {
			fprintf(stderr, "share: byte %zu (region %zu, child %zu) is %#x, want %#x\n",
				i, i / region, (i / region) % procs, got[i], model[i]);
			bad++;
			break;
		}
	}
	close(fd);
	printf("share: procs %zu ops %ld mismatches %ld seed %llu\n", procs, ops * (long)procs, bad,
	       (unsigned long long)seed);
	return bad ? 1 : 0;
}
