//! Running a command with GNU's cp and with ubio invoked as `cp` (a
//! symlink of that name) in fresh, identical directories, and comparing
//! what they did: exit status, stdout, stderr and the resulting directory
//! (names, types, symlink targets, contents, which names share an inode).

use super::{workdir, UBIO};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// What a command did: exit status, stdout, stderr, and the directory after.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    tree: BTreeMap<String, String>,
    /// Each name's "MODE UID:GID", when the command ran as another user.
    owners: BTreeMap<String, String>,
}

/// Every name below `dir` but `.stdin`: "file MODE 'CONTENT'", "symlink ->
/// TARGET", "dir MODE", each with its extended attributes (user.*, the
/// ACLs and file capabilities), and for a name that shares its inode with an earlier one,
/// "= EARLIER".
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<u64, String> = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().is_some_and(|n| n != ".stdin"))
            .collect();
        names.sort();
        for p in names {
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let mode = m.mode() & 0o7777;
            let mut what = if m.file_type().is_symlink() {
                format!("symlink -> {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                format!("dir {mode:04o}")
            } else if m.is_file() {
                format!("file {mode:04o} {}", content(&std::fs::read(&p).unwrap()))
            } else {
                format!("special {:o}", m.mode())
            };
            if !m.file_type().is_symlink() {
                let mut attrs: Vec<String> = xattr::list(&p)
                    .map(|names| names.collect::<Vec<_>>())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|n| {
                        let n = n.to_string_lossy();
                        n.starts_with("user.")
                            || n.starts_with("system.posix_acl")
                            || n == "security.capability"
                    })
                    .map(|n| {
                        let v = xattr::get(&p, &n).ok().flatten().unwrap_or_default();
                        format!("{}={v:?}", n.to_string_lossy())
                    })
                    .collect();
                attrs.sort();
                if !attrs.is_empty() {
                    what += &format!(" [{}]", attrs.join(" "));
                }
            }
            if let Some(first) = inodes.get(&m.ino()) {
                what += &format!(" = {first}");
            } else {
                inodes.insert(m.ino(), rel.clone());
            }
            out.insert(rel, what);
        }
    }
    out
}

/// A file's content as the snapshot shows it: the text itself, or for a
/// large file its length and a hash (a failure then prints lines, not
/// megabytes).
fn content(bytes: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    if bytes.len() <= 256 {
        return format!("{:?}", String::from_utf8_lossy(bytes));
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    format!("{} bytes, hash {:016x}", bytes.len(), h.finish())
}

/// Every name below `dir` (symlinks not followed): "MODE UID:GID".
fn owners(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p.clone());
            }
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            out.insert(
                rel,
                format!("{:04o} {}:{}", m.mode() & 0o7777, m.uid(), m.gid()),
            );
        }
    }
    out
}

/// Run `cp ARGS` (GNU's, or ubio's under the name cp) in a fresh directory
/// made by the shell script `setup`, with `env`; with `user` (setpriv's
/// options: --reuid, --regid, --groups), cp runs as that user.
fn run(
    cp: &Path,
    root: &Path,
    setup: &str,
    args: &[&str],
    env: &[(&str, &str)],
    user: Option<&[&str]>,
) -> Outcome {
    std::fs::create_dir_all(root).unwrap();
    let made = Command::new("sh")
        .arg("-ec")
        .arg(setup)
        .current_dir(root)
        .status()
        .unwrap();
    assert!(made.success(), "setup failed: {setup}");
    // A `.stdin` the setup made is the command's input (answers to -i).
    let stdin = match std::fs::File::open(root.join(".stdin")) {
        Ok(f) => Stdio::from(f),
        Err(_) => Stdio::null(),
    };
    let mut command = match user {
        // setpriv runs `cp` found on the PATH: both are then named cp in
        // their messages.
        Some(ids) => {
            let mut c = Command::new("setpriv");
            let path = std::env::var_os("PATH").unwrap_or_default();
            let dirs = std::iter::once(cp.parent().unwrap().to_path_buf())
                .chain(std::env::split_paths(&path));
            c.args(ids)
                .arg("--")
                .arg("cp")
                .env("PATH", std::env::join_paths(dirs).unwrap());
            c
        }
        None => Command::new(cp),
    };
    let out = command
        .arg0("cp")
        .args(args)
        .envs(env.iter().copied())
        .env("LC_ALL", "C")
        .current_dir(root)
        .stdin(stdin)
        .output()
        .unwrap();
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        // setpriv runs cp by its path, which GNU's messages then name.
        stderr: String::from_utf8_lossy(&out.stderr).replace(&*cp.to_string_lossy(), "cp"),
        tree: snapshot(root),
        owners: if user.is_some() {
            owners(root)
        } else {
            BTreeMap::new()
        },
    }
}

