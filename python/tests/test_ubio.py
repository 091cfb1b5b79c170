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
import mmap
import os
import shutil
import socket
import subprocess
import sys
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


@pytest.mark.parametrize("call", ["readall", "read", "readinto"])
def test_one_long_read_stays_within_bounds(d, call):
    """One call that reads 256 MiB (readall(), read(n) or readinto() of a
    buffer that large: what a BufferedReader passes down for a large read)
    caches what a stream of small reads does, not the whole range at once."""
    path = p(d, "long.dat")
    digest = write_blocks(path, 256)
    ubio.evict(path, sync=True)
    peak = Peak(path)
    stop = threading.Event()

    def sampler():  # the read runs without the GIL
        while not stop.wait(0.005):
            peak()

    t = threading.Thread(target=sampler)
    t.start()
    try:
        with ubio.FileIO(path) as f:
            if call == "readall":
                data = f.readall()
            elif call == "read":
                data = f.read(256 * MiB + 1)
            else:
                data = bytearray(256 * MiB)
                assert f.readinto(data) == 256 * MiB
    finally:
        stop.set()
        t.join()
    print(f"{call} of 256 MiB: peak {peak.mib:.0f} MiB cached")
    assert hashlib.sha256(data).hexdigest() == digest
    assert peak.mib < 64
    assert cached(path) == 0
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


def outcome(action):
    """What `action()` returns, or the type, args and filename of what it raises."""
    try:
        return ("returned", action())
    except Exception as e:
        return (type(e), e.args, getattr(e, "filename", None))


@pytest.mark.parametrize("backend", ubio.BACKENDS)
def test_errors_and_edge_cases_are_the_builtins(d, backend):
    """The issue's list (issue 25): each action gives with ubio.FileIO and
    ubio.open what it gives with io.FileIO and open(): the same value or the
    same exception type, arguments and filename."""
    path = p(d, "e.dat")
    with builtins.open(path, "wb") as f:
        f.write(b"0123456789")
    bpath = os.fsencode(path)
    missing = p(d, "no/such/file")

    def raw(fileio, name, mode, act):
        def run():
            with fileio(name, mode) as f:
                return act(f)
        return run

    actions = {
        "open a missing file": lambda o, F: (lambda: o(missing)),
        "open a directory for reading": lambda o, F: (lambda: o(str(d), "rb")),
        "open a directory for writing": lambda o, F: (lambda: o(str(d), "w")),
        "NUL in the path": lambda o, F: (lambda: o(path + "\0x", "rb")),
        "a bad mode": lambda o, F: (lambda: o(path, "rw")),
        "read a write-only file": lambda o, F: raw(F, path, "ab", lambda f: f.read(1)),
        "write a read-only file": lambda o, F: raw(F, path, "rb", lambda f: f.write(b"x")),
        "truncate a read-only file": lambda o, F: raw(F, path, "rb", lambda f: f.truncate(0)),
        "truncate(-1)": lambda o, F: raw(F, path, "r+b", lambda f: f.truncate(-1)),
        "seek(-1)": lambda o, F: raw(F, path, "rb", lambda f: f.seek(-1)),
        "seek(0, 5)": lambda o, F: raw(F, path, "rb", lambda f: f.seek(0, 5)),
        "seek past 2**63": lambda o, F: raw(F, path, "rb", lambda f: f.seek(2**63)),
        "SEEK_DATA and SEEK_HOLE": lambda o, F: raw(
            F, path, "rb", lambda f: (f.seek(0, os.SEEK_DATA), f.seek(0, os.SEEK_HOLE))
        ),
        "tell() after opening ab": lambda o, F: raw(F, path, "ab", lambda f: f.tell()),
        "a+b reads from the end": lambda o, F: raw(F, path, "a+b", lambda f: f.read()),
        "a bytes filename": lambda o, F: raw(F, bpath, "rb", lambda f: (f.name, f.mode, repr(f).split(".", 1)[1])),
        "an integer descriptor": lambda o, F: (lambda: outcome_of_fd(F)),
        "closefd with a name": lambda o, F: (lambda: F(path, "rb", closefd=False)),
        "a negative descriptor": lambda o, F: (lambda: F(-5)),
        "read after close": lambda o, F: (lambda: closed(F(path)).read(1)),
        "buffered text append keeps one BOM": lambda o, F: (lambda: append_bom(o, path)),
    }

    def outcome_of_fd(F):
        fd = os.open(path, os.O_RDONLY)
        with F(fd, "rb", closefd=False) as f:
            got = (f.read(3), f.name, f.closefd, repr(f).split(".", 1)[1])
        os.lseek(fd, 0, os.SEEK_SET)
        os.close(fd)
        return got

    def closed(f):
        f.close()
        return f

    def append_bom(o, name):
        for enc in ("utf-8-sig", "utf-16"):
            with o(name + enc, "w", encoding=enc) as f:
                f.write("a")
            with o(name + enc, "a", encoding=enc) as f:
                f.write("b")
            with builtins.open(name + enc, "rb") as f:
                yield f.read()
            os.unlink(name + enc)

    for what, make in actions.items():
        want = outcome(make(builtins.open, io.FileIO))
        ubio_open = lambda *a, **k: ubio.open(*a, backend=backend, **k)  # noqa: E731
        ubio_fileio = lambda *a, **k: ubio.FileIO(*a, backend=backend, **k)  # noqa: E731
        got = outcome(make(ubio_open, ubio_fileio))
        if what.startswith("buffered text"):
            want, got = ("returned", list(want[1])), ("returned", list(got[1]))
        if isinstance(got[0], type) and issubclass(got[0], OSError) and got[1] and got[1][0] == errno.EOPNOTSUPP:
            pytest.skip(f"{backend} refused here")
        assert got == want, what


