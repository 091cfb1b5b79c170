/* The cost experiment's loop (bench/policy.py): `loop4k read FILE` reads
 * FILE with 4 KiB read()s; `loop4k write FILE BYTES` writes BYTES with
 * 4 KiB write()s, then fsync. Built statically against musl, so no
 * LD_PRELOAD shim can enter it: what manages it is ubio's engine alone. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static char buf[4096];
	if (argc >= 3 && !strcmp(argv[1], "read")) {
		int fd = open(argv[2], O_RDONLY);
		ssize_t n;
		if (fd < 0)
			return perror(argv[2]), 1;
		while ((n = read(fd, buf, sizeof buf)) > 0)
			;
		return n < 0 ? (perror("read"), 1) : 0;
	}
	if (argc >= 4 && !strcmp(argv[1], "write")) {
		long long left = atoll(argv[3]);
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			return perror(argv[2]), 1;
		memset(buf, 'x', sizeof buf);
		for (; left > 0; left -= sizeof buf)
			if (write(fd, buf, sizeof buf) != sizeof buf)
				return perror("write"), 1;
		return fsync(fd) || close(fd) ? (perror("fsync"), 1) : 0;
	}
	fprintf(stderr, "usage: loop4k read FILE | loop4k write FILE BYTES\n");
	return 2;
}