/// `ubio` under the name `cp`, in `dir`.
fn ubio_as_cp(dir: &Path) -> std::path::PathBuf {
    let link = dir.join("bin/cp");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(UBIO, &link).unwrap();
    link
}

/// One case: the differences from GNU, or none.
fn differs(
    dir: &Path,
    n: usize,
    setup: &str,
    args: &[&str],
    env: &[(&str, &str)],
    user: Option<&[&str]>,
) -> Option<String> {
    let ubio = ubio_as_cp(&dir.join(format!("u{n}")));
    let gnu = run(
        Path::new("/bin/cp"),
        &dir.join(format!("g{n}/t")),
        setup,
        args,
        env,
        user,
    );
    let ours = run(&ubio, &dir.join(format!("u{n}/t")), setup, args, env, user);
    (gnu != ours).then(|| {
        format!(
            "cp {}  (after: {setup})\n  GNU:  {gnu:?}\n  ubio: {ours:?}",
            args.join(" ")
        )
    })
}

/// A case: the setup script, cp's arguments, the environment.
pub type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>);

/// A difference from GNU that ubio has today, knowingly: the case's setup,
/// its arguments joined by spaces, and why (the gap of issue 24 it is).
pub type Known<'a> = (&'a str, &'a str, &'a str);

/// Every case as GNU's cp.
pub fn assert_all_as_gnu(cases: &[Case]) {
    assert_as_gnu_but(cases, &[]);
}

/// Every case as GNU's cp but the `known` differences, which must still
/// differ: a new difference fails, and so does a known one that is gone
/// (take it off the list) or that names no case.
pub fn assert_as_gnu_but(cases: &[Case], known: &[Known]) {
    assert_as_gnu_in(workdir().path(), cases, known);
}

/// [`assert_as_gnu_but`] in `dir` (a filesystem of the test's choice), each
/// case's directories removed once compared.
pub fn assert_as_gnu_in(dir: &Path, cases: &[Case], known: &[Known]) {
    let is_known = |setup: &str, args: &[&str]| {
        known
            .iter()
            .any(|(s, a, _)| *s == setup && *a == args.join(" "))
    };
    for (setup, args, reason) in known {
        assert!(
            cases
                .iter()
                .any(|(s, a, _)| s == setup && a.join(" ") == *args),
            "known difference names no case: cp {args}  (after: {setup}): {reason}"
        );
    }
    let mut failures = Vec::new();
    let mut gone = Vec::new();
    let mut still = 0;
    for (n, (setup, args, env)) in cases.iter().enumerate() {
        let d = differs(dir, n, setup, args, env, None);
        for side in ["g", "u"] {
            let _ = std::fs::remove_dir_all(dir.join(format!("{side}{n}")));
        }
        match (d, is_known(setup, args)) {
            (Some(d), false) => failures.push(d),
            (Some(_), true) => still += 1,
            (None, true) => gone.push(format!(
                "cp {}  (after: {setup}): now as GNU, take it off the known differences",
                args.join(" ")
            )),
            (None, false) => {}
        }
    }
    assert!(
        failures.is_empty() && gone.is_empty(),
        "{} of {} cases differ from GNU cp (not known):\n{}\n{} known differences gone:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n"),
        gone.len(),
        gone.join("\n")
    );
    eprintln!(
        "{} cases as GNU cp, {still} known differences (issue 24)",
        cases.len() - still
    );
}

/// Every case as GNU's cp, each cp run as the user `ids` (setpriv's
/// options) in a directory that user may enter, after the setup (as the
/// caller, root) made it: the modes, owners and groups of what they made
/// are compared too. The setup gives the user what it must write.
pub fn assert_all_as_gnu_as_user(ids: &[&str], cases: &[Case]) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut failures = Vec::new();
    for (n, (setup, args, env)) in cases.iter().enumerate() {
        for side in ["g", "u"] {
            let d = dir.path().join(format!("{side}{n}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        failures.extend(differs(dir.path(), n, setup, args, env, Some(ids)));
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from GNU cp run as {}:\n{}",
        failures.len(),
        cases.len(),
        ids.join(" "),
        failures.join("\n")
    );
    eprintln!("{} cases as GNU cp, run as {}", cases.len(), ids.join(" "));
}