def test_module_functions_raise_oserror_with_errno_and_filename(d):
    missing = p(d, "no/such/file")
    for fn in (ubio.stat, ubio.evict, ubio.probe):
        with pytest.raises(FileNotFoundError) as e:
            fn(missing)
        assert e.value.filename == missing
    with pytest.raises(FileNotFoundError):
        ubio.copy(missing, p(d, "dst"))
    with pytest.raises(ValueError, match="unknown backend"):
        ubio.open(p(d, "x"), "wb", backend="fast")


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


def test_the_data_path_is_chosen_by_name(d):
    """direct_reads, direct_writes and small_readahead take the command's names:
    "always" sends the emulated backend's aligned calls through O_DIRECT and
    reads ahead in small folios (the handle's counts say so), "never" keeps
    them in the page cache, and the data is the same either way."""
    path = p(d, "f")
    buf = mmap.mmap(-1, MiB)  # page-aligned memory, which O_DIRECT takes
    buf.write(block(7))
    for when, direct in (("always", 8 * MiB), ("never", 0)):
        with ubio.open(path, "wb", buffering=0, backend="emulated", direct_writes=when) as f:
            for _ in range(8):
                assert f.write(buf) == MiB
            assert f.stats()["bytes_written_direct"] == direct, when
        ubio.evict(path)
        back = mmap.mmap(-1, MiB)
        with ubio.open(path, "rb", buffering=0, backend="emulated", direct_reads=when,
                       small_readahead="never" if when == "always" else "always") as f:
            while f.readinto(back):
                assert back[:] == buf[:], when
            s = f.stats()
        assert s["bytes_read"] == 8 * MiB and s["bytes_read_direct"] == direct, (when, s)
        assert (s["small_readahead_bytes"] > 0) == (when == "never"), (when, s)
        assert cached(path) == 0, when


def test_a_wrong_setting_name_is_refused_with_the_choices(d):
    path = p(d, "f")
    with open(path, "wb") as f:
        f.write(b"x")
    for key in ("direct_reads", "direct_writes", "small_readahead"):
        with pytest.raises(ValueError) as e:
            ubio.open(path, "wb", **{key: "sometimes"})
        assert "'sometimes' (expected one of: never" in str(e.value), str(e.value)
    # Refused before the file was opened: "wb" truncated nothing.
    with open(path, "rb") as f:
        assert f.read() == b"x"
    with pytest.raises(ValueError):
        ubio.copy(path, p(d, "g"), direct_writes="sometimes")
    assert not os.path.exists(p(d, "g"))


# Descriptors ubio does not manage, long reads, blocking reads


