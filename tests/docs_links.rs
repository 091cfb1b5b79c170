//! Every relative link of the documentation resolves: README.md,
//! CHANGELOG.md, docs/**/*.md, dist/**/README.md and bench/runs/README.md.
//! A link to a file or directory must name one that exists (relative to the
//! page that holds it); a link with a #fragment into a Markdown file must
//! name one of its headings, by GitHub's anchors (the heading's text in
//! lower case, spaces to '-', punctuation dropped, a repeated heading's
//! anchor suffixed -1, -2, ...). Links with a scheme (https:, mailto:) are
//! not followed. A failure names the page, the line and the link.
//!
//! The Markdown is read with pulldown-cmark, so links in code blocks and
//! code spans are not links, and reference-style links are resolved as
//! GitHub resolves them.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::collections::HashMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// The pages whose links are checked, relative to the repository's root.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("README.md"), PathBuf::from("CHANGELOG.md")];
    out.push(PathBuf::from("bench/runs/README.md"));
    walk(
        root,
        Path::new("docs"),
        &mut |p| p.extension().is_some_and(|e| e == "md"),
        &mut out,
    );
    walk(
        root,
        Path::new("dist"),
        &mut |p| p.file_name().is_some_and(|n| n == "README.md"),
        &mut out,
    );
    out.retain(|p| root.join(p).is_file());
    out.sort();
    out
}

fn walk(root: &Path, dir: &Path, keep: &mut dyn FnMut(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(root.join(dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let rel = dir.join(entry.file_name());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &rel, keep, out);
        } else if keep(&rel) {
            out.push(rel);
        }
    }
}

fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
}

/// GitHub's anchor of a heading's text: lower case; letters, digits, '-'
/// and '_' kept; each space a '-'; everything else dropped.
fn slug(text: &str) -> String {
    let mut s = String::new();
    for c in text.trim().chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() || c == '-' || c == '_' {
            s.push(c);
        } else if c == ' ' {
            s.push('-');
        }
    }
    s
}

/// The anchors of a Markdown page's headings, as GitHub makes them.
fn anchors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    let base = slug(&h);
                    let n = seen.entry(base.clone()).or_insert(0);
                    out.push(if *n == 0 {
                        base.clone()
                    } else {
                        format!("{base}-{n}")
                    });
                    *n += 1;
                }
            }
            _ => {}
        }
    }
    out
}

/// A link's target with %XX escapes decoded.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn has_scheme(url: &str) -> bool {
    let Some((scheme, _)) = url.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
}

/// `path` with `.` and `..` taken out, without touching the filesystem;
/// None where it climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// The broken links of one page (`page` relative to `root`), each as
/// "PAGE:LINE: `LINK`: WHY".
fn broken_links(root: &Path, page: &Path) -> Vec<String> {
    let text = fs::read_to_string(root.join(page))
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", page.display()));
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut cache: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut own: Option<Vec<String>> = None;
    let mut out = Vec::new();
    for (event, range) in Parser::new_ext(&text, options()).into_offset_iter() {
        let url = match event {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => dest_url.to_string(),
            _ => continue,
        };
        if url.is_empty() || has_scheme(&url) {
            continue;
        }
        let at = format!("{}:{}: `{}`", page.display(), line_of(range.start), url);
        let (path, fragment) = match url.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (url.as_str(), None),
        };
        let path = percent_decode(path);
        let target = if path.is_empty() {
            page.to_path_buf()
        } else {
            let joined = page.parent().unwrap_or(Path::new("")).join(&path);
            match normalize(&joined) {
                Some(t) => t,
                None => {
                    out.push(format!("{at}: points above the repository's root"));
                    continue;
                }
            }
        };
        let full = root.join(&target);
        if !full.exists() {
            out.push(format!(
                "{at}: no such file or directory {}",
                target.display()
            ));
            continue;
        }
        let Some(fragment) = fragment else { continue };
        if !(full.is_file() && target.extension().is_some_and(|e| e == "md")) {
            continue;
        }
        let fragment = percent_decode(fragment);
        let known = if target == page {
            own.get_or_insert_with(|| anchors(&text))
        } else {
            cache
                .entry(target.clone())
                .or_insert_with(|| anchors(&fs::read_to_string(&full).unwrap_or_default()))
        };
        if !known.contains(&fragment) {
            out.push(format!(
                "{at}: {} has no heading with the anchor #{fragment}",
                target.display()
            ));
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_documentation_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = pages(root);
    assert!(
        pages.iter().any(|p| p == Path::new("README.md"))
            && pages.iter().any(|p| p.starts_with("docs")),
        "no README.md or docs/ under {}",
        root.display()
    );
    let broken: Vec<String> = pages.iter().flat_map(|p| broken_links(root, p)).collect();
    assert!(
        broken.is_empty(),
        "{} broken link(s) in {} pages:\n{}",
        broken.len(),
        pages.len(),
        broken.join("\n")
    );
}

#[test]
fn anchors_follow_githubs_rules() {
    let text = "# ubio: uncached buffered I/O\n\n## What it buys (measured here)\n\n\
                ### `ubio cp` and GNU cp\n\n## RWF_DONTCACHE, O_DIRECT or ubio?\n\n\
                ## The engine (`ubio run`, `ubio run --pid PID` or `ubio attach PID`)\n\n\
                ## Notes\n\n## Notes\n\n## Notes\n";
    assert_eq!(
        anchors(text),
        [
            "ubio-uncached-buffered-io",
            "what-it-buys-measured-here",
            "ubio-cp-and-gnu-cp",
            "rwf_dontcache-o_direct-or-ubio",
            "the-engine-ubio-run-ubio-run---pid-pid-or-ubio-attach-pid",
            "notes",
            "notes-1",
            "notes-2",
        ]
    );
}

#[test]
fn a_broken_link_is_named_with_its_page_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("docs/guide")).unwrap();
    fs::write(root.join("docs/guide/a.md"), "# A page\n\n## Its part\n").unwrap();
    fs::write(
        root.join("docs/b.md"),
        "# B\n\nFine: [a](guide/a.md#its-part), [self](#b), [web](https://example.org/x),\n\
         `[code](nowhere.md)`.\n\n\
         Broken: [gone](guide/c.md)\n\nand [anchor](guide/a.md#no-such-part), [up](../../x.md).\n\n\
         ```\n[in a block](nowhere.md)\n```\n",
    )
    .unwrap();
    let broken = broken_links(root, Path::new("docs/b.md"));
    assert_eq!(
        broken,
        [
            "docs/b.md:6: `guide/c.md`: no such file or directory docs/guide/c.md",
            "docs/b.md:8: `guide/a.md#no-such-part`: docs/guide/a.md has no heading with the anchor #no-such-part",
            "docs/b.md:8: `../../x.md`: points above the repository's root",
        ]
    );
}
