/* One file copied to another by the kernel, in as few calls as it takes
 * (run_programs.rs builds it statically against musl, where no shim can go,
 * and dynamically against glibc, run without the shim):
 *
 *   kcopy cfr IN OUT       copy_file_range(in, NULL, out, NULL, rest): one
 *                          call of up to 2 GiB, positions move when it returns
 *   kcopy sendfile IN OUT  sendfile(out, in, NULL, rest): the same, file to file
 *   kcopy splice IN OUT    splice in -> pipe -> out, 1 MiB at a time, with
 *                          explicit offsets: no position ever moves
 *
 * The calls are made with syscall(), so that a libc without wrappers (older
 * musl) builds it too and no LD_PRELOAD wrapper can see them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int fail(const char *what)
{
	fprintf(stderr, "kcopy: %s: %s\n", what, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: kcopy cfr|sendfile|splice IN OUT\n");
		return 2;
	}
	const char *mode = argv[1];
	int in = open(argv[2], O_RDONLY);
	if (in < 0)
		return fail(argv[2]);
	int out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0)
		return fail(argv[3]);
	struct stat st;
	if (fstat(in, &st) < 0)
		return fail("fstat");
	long long rest = st.st_size;
	if (!strcmp(mode, "cfr") || !strcmp(mode, "sendfile")) {
		int cfr = !strcmp(mode, "cfr");
		while (rest > 0) {
			long n = cfr ? syscall(SYS_copy_file_range, in, NULL, out, NULL, (size_t)rest, 0)
				     : syscall(SYS_sendfile, out, in, NULL, (size_t)rest);
			if (n < 0)
				return fail(mode);
			if (n == 0)
				break;
			rest -= n;
		}
	} else if (!strcmp(mode, "splice")) {
		int p[2];
		if (pipe(p) < 0)
			return fail("pipe");
		/* 1 MiB (the default pipe-max-size): fewer, longer calls. */
		if (fcntl(p[1], F_SETPIPE_SZ, 1 << 20) < 0)
			return fail("F_SETPIPE_SZ");
		long long off_in = 0, off_out = 0;
		while (rest > 0) {
			size_t want = rest < (1 << 20) ? (size_t)rest : (1 << 20);
			long n = syscall(SYS_splice, in, &off_in, p[1], NULL, want, 0);
			if (n < 0)
				return fail("splice in");
			if (n == 0)
				break;
			rest -= n;
			while (n > 0) {
				long m = syscall(SYS_splice, p[0], NULL, out, &off_out, (size_t)n, 0);
				if (m <= 0)
					return fail("splice out");
				n -= m;
			}
		}
	} else {
		fprintf(stderr, "kcopy: unknown mode %s\n", mode);
		return 2;
	}
	if (rest != 0) {
		fprintf(stderr, "kcopy: %lld bytes short\n", rest);
		return 1;
	}
	if (close(out) < 0)
		return fail("close");
	return 0;
}