def test_readall_reads_past_what_fstat_said(d):
    """/proc files (size 0), a FIFO, a file that grows while it is read:
    readall() returns what read() to the end returns (issue 25: it raised
    BufferError)."""
    with builtins.open("/proc/self/status", "rb") as f:
        want = f.read().split(b"\n")[0]
    with ubio.open("/proc/self/status", "rb", buffering=0) as f:
        assert f.readall().split(b"\n")[0] == want
    with ubio.open("/proc/self/status", "rb") as f:
        assert f.read().split(b"\n")[0] == want
    fifo = p(d, "fifo")
    os.mkfifo(fifo)
    data = os.urandom(300_000)

    def feed():
        with builtins.open(fifo, "wb") as w:
            w.write(data)

    t = threading.Thread(target=feed)
    t.start()
    with ubio.open(fifo, "rb") as f:
        assert f.read() == data
    t.join()
    path = p(d, "growing")
    with builtins.open(path, "wb") as w:
        w.write(b"a" * 1000)
    with ubio.open(path, "rb", buffering=0) as f:
        with builtins.open(path, "ab") as w:
            w.write(b"b" * 100_000)  # after the open, before readall's fstat or during it
        assert f.readall() == b"a" * 1000 + b"b" * 100_000


def test_a_read_blocked_on_a_fifo_blocks_nothing_else(d):
    """A thread blocked in read() on a FIFO holds no lock that `closed`,
    repr() or another call needs (issue 25: the interpreter stopped). Run
    in a child interpreter, so that a deadlock fails the test instead of
    hanging it."""
    fifo = p(d, "fifo")
    os.mkfifo(fifo)
    script = f"""
import os, threading, ubio
fifo = {fifo!r}
w = os.open(fifo, os.O_RDWR)  # a writer that sends nothing yet
f = ubio.open(fifo, "rb", buffering=0)
got = []
t = threading.Thread(target=lambda: got.append(f.read(10)))
t.start()
while not t.is_alive():
    pass
for _ in range(1000):
    assert not f.closed and "ubio.FileIO" in repr(f) and f.fileno() >= 0 and f.readable()
os.write(w, b"unblock")
t.join()
assert got == [b"unblock"], got
f.close()
os.close(w)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout == "ok\n", out.stderr


def test_pipes_sockets_and_terminals_pass_through(d):
    """What ubio cannot manage is read and written as io.FileIO does."""
    r, w = os.pipe()
    with ubio.open(w, "wb", buffering=0) as fw, ubio.open(r, "rb", buffering=0) as fr:
        assert fw.write(b"through a pipe") == 14
        assert fr.read(7) == b"through" and not fr.seekable()
        assert fw.stats()["managed"] is False
        os.set_blocking(r, False)
        assert fr.read(100) == b" a pipe" and fr.read(100) is None  # EAGAIN: None
    a, b = socket.socketpair()
    with a, b, ubio.open(a.fileno(), "wb", buffering=0, closefd=False) as fa:
        fa.write(b"socket")
        assert b.recv(10) == b"socket"
    master, slave = os.openpty()
    with ubio.open(slave, "w") as t, builtins.open(master, "rb", buffering=0) as m:
        assert t.isatty() and t.line_buffering  # as the builtin makes a terminal
        t.write("line\n")
        assert m.read(100).startswith(b"line")


def test_a_direct_write_only_handle_cannot_read(d):
    """backend="direct" reads through an O_DIRECT descriptor of its own;
    a handle opened write-only still cannot read, as with the builtin."""
    path = p(d, "wo.dat")
    for mode in ("wb", "ab", "xb"):
        if mode == "xb" and os.path.exists(path):
            os.unlink(path)
        f = ubio_or_skip(path, mode, "direct", buffering=0)
        with f:
            f.write(b"data" * 1024)
            with pytest.raises(io.UnsupportedOperation):
                f.read(4)
            with pytest.raises(io.UnsupportedOperation):
                f.readinto(bytearray(4))
        with pytest.raises(ValueError):
            f.read(4)


def test_close_flushes_before_the_descriptor_goes_and_reports_close_errors(d):
    path = p(d, "close.dat")
    f = ubio.open(path, "wb")
    f.write(b"buffered, not yet written")
    f.close()  # the buffer is written through the descriptor before it is closed
    with builtins.open(path, "rb") as g:
        assert g.read() == b"buffered, not yet written"
    f = ubio.open(path, "rb", buffering=0)
    os.close(f.fileno())
    with pytest.raises(OSError) as e:
        f.close()
    assert e.value.errno == errno.EBADF and f.closed
