import os, glob
for p in glob.glob("/tmp/streams-perf/mnt/b/data/*"):
    fd = os.open(p, os.O_RDWR); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)
