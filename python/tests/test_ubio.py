"""Tests of the ubio Python package (run by tests/pytest.rs from cargo test).

Residency is read with cachestat() on the file itself (ubio.stat); a read
with the builtin open() is the control that shows the pages would stay.
UBIO_PY_TEST_DIR: a directory on a filesystem whose page cache ubio manages.
"""

import builtins
import csv
import errno
import hashlib
import io
import json
import os
import shutil
import subprocess
import threading

import pytest

import ubio

MiB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def d(tmp_path_factory):
    base = os.environ.get("UBIO_PY_TEST_DIR")
    if base is None:
        return tmp_path_factory.mktemp("ubio")
    path = os.path.join(base, f"t{threading.get_ident()}-{os.urandom(4).hex()}")
    os.mkdir(path)
    yield path
    shutil.rmtree(path)


def p(d, name):
    return os.path.join(str(d), name)


def block(i):
    """1 MiB of data that differs per block (cheap to make)."""
    head = i.to_bytes(8, "little") * 512
    return (head + bytes(range(256)) * 16) * (MiB // (4096 + 4096))


def write_blocks(path, n, sample=None):
    """Write n blocks with ubio; sample(path) after each. Returns the sha256."""
    h = hashlib.sha256()
    with ubio.open(path, "wb", window=8 * MiB) as f:
        for i in range(n):
            b = block(i)
            h.update(b)
            f.write(b)
            if sample:
                sample()
    return h.hexdigest()


class Peak:
    """The largest cached-page count of a file seen."""

    def __init__(self, path):
        self.path, self.pages = path, 0

    def __call__(self):
        self.pages = max(self.pages, ubio.stat(self.path)["cached"])

    @property
    def mib(self):
        return self.pages * PAGE / MiB


def cached(path):
    s = ubio.stat(path)
    assert s["source"] == "cachestat", s["note"]
    return s["cached"]


# The residency contract


def test_write_then_cold_read_leave_nothing_cached_and_keep_precached_pages(d):
    path = p(d, "contract.dat")
    peak = Peak(path)
    digest = write_blocks(path, 256, peak)
    after = ubio.stat(path)
    print(f"write: peak {peak.mib:.0f} MiB, after close {after['cached']} pages, {after['dirty']} dirty")
    assert peak.mib < 64
    assert after["cached"] * PAGE <= 2 * MiB and after["dirty"] == 0

    ubio.evict(path, sync=True)
    assert cached(path) * PAGE <= MiB
    with open(path, "rb") as other:  # another reader caches the first 4 MiB
        other.read(4 * MiB)
    precached = cached(path)

    peak = Peak(path)
    h = hashlib.sha256()
    with ubio.open(path, "rb") as f:
        while chunk := f.read(MiB):
            h.update(chunk)
            peak()
        stats = f.raw.stats()
    final = f.raw.stats()
    left = cached(path)
    print(f"read: peak {peak.mib:.0f} MiB, after close {left} pages ({precached} precached), {final}")
    assert h.hexdigest() == digest
    assert peak.mib < 64
    assert left + precached // 64 >= precached  # kept (the VM reclaims a few now and then)
    assert left <= precached + MiB // PAGE
    assert final["pages_dropped"] > 0 and final["bytes_read"] == 256 * MiB
    assert stats["managed"] and stats["backend"] in ubio.BACKENDS

    # Control: the builtin open() leaves the same cold file cached.
    ubio.evict(path)
    with open(path, "rb") as f:
        while f.read(MiB):
            pass
    control = cached(path)
    print(f"control: builtin open() left {control * PAGE / MiB:.0f} MiB cached")
    assert control * PAGE >= 128 * MiB
    ubio.evict(path)


def test_1gib_read_through_bufferedreader_stays_within_bounds(d):
    path = p(d, "big.dat")
    digest = write_blocks(path, 1024)
    ubio.evict(path, sync=True)
    peak = Peak(path)
    stop = threading.Event()

    def sampler():  # also between the reads, every 5 ms
        while not stop.wait(0.005):
            peak()

    t = threading.Thread(target=sampler)
    t.start()
    h = hashlib.sha256()
    buf = bytearray(256 * 1024)
    try:
        with io.BufferedReader(ubio.FileIO(path), buffer_size=MiB) as f:
            while n := f.readinto(buf):
                h.update(memoryview(buf)[:n])
                peak()
            stats = f.raw
    finally:
        stop.set()
        t.join()
    left = cached(path)
    print(f"1 GiB: peak {peak.mib:.0f} MiB cached, after close {left} pages, {stats.stats()}")
    assert h.hexdigest() == digest
    assert peak.mib < 64
    assert left == 0
    os.unlink(path)


# File-object behaviour


def test_readinto_seek_tell_and_modes(d):
    path = p(d, "f.dat")
    data = bytes(range(256)) * 64
    with ubio.open(path, "wb", buffering=0) as f:
        assert isinstance(f, ubio.FileIO) and isinstance(f, io.RawIOBase)
        assert f.writable() and not f.readable() and f.seekable()
        assert f.mode == "wb" and f.name == path
        assert f.write(memoryview(data)) == len(data)
        assert f.tell() == len(data)
    with ubio.open(path, "rb", buffering=0) as f:
        b = bytearray(100)
        assert f.readinto(b) == 100 and b == data[:100]
        assert f.tell() == 100
        assert f.seek(-10, os.SEEK_END) == len(data) - 10
        assert f.read() == data[-10:]
        assert f.read(5) == b""
        assert f.seek(3) == 3 and f.seek(4, os.SEEK_CUR) == 7
        assert f.read(3) == data[7:10]
        assert f.readall() == data[10:]
        f.seek(0)
        assert f.read() == data
    with ubio.open(path, "ab") as f:
        f.write(b"tail")
    with ubio.open(path, "r+b") as f:
        assert f.read(2) == data[:2]
        f.seek(0)
        f.write(b"XY")
    with ubio.open(path, "rb") as f:
        assert f.read() == b"XY" + data[2:] + b"tail"
    with pytest.raises(FileExistsError):
        ubio.open(path, "xb")
    with pytest.raises(ValueError):
        ubio.open(path, "rw")
    with pytest.raises(ValueError):
        ubio.open(path, "r", buffering=0)


def test_text_iteration_csv_and_json(d):
    path = p(d, "t.csv")
    with ubio.open(path, "w", newline="") as f:
        assert isinstance(f, io.TextIOWrapper) and f.mode == "w"
        w = csv.writer(f)
        for i in range(1000):
            w.writerow([i, f"row {i}", "é"])
    with ubio.open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert len(rows) == 1000 and rows[999] == ["999", "row 999", "é"]
    with ubio.open(path, encoding="utf-8") as f:
        lines = [line for line in f]
    assert lines[0] == "0,row 0,é\n" and len(lines) == 1000
    with ubio.open(path, "rb") as f:
        assert sum(1 for _ in f) == 1000
        assert f.raw.stats()["bytes_read"] == os.path.getsize(path)

    jpath = p(d, "t.json")
    doc = {"a": list(range(10000)), "b": {"c": "ü" * 1000}}
    with ubio.open(jpath, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    with ubio.open(jpath, encoding="utf-8") as f:
        assert json.load(f) == doc


def test_copyfileobj_and_file_digest(d):
    src, dst = p(d, "src"), p(d, "dst")
    digest = write_blocks(src, 8)
    with ubio.open(src, "rb") as fi, ubio.open(dst, "wb") as fo:
        shutil.copyfileobj(fi, fo, MiB)
    with ubio.open(dst, "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == digest
    with open(dst, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == digest


def test_context_manager_and_closed_file_errors(d):
    path = p(d, "c.dat")
    with ubio.open(path, "wb") as f:
        f.write(b"abc")
    assert f.closed and f.raw.closed
    for op in (lambda: f.write(b"x"), f.flush, f.tell, lambda: f.seek(0)):
        with pytest.raises(ValueError):
            op()
    raw = ubio.FileIO(path)
    raw.close()
    raw.close()  # a second close does nothing
    assert raw.closed
    for op in (lambda: raw.read(1), lambda: raw.readinto(bytearray(1)), raw.tell, raw.fileno, raw.readable):
        with pytest.raises(ValueError):
            op()
    assert raw.stats()["bytes_read"] == 0  # the final statistics stay readable


# The descriptor's offset (issue 25): a ubio file is the descriptor it wraps


def ubio_or_skip(path, mode, backend, **kw):
    """ubio.open with `backend`; pytest.skip where this filesystem refuses it."""
    try:
        return ubio.open(path, mode, backend=backend, **kw)
    except OSError as e:
        if e.errno == errno.EOPNOTSUPP:
            pytest.skip(f"{backend} refused here: {e}")
        raise


def header_child_tail(opener, path):
    """Write a header, let a child write through the inherited descriptor,
    write a tail: what the file holds."""
    with opener(path, "w") as f:
        f.write("header\n")
        f.flush()
        subprocess.run(["echo", "from child"], stdout=f, check=True)
        f.write("tail\n")
    with builtins.open(path) as f:
        return f.read()


@pytest.mark.parametrize("backend", ubio.BACKENDS)
def test_a_child_writes_through_the_inherited_descriptor(d, backend):
    path = p(d, "child.txt")
    want = header_child_tail(builtins.open, path)
    assert want == "header\nfrom child\ntail\n"
    got = header_child_tail(lambda path, mode: ubio_or_skip(path, mode, backend), path)
    assert got == want


@pytest.mark.parametrize("backend", ubio.BACKENDS)
def test_the_descriptor_offset_moves_as_with_the_builtin(d, backend):
    path = p(d, "offset.dat")
    data = bytes(range(256)) * 8
    with builtins.open(path, "wb") as f:
        f.write(data)
    for opener in (builtins.open, lambda path, mode, **kw: ubio_or_skip(path, mode, backend, **kw)):
        # Raw: os.read after f.read continues where f.read stopped, and f.read
        # after os.lseek starts where the caller put the offset.
        with opener(path, "rb", buffering=0) as f:
            assert f.read(4) == data[:4]
            assert os.read(f.fileno(), 3) == data[4:7]
            assert f.tell() == 7
            os.lseek(f.fileno(), 100, os.SEEK_SET)
            assert f.read(2) == data[100:102]
            assert f.readinto(bytearray(10)) == 10 and f.tell() == 112
        # Buffered: a child handed the file after a line was read gets
        # what the builtin's child gets (what the buffer did not take).
        with opener(path, "rb") as f:
            f.readline()
            out = subprocess.run(["wc", "-c"], stdin=f, capture_output=True, check=True).stdout
            assert int(out) == 0, "the child read the file again"
        # Writes through the raw file, the caller's own os.write between them.
        with opener(path, "r+b", buffering=0) as f:
            f.seek(10)
            assert f.write(b"ab") == 2
            assert os.write(f.fileno(), b"cd") == 2
            assert f.write(b"ef") == 2 and f.tell() == 16
        with builtins.open(path, "rb") as f:
            assert f.read(16) == data[:10] + b"abcdef"
        with builtins.open(path, "wb") as f:
            f.write(data)


@pytest.mark.parametrize("backend", ubio.BACKENDS)
def test_append_writes_go_to_the_end_with_a_child_between(d, backend):
    path = p(d, "append.txt")
    with builtins.open(path, "w") as f:
        f.write("existing\n")
    with ubio_or_skip(path, "ab", backend, buffering=0) as f:
        f.write(b"one\n")
        subprocess.run(["echo", "two"], stdout=f, check=True)
        f.seek(0)
        f.write(b"three\n")
        assert f.tell() == os.path.getsize(path) == 23
    with builtins.open(path) as f:
        assert f.read() == "existing\none\ntwo\nthree\n"


# Errors


def test_errors_are_oserror_with_errno_and_filename(d):
    missing = p(d, "no/such/file")
    with pytest.raises(FileNotFoundError) as e:
        ubio.open(missing)
    assert e.value.errno == errno.ENOENT and e.value.filename == missing
    assert "open" in str(e.value)
    with pytest.raises(IsADirectoryError) as e:
        ubio.open(str(d), "w")
    assert e.value.filename == str(d)
    for fn in (ubio.stat, ubio.evict, ubio.probe):
        with pytest.raises(FileNotFoundError) as e:
            fn(missing)
        assert e.value.filename == missing
    with pytest.raises(FileNotFoundError):
        ubio.copy(missing, p(d, "dst"))
    path = p(d, "ro.dat")
    with open(path, "wb") as f:
        f.write(b"x")
    with ubio.open(path, "rb", buffering=0) as f:
        with pytest.raises(OSError) as e:
            f.write(b"y")
        assert e.value.errno == errno.EBADF and e.value.filename == path
    with ubio.open(path, "rb") as f:
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"y")
    with pytest.raises(ValueError, match="unknown backend"):
        ubio.open(path, backend="fast")


def test_a_backend_that_cannot_run_is_refused():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    path = f"/dev/shm/ubio-pytest-{os.getpid()}"
    with open(path, "wb") as f:
        f.write(b"x")
    try:
        with pytest.raises(OSError) as e:
            ubio.open(path, "rb", backend="kernel")
        assert e.value.errno == errno.EOPNOTSUPP and e.value.filename == path
        assert "tmpfs" in str(e.value)
    finally:
        os.unlink(path)


# The module functions


def test_copy_stat_evict_probe(d):
    src, dst = p(d, "a"), p(d, "b")
    digest = write_blocks(src, 16)
    os.chmod(src, 0o640)
    r = ubio.copy(src, dst, window=4 * MiB)
    assert r["bytes"] == 16 * MiB and r["dst"]["bytes_written"] == 16 * MiB
    assert r["method"] in ("copy_file_range", "stream", "clone") and r["hole_bytes"] == 0
    assert os.stat(dst).st_mode & 0o777 == 0o640
    with open(dst, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == digest
    s = ubio.stat(dst)
    assert s["size_bytes"] == 16 * MiB and s["pages"] == 16 * MiB // PAGE
    assert s["cached"] == 16 * MiB // PAGE  # the control read just above
    e = ubio.evict(dst)
    assert e["before"]["cached"] == s["cached"] and e["after"]["cached"] == 0
    pr = ubio.probe(str(d))
    assert pr["auto"] in ubio.BACKENDS and pr["fs"]["fs_type"]
    with ubio.open(src, "rb") as f:
        assert set(f.raw.stats()) >= {"backend", "pages_dropped", "bytes_read"}
