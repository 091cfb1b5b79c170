/* stdin to stdout with fread/fwrite, 64 KiB at a time: built statically
 * against musl by run_programs.rs (no shim can go into it). */
#include <stdio.h>

int main(void)
{
	static char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
		if (fwrite(buf, 1, n, stdout) != n)
			return 1;
	return ferror(stdin) || fclose(stdout) ? 1 : 0;
}
