"""CPython's own tests of file objects, run against ubio.FileIO and ubio.open.

    python cpython_io.py BACKEND    (in an empty directory on the filesystem to test)

Runs Lib/test/test_fileio.py (AutoFileTests, OtherFileTests) and the
file-touching classes of Lib/test/test_io.py (IOTest, BufferedReaderTest,
BufferedWriterTest, BufferedRandomTest, TextIOWrapperTest, MiscIOTest: their
C-implementation variants) of the interpreter that runs this script,
unmodified but for the class under test: FileIO is ubio.FileIO and open is
ubio.open, with BACKEND as the default backend. Nothing of CPython is kept in
this repository: the tests come with the interpreter (python.org and pyenv
builds install Lib/test), or for Debian's python3.X from Debian's
libpython3.X-testsuite package of the installed version, downloaded and
unpacked into UBIO_CPYTHON_TESTS (tests/pytest.rs does that).

Every test that is skipped or expected to fail here is listed below with its
reason (SKIPS, EXPECTED_FAILURES); an expected failure that passes is
reported as a failure (unittest's "unexpected success"), so the lists cannot
go stale. The last line is "N passed, N failed, N skipped".
"""

import os
import sys
import unittest

import ubio

# test id (Class.method, the class named as in CPython) -> why. Empty: with
# every backend, every test passes.
SKIPS = {}
EXPECTED_FAILURES = {}

# Tests that CPython itself skips on this kind of machine (its own
# conditions, unchanged), with the reason it gives. Any other skip fails the
# run: a test that stops running is noticed.
CPYTHON_SKIPS = {
    "CIOTest.test_unbounded_file": "test can only run in a 32-bit address space",
}

TEST_FILEIO = ("AutoFileTests", "COtherFileTests")
TEST_IO = (
    "CIOTest",
    "CBufferedReaderTest",
    "CBufferedWriterTest",
    "CBufferedRandomTest",
    "CTextIOWrapperTest",
    "CMiscIOTest",
)


def load_cpython_tests():
    extra = os.environ.get("UBIO_CPYTHON_TESTS")
    if extra:
        sys.path.insert(0, extra)
    from test import test_fileio, test_io  # noqa: E402

    return test_fileio, test_io


def under_ubio(base, name):
    """A subclass of CPython's test class `base` whose FileIO and open are
    ubio's, with SKIPS and EXPECTED_FAILURES applied."""
    attrs = {
        "FileIO": ubio.FileIO,
        "open": staticmethod(ubio.open),
        "modulename": "ubio",
        "__module__": __name__,
    }
    cls = type("Ubio" + name, (base,), attrs)
    for test_id, why in SKIPS.items():
        owner, _, method = test_id.partition(".")
        if owner == name:
            setattr(cls, method, unittest.skip(why)(getattr(base, method)))
    for test_id, why in EXPECTED_FAILURES.items():
        owner, _, method = test_id.partition(".")
        if owner == name:
            setattr(cls, method, unittest.expectedFailure(getattr(base, method)))
    return cls


def suite():
    test_fileio, test_io = load_cpython_tests()
    loader = unittest.TestLoader()
    # test_io.load_tests puts the C io namespace (BufferedReader, ...) and its
    # mocks into each C* class; ubio's subclasses then replace FileIO and open.
    test_io.load_tests(loader, None, None)
    classes = []
    for name in TEST_FILEIO:
        base = getattr(test_fileio, name)
        if not issubclass(base, unittest.TestCase):
            base = type(name, (base, unittest.TestCase), {})
        classes.append(under_ubio(base, name))
    for name in TEST_IO:
        classes.append(under_ubio(getattr(test_io, name), name))
    s = unittest.TestSuite()
    for cls in classes:
        s.addTests(loader.loadTestsFromTestCase(cls))
    return s


def cpython_id(test):
    """Class.method with the class named as in CPython (UbioX -> X)."""
    return f"{type(test).__name__[len('Ubio'):]}.{test._testMethodName}"


def check_backend(backend):
    """The default backend is the one the files get (refused ones fail here)."""
    with ubio.FileIO("backend-check", "w") as f:
        used = f.backend()[0]
    os.unlink("backend-check")
    if backend != "auto" and used != backend:
        sys.exit(f"asked for {backend}, got {used}")
    print(f"backend {backend}: files get {used}")


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ubio.BACKENDS:
        sys.exit(f"usage: {sys.argv[0]} BACKEND (one of {', '.join(ubio.BACKENDS)})")
    ubio._default_backend = sys.argv[1]
    check_backend(sys.argv[1])
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite())
    unlisted = [
        (cpython_id(t), why)
        for t, why in result.skipped
        if cpython_id(t) not in SKIPS and CPYTHON_SKIPS.get(cpython_id(t)) != why
    ]
    for test_id, why in unlisted:
        print(f"UNLISTED SKIP {test_id}: {why}")
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    failed += len(unlisted)
    skipped = len(result.skipped) - len(unlisted)
    passed = result.testsRun - len(result.failures) - len(result.errors)
    passed -= len(result.unexpectedSuccesses) + len(result.skipped)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
