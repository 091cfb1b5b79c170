//! GNU cp 9.1's command line, links and attributes, run through GNU's cp
//! and ubio invoked as `cp` and compared (exit status, stdout, stderr, and
//! the resulting tree with modes, extended attributes and ACLs; see
//! common/gnu.rs): getopt_long's parsing (abbreviations, repetition, options
//! after operands), GNU's usage errors and their wording, the later of two
//! options winning, hard links kept through -H and -L and into existing
//! trees, --parents with -p, --attributes-only, ACLs.

mod common;
use common::gnu::{assert_all_as_gnu, assert_all_as_gnu_as_user, assert_as_gnu_but, Case, Known};

#[test]
fn command_line_as_gnu_reads_it() {
    let file = "echo data > f";
    let cases: Vec<Case> = vec![
        // Abbreviations: of options (not of ubio's own: --b is --backup,
        // not --backend), and of their arguments (argmatch).
        (
            "echo old > g; echo data > f",
            vec!["--b=simple", "f", "g"],
            vec![],
        ),
        (
            "mkdir -p a/b d; echo 1 > a/b/f",
            vec!["--parent", "a/b/f", "d"],
            vec![],
        ),
        (
            "mkdir d; echo 1 > f; ln f g",
            vec!["--preserve=link", "f", "g", "d"],
            vec![],
        ),
        (file, vec!["--sparse=al", "f", "g"], vec![]),
        (file, vec!["--sparse=a", "f", "g"], vec![]),
        (file, vec!["--re", "f", "g"], vec![]),
        (
            file,
            vec!["--reflink=never", "--sparse=never", "f", "g"],
            vec![],
        ),
        // Conflicts and usage errors.
        (file, vec!["-bn", "f", "g"], vec![]),
        (file, vec!["--sparse=never", "--reflink", "f", "g"], vec![]),
        (file, vec!["--sparse=always", "--reflink", "f", "g"], vec![]),
        (
            file,
            vec!["--reflink=always", "--sparse=never", "f", "g"],
            vec![],
        ),
        (
            file,
            vec!["--sparse=always", "--reflink=never", "f", "g"],
            vec![],
        ),
        (
            file,
            vec!["--sparse=never", "--reflink=auto", "f", "g"],
            vec![],
        ),
        (file, vec!["-ls", "f", "g"], vec![]),
        (file, vec!["--bogus", "f", "g"], vec![]),
        (file, vec!["-/", "f", "g"], vec![]),
        (file, vec!["--parents=1", "f", "g"], vec![]),
        (file, vec!["--suffix"], vec![]),
        (file, vec!["f", "-t"], vec![]),
        (file, vec!["f"], vec![]),
        (file, vec![], vec![]),
        (
            "mkdir d e; echo 1 > f",
            vec!["-t", "d", "-t", "e", "f"],
            vec![],
        ),
        ("mkdir d; echo 1 > f", vec!["-T", "-t", "d", "f"], vec![]),
        ("mkdir d; echo 1 > f", vec!["-T", "f", "g", "d"], vec![]),
        ("echo 1 > f; echo 2 > g", vec!["f", "g", "h"], vec![]),
        ("echo 1 > f", vec!["--parents", "f", "g"], vec![]),
        (file, vec!["--sparse=sometimes", "f", "g"], vec![]),
        (file, vec!["--backup=sometimes", "f", "g"], vec![]),
        (
            "echo 1 > f; echo 2 > g",
            vec!["-b", "f", "g"],
            vec![("VERSION_CONTROL", "bogus")],
        ),
        (file, vec!["--preserve=colour", "f", "g"], vec![]),
        (file, vec!["--no-preserve=all,bogus", "f", "g"], vec![]),
        (file, vec!["--preserve=context", "f", "g"], vec![]),
        (file, vec!["--context=x", "f", "g"], vec![]),
        (file, vec!["-Z", "f", "g"], vec![]),
        // Repetition and order: the last one wins.
        (
            "echo 1 > f; echo 2 > g",
            vec!["--backup=numbered", "--backup=simple", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; echo 2 > g; printf 'y\\n' > .stdin",
            vec!["-n", "-i", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; echo 2 > g; printf 'y\\n' > .stdin",
            vec!["-i", "-n", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; echo 2 > g; printf 'no\\n' > .stdin",
            vec!["-i", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; ln -s f s; mkdir d",
            vec!["-L", "-P", "s", "d"],
            vec![],
        ),
        (
            "echo 1 > f; ln -s f s; mkdir d",
            vec!["-P", "-L", "s", "d"],
            vec![],
        ),
        (
            "echo 1 > f; chmod 640 f",
            vec!["--no-preserve=mode", "--preserve=all", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; chmod 640 f",
            vec!["--preserve=all", "--no-preserve=mode", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; chmod 640 f",
            vec!["-a", "--no-preserve=mode", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; chmod 640 f",
            vec!["--no-preserve=mode", "-p", "f", "g"],
            vec![],
        ),
        // A repeated option: the last counts (but -t, GNU's error).
        (
            "echo 1 > f",
            vec!["--reflink=auto", "--reflink=never", "f", "g"],
            vec![],
        ),
        ("echo 1 > f", vec!["-v", "-v", "f", "g"], vec![]),
        (
            "echo 1 > f; echo 2 > g",
            vec!["-S", ".x", "-S", ".y", "-b", "f", "g"],
            vec![],
        ),
        (
            "mkdir d; echo 1 > f",
            vec!["-t", "d", "-t", "d", "f"],
            vec![],
        ),
        // Options after operands, unless POSIXLY_CORRECT; `--` ends options.
        ("echo old > g; echo data > f", vec!["f", "g", "-b"], vec![]),
        (
            "echo old > g; echo data > f; mkdir -- -b",
            vec!["f", "g", "-b"],
            vec![("POSIXLY_CORRECT", "1")],
        ),
        ("echo data > -f; mkdir d", vec!["--", "-f", "d"], vec![]),
        ("echo data > f", vec!["-v", "f", "g"], vec![]),
        ("echo data > f; echo x > g", vec!["-vb", "f", "g"], vec![]),
        (
            "echo data > f",
            vec!["--strip-trailing-slashes", "f/", "g"],
            vec![],
        ),
        (
            "mkdir d; echo data > d/f",
            vec!["-r", "--strip-trailing-slashes", "d/", "e"],
            vec![],
        ),
        // Names GNU quotes (the quoting of messages).
        ("echo 1 > \"it's\"", vec!["it's", "it's"], vec![]),
        ("echo 1 > 'a b'", vec!["a b", "a b"], vec![]),
        ("echo 1 > 'a\nb'", vec!["a\nb", "a\nb"], vec![]),
    ];
    // Where ubio differs from GNU today (issue 24), and why.
    let known: &[Known] = &[
        (
            "echo data > f",
            "--sparse=al f g",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "--sparse=a f g",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "--re f g",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "-ls f g",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "--bogus f g",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "-/ f g",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "--parents=1 f g",
            "metadata: -p --parents sets existing parents' modes",
        ),
        (
            "echo data > f",
            "--suffix",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "f -t",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "--sparse=sometimes f g",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
        (
            "echo data > f",
            "--context=x f g",
            "wording: SELinux options' messages on a kernel without SELinux",
        ),
        (
            "echo data > f",
            "-Z f g",
            "wording: SELinux options' messages on a kernel without SELinux",
        ),
        (
            "echo old > g; echo data > f; mkdir -- -b",
            "f g -b",
            "parsing: options after operands (getopt permutation) as GNU",
        ),
        (
            "echo data > f",
            "--strip-trailing-slashes f/ g",
            "parsing: --strip-trailing-slashes not taken as GNU does",
        ),
        (
            "mkdir d; echo data > d/f",
            "-r --strip-trailing-slashes d/ e",
            "parsing: --strip-trailing-slashes not taken as GNU does",
        ),
        (
            "echo 1 > \"it's\"",
            "it's it's",
            "wording: names in messages quoted as GNU's quotearg does (shell-escape quoting)",
        ),
        (
            "echo 1 > 'a\nb'",
            "a\nb a\nb",
            "wording: usage errors in GNU's getopt/argmatch words (clap's today)",
        ),
    ];
    assert_as_gnu_but(&cases, known);
}

#[test]
fn links_and_attributes_as_gnu() {
    let cases: Vec<Case> = vec![
        // Hard links between what -H and -L follow and what they reach.
        (
            "mkdir -p a d; echo 1 > a/f; ln -s f a/s",
            vec!["-R", "-H", "--preserve=links", "a/f", "a/s", "d"],
            vec![],
        ),
        (
            "mkdir -p a d; echo 1 > a/f; ln -s f a/s",
            vec!["-R", "-L", "--preserve=links", "a", "d"],
            vec![],
        ),
        (
            "mkdir -p a/b; echo 1 > a/f; ln a/f a/b/g",
            vec!["-a", "a", "c"],
            vec![],
        ),
        // -au into an existing tree: newer sources replace, links stay links.
        (
            "mkdir s; echo 1 > s/f; ln s/f s/g; cp -a s t; touch -d '2 days ago' t/f t/g",
            vec!["-au", "s", "."],
            vec![],
        ),
        (
            "mkdir s; echo 1 > s/f; echo 2 > s/g; cp -a s t; touch -d tomorrow t/f",
            vec!["-aruv", "s/.", "t"],
            vec![],
        ),
        // --parents with -p: parents made or already there get the sources'.
        (
            "mkdir -p a/b d/a; chmod 750 a; chmod 705 a/b; echo 1 > a/b/f",
            vec!["-p", "--parents", "a/b/f", "d"],
            vec![],
        ),
        (
            "mkdir -p a/b d; chmod 700 a; chmod 500 a/b; echo 1 > a/b/f",
            vec!["--parents", "-v", "a/b/f", "d"],
            vec![],
        ),
        (
            "mkdir -p a/b d/a/b; chmod 750 a; chmod 705 a/b; echo 1 > a/b/f",
            vec!["-p", "--parents", "a/b/f", "d"],
            vec![],
        ),
        (
            "mkdir -p a/b d/a; chmod 750 a; chmod 705 a/b; echo 1 > a/b/f",
            vec!["--preserve=timestamps", "--parents", "a/b/f", "d"],
            vec![],
        ),
        // --attributes-only: the destination's data stays.
        (
            "echo new > f; chmod 600 f; setfattr -n user.a -v 1 f; echo old > g",
            vec!["--attributes-only", "--preserve=all", "f", "g"],
            vec![],
        ),
        ("echo new > f", vec!["--attributes-only", "f", "g"], vec![]),
        (
            "echo new > f; echo old > g; ln g h",
            vec!["-a", "--attributes-only", "f", "g"],
            vec![],
        ),
        (
            "echo new > f; ln -s f s; echo old > g",
            vec!["-a", "--attributes-only", "s", "g"],
            vec![],
        ),
        (
            "echo new > f; ln -s f s; echo old > g",
            vec!["-a", "--attributes-only", "--remove-destination", "s", "g"],
            vec![],
        ),
        (
            "echo new > f; chmod 751 f; echo old > g",
            vec!["--reflink=always", "-p", "--attributes-only", "f", "g"],
            vec![],
        ),
        // Extended attributes and POSIX ACLs: -p, -a, --preserve=xattr.
        (
            "echo 1 > f; setfacl -m u:nobody:rw f; setfattr -n user.c -v blue f",
            vec!["-p", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; setfacl -m u:nobody:rw f; setfattr -n user.c -v blue f",
            vec!["--preserve=xattr", "f", "g"],
            vec![],
        ),
        // Attributes /etc/xattr.conf says to skip stay behind (user.Beagle.*).
        (
            "echo 1 > f; setfattr -n user.Beagle.idx -v 1 f; setfattr -n user.c -v blue f",
            vec!["--preserve=xattr", "f", "g"],
            vec![],
        ),
        (
            "mkdir d; setfattr -n user.Beagle.x -v 2 d; echo 1 > d/f; setfattr -n user.Beagle.y -v 3 d/f",
            vec!["-a", "d", "e"],
            vec![],
        ),
        (
            "mkdir d; setfacl -d -m u:nobody:rx d; setfacl -m u:nobody:rwx d; echo 1 > d/f",
            vec!["-a", "d", "e"],
            vec![],
        ),
        (
            "echo 1 > f; setfacl -m u:nobody:r f; echo 2 > g; setfacl -m u:daemon:w g",
            vec!["-p", "f", "g"],
            vec![],
        ),
        (
            "echo 1 > f; echo 2 > g; setfacl -m u:daemon:w g",
            vec!["f", "g"],
            vec![],
        ),
        // Special bits and modes.
        ("echo 1 > f; chmod 4755 f", vec!["-p", "f", "g"], vec![]),
        ("echo 1 > f; chmod 2711 f", vec!["f", "g"], vec![]),
        (
            "mkdir -m 1777 d; echo 1 > d/f",
            vec!["-r", "d", "e"],
            vec![],
        ),
        (
            "mkdir -m 0500 d; echo 1 > d/f",
            vec!["-r", "d", "e"],
            vec![],
        ),
        (
            "mkdir d; mkfifo d/p; echo 1 > d/f",
            vec!["-r", "d", "e"],
            vec![],
        ),
    ];
    // Where ubio differs from GNU today (issue 24), and why.
    let known: &[Known] = &[(
        "mkdir s; echo 1 > s/f; ln s/f s/g; cp -a s t; touch -d '2 days ago' t/f t/g",
        "-au s .",
        "wording: a directory onto itself (`cp -r s .`) is GNU's 'are the same file', ubio's 'into itself'",
    )];
    assert_as_gnu_but(&cases, known);
}

/// --preserve=links as GNU keeps them (tests/cp/link-preserve.sh,
/// preserve-link.sh, tests/mv/hard-2.sh, and what they leave out): which
/// names -H and -L make one file, hard-linked symlinks, a file named
/// twice, and destinations that exist already: some of the links there,
/// -n, -u, -i and backups, symlinks and dangling symlinks in the way.
#[test]
fn hard_links_kept_as_gnu() {
    let links = "mkdir -p a d; echo 1 > a/f; ln a/f a/g; ln -s f a/s";
    let cases: Vec<Case> = vec![
        // -H: the names on the command line, symlinks or not, in any order;
        // not what is below them.
        (links, vec!["-R", "-H", "--preserve=links", "a/s", "a/f", "d"], vec![]),
        (links, vec!["-R", "-H", "--preserve=links", "a", "d"], vec![]),
        (links, vec!["-R", "-H", "--preserve=links", "a", "a/s", "d"], vec![]),
        (links, vec!["-R", "-H", "--preserve=links", "a/s", "a", "d"], vec![]),
        (
            "mkdir -p a d; echo 1 > a/f; ln -s f a/s",
            vec!["-R", "-H", "--preserve=links", "a", "a/f", "d"],
            vec![],
        ),
        // -L: everything met, hard links and symlinks together.
        (links, vec!["-R", "-L", "--preserve=links", "a", "d"], vec![]),
        (links, vec!["-R", "-L", "--preserve=links", "a", "a/s", "d"], vec![]),
        (links, vec!["-aL", "a", "d"], vec![]),
        (links, vec!["-R", "-L", "--no-preserve=links", "a", "d"], vec![]),
        // Without -r, the command line is followed.
        (links, vec!["--preserve=links", "a/f", "a/s", "d"], vec![]),
        (links, vec!["-l", "-L", "--preserve=links", "a/f", "a/s", "d"], vec![]),
        // Hard-linked symlinks: links of the symlink with -P, of its target
        // where followed.
        (
            "mkdir -p a d; echo 1 > a/f; ln -s f a/s; ln a/s a/s2",
            vec!["-a", "a", "d"],
            vec![],
        ),
        (
            "mkdir -p a d; echo 1 > a/f; ln -s f a/s; ln a/s a/s2",
            vec!["-R", "-H", "--preserve=links", "a/s", "a/s2", "a", "d"],
            vec![],
        ),
        (
            "mkdir -p a d; echo 1 > a/f; ln -s f a/s; ln a/s a/s2; ln -s a/s top",
            vec!["-R", "-H", "--preserve=links", "top", "a", "d"],
            vec![],
        ),
        (
            "mkdir -p a d; echo 1 > a/f; ln -s f a/s; ln a/s a/s2",
            vec!["-R", "-L", "--preserve=links", "a", "d"],
            vec![],
        ),
        // -s: a later name links to the symlink made for the first, or,
        // where the source was followed, to what that symlink names (the
        // source file itself).
        ("mkdir a; echo 1 > a/f; ln a/f a/g", vec!["-s", "--preserve=links", "a/f", "a/g", "."], vec![]),
        ("mkdir a; echo 1 > a/f; ln a/f a/g", vec!["-sL", "--preserve=links", "a/f", "a/g", "."], vec![]),
        ("mkdir a; echo 1 > a/f; ln a/f a/g", vec!["-sP", "--preserve=links", "a/f", "a/g", "."], vec![]),
        ("mkdir a; echo 1 > a/f; ln a/f a/g", vec!["-sd", "a/f", "a/g", "."], vec![]),
        // The same for a symlink -u kept as the first name's copy.
        (
            "mkdir s t; echo 1 > s/f; ln s/f s/g; touch -d '-1 hour' s/f; echo X > X; ln -s ../X t/f",
            vec!["-u", "--preserve=links", "s/f", "s/g", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo 1 > s/f; ln s/f s/g; touch -d '-1 hour' s/f; echo X > X; ln -s ../X t/f",
            vec!["-uL", "--preserve=links", "s/f", "s/g", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo 1 > s/f; ln s/f s/g; touch -d '-1 hour' s/f; echo X > X; ln -s ../X t/f",
            vec!["-uP", "--preserve=links", "s/f", "s/g", "t"],
            vec![],
        ),
        // The same file twice.
        (links, vec!["-H", "--preserve=links", "a/f", "a/s", "a/f", "d"], vec![]),
        (links, vec!["--preserve=links", "a/f", "a/f", "d"], vec![]),
        (links, vec!["-b", "--preserve=links", "a/f", "a/f", "d"], vec![]),
        // Onto existing files (tests/mv/hard-2.sh): they become the links.
        (
            "mkdir dst; (cd dst && echo 1 > a && echo 2 > b && echo 3 > c); echo x > a; ln a b; ln a c",
            vec!["--preserve=link", "a", "b", "c", "dst"],
            vec![],
        ),
        // tests/cp/preserve-link.sh: -u keeps a destination as new as the
        // source, and later names link to it; older and newer ones both
        // become links.
        (
            "mkdir s; touch s/f; for n in linkm linke fileo fileu; do ln s/f s/$n; done; \
             mkdir -p t/s; touch t/s/f; ln t/s/f t/s/linke; \
             touch -d '-1 hour' t/s/fileo; touch -d '+1 hour' t/s/fileu",
            vec!["-au", "s", "t"],
            vec![],
        ),
        (
            "mkdir s; touch s/f; for n in linkm linke fileo fileu; do ln s/f s/$n; done; \
             mkdir -p t/s; touch t/s/linkm; ln t/s/linkm t/s/linke; \
             touch -d '-1 hour' t/s/fileo; touch -d '+1 hour' t/s/fileu",
            vec!["-au", "s", "t"],
            vec![],
        ),
        (
            "mkdir s; echo 1 > s/f; ln s/f s/g; cp -a s t; touch -d '2 days ago' t/f t/g",
            vec!["-au", "s/.", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo xx > t/s/f; echo yy > t/s/g; \
             touch -d '+1 hour' t/s/f t/s/g",
            vec!["-au", "s", "t"],
            vec![],
        ),
        // The tree there already, links and all; some of them; a name
        // linked elsewhere.
        ("mkdir s t; echo data > s/f; ln s/f s/g; cp -a s t", vec!["-a", "s", "t"], vec![]),
        ("mkdir s t; echo data > s/f; ln s/f s/g; cp -a s t", vec!["-a", "-b", "s", "t"], vec![]),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; ln s/f s/h; cp -a s t; rm t/s/g; echo x > t/s/h",
            vec!["-a", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; cp -a s t; rm t/s/f",
            vec!["-a", "s", "t"],
            vec![],
        ),
        // -n keeps what is there and links nothing to it; -i as answered.
        ("mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo x > t/s/f", vec!["-an", "s", "t"], vec![]),
        ("mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo x > t/s/g", vec!["-an", "s", "t"], vec![]),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo x > t/s/f; echo y > t/s/g; printf 'n\\ny\\n' > .stdin",
            vec!["-ai", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo x > t/s/f; echo y > t/s/g; printf 'y\\nn\\n' > .stdin",
            vec!["-ai", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo x > t/s/f; echo y > t/s/g; printf 'y\\ny\\n' > .stdin",
            vec!["-ai", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo x > t/s/f; echo y > t/s/g",
            vec!["-a", "--backup=numbered", "s", "t"],
            vec![],
        ),
        // Symlinks in the way: the first name's copy is written through
        // one (and the next is a link to that symlink); a later name
        // replaces one, dangling or not, instead of writing through it.
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo outside > X; ln -s ../../X t/s/f",
            vec!["-a", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo outside > X; ln -s ../../X t/s/g",
            vec!["--preserve=links", "-R", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; ln -s nowhere t/s/g",
            vec!["--preserve=links", "-R", "s", "t"],
            vec![],
        ),
        (
            "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo x > X; touch -d '+1 hour' X; ln -s ../../X t/s/f",
            vec!["-au", "s", "t"],
            vec![],
        ),
    ];
    assert_all_as_gnu(&cases);
}

/// A first name whose copy fails (its destination cannot be written) is
/// not linked to: the next name is copied on its own, as GNU's is.
#[test]
fn hard_links_after_a_failed_copy_as_gnu_as_a_user() {
    if !common::root_or_skip("hard_links_after_a_failed_copy_as_gnu_as_a_user") {
        return;
    }
    let cases: Vec<Case> = vec![(
        "mkdir s t; echo data > s/f; ln s/f s/g; mkdir t/s; echo other > t/s/f; \
         chown -R 65534 .; chmod 444 t/s/f",
        vec!["--preserve=links", "-R", "s", "t"],
        vec![],
    )];
    assert_all_as_gnu_as_user(
        &["--reuid=65534", "--regid=65534", "--clear-groups"],
        &cases,
    );
}

/// Ownership as GNU cp keeps it, run as a user who may not give files away
/// (nobody, also in group 100): the source's group where the user is in
/// it; setuid, setgid and sticky only on a copy with the source's owner
/// and group; extended attributes of a read-only source (tests/cp/
/// special-bits.sh, preserve-gid.sh, tests/misc/xattr.sh).
#[test]
fn ownership_and_special_bits_as_gnu_as_a_user() {
    if !common::root_or_skip("ownership_and_special_bits_as_gnu_as_a_user") {
        return;
    }
    let cases: Vec<Case> = vec![
        (
            "chown 65534 .; echo 1 > c; chmod a=r,ug+sx c",
            vec!["-p", "c", "c2"],
            vec![],
        ),
        ("chown 65534 .; echo 1 > f; chown 0:100 f; chmod 6755 f", vec!["-p", "f", "g"], vec![]),
        ("chown 65534 .; echo 1 > f; chown 0:0 f; chmod 1755 f", vec!["-p", "f", "g"], vec![]),
        (
            "chown 65534 .; echo 1 > f; chown 65534:100 f; chmod 6755 f",
            vec!["-p", "f", "g"],
            vec![],
        ),
        (
            "chown 65534 .; echo 1 > f; chown 65534:0 f; chmod 6755 f",
            vec!["-p", "f", "g"],
            vec![],
        ),
        ("chown 65534 .; echo 1 > f; chown 0:100 f", vec!["f", "g"], vec![]),
        (
            "chown 65534 .; echo 1 > f; chown 0:100 f; chmod 6755 f",
            vec!["--preserve=mode", "f", "g"],
            vec![],
        ),
        (
            "chown 65534 .; mkdir d; chown 0:100 d; chmod 2755 d; echo 1 > d/f; ln -s f d/l; chown -h 0:100 d/l",
            vec!["-a", "d", "e"],
            vec![],
        ),
        (
            "chown 65534 .; echo 1 > a; setfattr -n user.foo -v bar a; chmod a-w a; chown 65534 a",
            vec!["--preserve=xattr", "a", "e"],
            vec![],
        ),
        (
            "chown 65534 .; echo 1 > a; setfattr -n user.foo -v bar a; chmod a-w a; chown 65534 a",
            vec!["-a", "a", "e"],
            vec![],
        ),
    ];
    assert_all_as_gnu_as_user(
        &["--reuid=65534", "--regid=65534", "--groups=65534,100"],
        &cases,
    );
}

/// As root: the owner is set before the extended attributes, since a
/// chown clears security.capability (tests/cp/capability.sh).
#[test]
fn capabilities_kept_after_ownership_as_gnu() {
    if !common::root_or_skip("capabilities_kept_after_ownership_as_gnu") {
        return;
    }
    let setup = "echo 1 > f; chown 65534 f; setcap cap_net_bind_service=ep f";
    let cases: Vec<Case> = ["--preserve=xattr", "--preserve=all", "-a"]
        .into_iter()
        .map(|option| (setup, vec![option, "f", "g"], vec![]))
        .collect();
    assert_all_as_gnu_as_user(&["--reuid=0", "--regid=0", "--clear-groups"], &cases);
}

/// -i's questions in GNU's words, and -i, -n and -f as GNU combines them
/// (tests/cp/cp-i.sh, tests/mv/i-2.sh): a destination its user may not
/// write is named with its mode, as one to be replaced (-f,
/// --remove-destination) or to try anyway; -n and -i, the last wins; -n
/// with a backup is a usage error; a directory in the way is asked about
/// before it is an error. Run as a user, so that modes matter.
#[test]
fn prompts_as_gnu_words_them() {
    if !common::root_or_skip("prompts_as_gnu_words_them") {
        return;
    }
    // e, g: the user's and writable; f, h: the user's, mode 0; lnk -> h.
    let files = "chmod 777 .; echo e > e; echo f > f; echo g > g; echo h > h; chmod 0 f h; \
                 ln -s h lnk; chown -h 65534 e f g h lnk";
    let yes = format!("{files}; echo y > .stdin");
    let no = format!("{files}; echo n > .stdin");
    let modes =
        |mode: &str, answer: &str| format!("{files}; chmod {mode} h; echo {answer} > .stdin");
    let (m4000, m1444, m2070) = (modes("4000", "n"), modes("1444", "n"), modes("2070", "n"));
    let mut cases: Vec<Case> = vec![
        (&yes, vec!["-if", "e", "f"], vec![]),
        (&no, vec!["-if", "e", "f"], vec![]),
        (&yes, vec!["-fi", "e", "f"], vec![]),
        (&no, vec!["-i", "e", "f"], vec![]),
        (&yes, vec!["-i", "e", "f"], vec![]),
        (&no, vec!["-i", "--remove-destination", "e", "f"], vec![]),
        (&no, vec!["-ib", "e", "f"], vec![]),
        (&no, vec!["-ibf", "e", "f"], vec![]),
        (&no, vec!["-i", "e", "g"], vec![]),
        (&no, vec!["-i", "e", "lnk"], vec![]),
        (&no, vec!["-if", "e", "lnk"], vec![]),
        (&no, vec!["-il", "e", "f"], vec![]),
        (&no, vec!["-is", "e", "f"], vec![]),
        (&m4000, vec!["-i", "e", "h"], vec![]),
        (&m1444, vec!["-if", "e", "h"], vec![]),
        (&m2070, vec!["-if", "e", "h"], vec![]),
    ];
    // tests/cp/cp-i.sh: of -i and -n the last wins, -f changes neither.
    for (answer, args) in [
        (&yes, "-vni"),
        (&yes, "-vin"),
        (&yes, "-vfi"),
        (&no, "-vfn"),
        (&no, "-vnf"),
        (&no, "-vi"),
        (&yes, "-vi"),
    ] {
        cases.push((answer, vec![args, "e", "g"], vec![]));
    }
    // -n with a backup: a usage error, whatever the control; not after -i.
    for args in [
        vec!["-bn", "e", "g"],
        vec!["-nb", "e", "g"],
        vec!["-bin", "e", "g"],
        vec!["-bni", "e", "g"],
        vec!["-n", "--backup=none", "e", "g"],
        vec!["-n", "-S", ".old", "e", "g"],
    ] {
        cases.push((&no, args, vec![]));
    }
    // A directory where a file goes: asked about first (tests/cp/cp-i.sh).
    let dir_in_the_way = |answer: &str| {
        format!(
            "chmod 777 .; mkdir -p a b/a/c; touch a/c; chown -R 65534 a b; echo {answer} > .stdin"
        )
    };
    let (dir_no, dir_yes) = (dir_in_the_way("n"), dir_in_the_way("y"));
    cases.push((&dir_no, vec!["-iR", "a", "b"], vec![]));
    cases.push((&dir_yes, vec!["-iR", "a", "b"], vec![]));
    cases.push((&dir_no, vec!["-iT", "a/c", "b/a"], vec![]));
    cases.push((&dir_no, vec!["-nR", "a", "b"], vec![]));
    assert_all_as_gnu_as_user(
        &["--reuid=65534", "--regid=65534", "--clear-groups"],
        &cases,
    );
}

/// The modes of directories a copy makes, as GNU gives them once their
/// contents are in (they are made closed meanwhile: tests/cp/parent-perm-race.sh),
/// with and without --parents, the mode or the ownership kept or not; and
/// their setuid, setgid and sticky bits: --no-preserve=mode keeps the
/// sticky bit, a setgid parent gives its bit, and a source with none of
/// the three leaves those the destination has (a file's too).
#[test]
fn directory_modes_as_gnu() {
    let tree = "mkdir -p s/a/b s/c d; touch s/a/b/f; chmod 775 s; chmod 2750 s/a; \
                chmod 1777 s/a/b; chmod 500 s/c";
    let mut cases: Vec<Case> = [
        vec!["-R", "s", "t"],
        vec!["-R", "--preserve=ownership", "s", "t"],
        vec!["-R", "--preserve=mode", "s", "t"],
        vec!["-R", "--no-preserve=mode", "s", "t"],
        vec!["-a", "--no-preserve=mode", "s", "t"],
        vec!["-a", "s", "t"],
        vec!["-R", "--parents", "s/a/b", "d"],
        vec!["-R", "--parents", "--preserve=ownership", "s/a/b", "d"],
        vec!["--parents", "-p", "s/a/b/f", "d"],
    ]
    .into_iter()
    .map(|args| (tree, args, vec![]))
    .collect();
    // Into a setgid directory: sources with and without the three bits.
    let setgid_parent = "mkdir -p s/plain s/sticky s/setuid s/closed d; chmod 2755 d; \
                         chmod 1755 s/sticky; chmod 4755 s/setuid; chmod 700 s/closed; \
                         chmod 777 s/plain";
    // Onto directories and files that have such bits.
    let existing = "mkdir -p s/a s/b t/s/a t/s/b; echo 1 > s/f; echo 2 > t/s/f; \
                    chmod 750 s/a; chmod 1755 s/b; chmod 3700 t/s/a t/s/b; chmod 2700 t/s/f";
    for opts in [&["-R"][..], &["-Rp"], &["-R", "--no-preserve=mode"]] {
        for (tree, to) in [(setgid_parent, "d"), (existing, "t")] {
            let mut args = opts.to_vec();
            args.extend(["s", to]);
            cases.push((tree, args, vec![]));
        }
    }
    assert_all_as_gnu(&cases);
}
