//! The modules of `host/src` keep to the floors ARCHITECTURE.md draws: every
//! `crate::…` path (comments and test modules aside) names a module on the
//! importer's floor or below, none of them import each other in a circle,
//! and the imports still going up are exactly the ones the page lists.

use crate::support::repo;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The lines of the fenced block ```` ```NAME ```` of ARCHITECTURE.md.
fn block(page: &str, name: &str) -> Vec<String> {
    let opening = format!("```{name}");
    let mut lines = page.lines().skip_while(|line| line.trim() != opening);
    assert!(
        lines.next().is_some(),
        "ARCHITECTURE.md has no ```{name} block"
    );
    lines
        .take_while(|line| line.trim() != "```")
        .map(|line| line.trim().to_owned())
        .filter(|line| !line.is_empty())
        .collect()
}

/// Each module's floor, from the ```floors block.
fn floors(page: &str) -> BTreeMap<String, u32> {
    let mut floors = BTreeMap::new();
    for line in block(page, "floors") {
        let mut words = line.split_whitespace();
        let floor: u32 = words.next().unwrap().parse().expect("a floor number");
        for module in words {
            assert!(
                floors.insert(module.to_owned(), floor).is_none(),
                "{module} is on two floors"
            );
        }
    }
    floors
}

/// The upward imports ARCHITECTURE.md still admits, as (from, to).
fn admitted(page: &str) -> BTreeSet<(String, String)> {
    block(page, "upward")
        .iter()
        .map(|line| {
            let (from, to) = line.split_once("->").expect("`from -> to`");
            (from.trim().to_owned(), to.trim().to_owned())
        })
        .collect()
}

/// The names `lib.rs` re-exports at the crate root, by the module they
/// come from (`pub use node::{Node, …}`).
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for line in lib.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.split_once("::") else {
            continue;
        };
        for item in items.trim_matches(|c| "{};".contains(c)).split(',') {
            let item = item.trim();
            if !item.is_empty() {
                names.insert(item.to_owned(), module.to_owned());
            }
        }
    }
    names
}

/// The code of a source file without its comments and its test module.
/// A test module can import what it likes: the floors are the code's.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        // A comment after code (`" //"`; a URL's `://` is no comment).
        .map(|line| line.find(" //").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The module paths a `use`-style path text names, from where `text`
/// begins: `a::b::C` is one, `a::{b, c::d}` is `a::b` and `a::c::d` (each
/// with every segment; which of them is a module the floors decide).
fn expand(prefix: &[String], text: &str, found: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    let mut rest = text;
    loop {
        let rest_trimmed = rest.trim_start();
        if let Some(group) = rest_trimmed.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        expand(&path, &group[start..i], found);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&path, &group[start..i], found);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let name = identifier(rest_trimmed);
        if name.is_empty() || name == "self" {
            break;
        }
        path.push(name.to_owned());
        match rest_trimmed[name.len()..].strip_prefix("::") {
            Some(more) => rest = more,
            None => break,
        }
    }
    if path.len() > prefix.len() || (!path.is_empty() && text.trim() == "self") {
        found.push(path);
    }
}

/// Every `crate::` path in `code`, each item of a `crate::{a, b::c}` group
/// on its own, as its segments.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        // A path segment ending in `crate` (`$crate::`) is a macro's and
        // names no module here.
        if code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        expand(&[], &code[at + "crate::".len()..], &mut found);
    }
    found.retain(|path| !path.is_empty());
    found
}

/// Every `super::` path in `code` of the module at `here` (its segments
/// below the crate), made absolute.
fn super_paths(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("super::") {
        let before = &code[..at];
        if before.ends_with("::")
            || before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let mut rest = &code[at..];
        let mut up = 0;
        while let Some(more) = rest.strip_prefix("super::") {
            up += 1;
            rest = more;
        }
        if up > here.len() {
            continue;
        }
        expand(&here[..here.len() - up], rest, &mut found);
    }
    found
}

/// The module a file of `host/src` is, as its segments: `a2a/server/mod.rs`
/// is `a2a::server`, `a2a/client.rs` is `a2a::client`.
fn module_path(source: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(source).unwrap().with_extension("");
    let mut path: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().to_owned())
        .collect();
    if path.last().is_some_and(|last| last == "mod") {
        path.pop();
    }
    path
}

/// The drawn module a path belongs to: the longest of its prefixes that
/// ARCHITECTURE.md gives a floor (`a2a::server::run` is `a2a::server`'s).
fn drawn_module(path: &[String], drawn: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|name| drawn.contains(name))
}

fn rust_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// Every import between drawn modules: (from, to) → where it is.
fn imports(source: &Path, drawn: &BTreeSet<String>) -> BTreeMap<(String, String), String> {
    let lib = std::fs::read_to_string(source.join("lib.rs")).unwrap();
    let reexported = reexports(&lib);
    let mut files = Vec::new();
    rust_files(source, &mut files);
    files.sort();
    let mut imports = BTreeMap::new();
    for file in files {
        let here = module_path(source, &file);
        let Some(from) = drawn_module(&here, drawn) else {
            continue;
        };
        let text = code(&std::fs::read_to_string(&file).unwrap());
        let paths = crate_paths(&text)
            .into_iter()
            .chain(super_paths(&text, &here));
        for mut path in paths {
            if let Some(module) = reexported.get(&path[0]) {
                path = vec![module.clone()];
            }
            let Some(to) = drawn_module(&path, drawn) else {
                continue;
            };
            if to == from {
                continue;
            }
            let place = file.strip_prefix(source).unwrap().display().to_string();
            imports.entry((from.clone(), to)).or_insert(place);
        }
    }
    imports
}

#[test]
fn modules_import_down_the_floors_and_never_in_a_circle() {
    let page = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let floors = floors(&page);
    let admitted = admitted(&page);
    let source = repo().join("host/src");

    // Every module has its floor, and every floor's module exists.
    let mut files = Vec::new();
    rust_files(&source, &mut files);
    let drawn: BTreeSet<String> = floors.keys().cloned().collect();
    let present: BTreeSet<String> = files
        .iter()
        .map(|file| module_path(&source, file))
        .filter(|path| path[0] != "lib" && path[0] != "main")
        .map(|path| path[0].clone())
        .collect();
    let top_level: BTreeSet<String> = drawn
        .iter()
        .map(|name| name.split("::").next().unwrap().to_owned())
        .collect();
    assert_eq!(
        present, top_level,
        "ARCHITECTURE.md's floors and the modules of host/src differ"
    );
    for name in &drawn {
        let path: Vec<String> = name.split("::").map(str::to_owned).collect();
        assert!(
            files
                .iter()
                .any(|file| module_path(&source, file).starts_with(&path)),
            "ARCHITECTURE.md gives {name} a floor, but host/src has no such module"
        );
    }

    let imports = imports(&source, &drawn);
    let upward: BTreeMap<_, _> = imports
        .iter()
        .filter(|((from, to), _)| floors[to] > floors[from])
        .collect();
    let unlisted: Vec<String> = upward
        .iter()
        .filter(|(edge, _)| !admitted.contains(**edge))
        .map(|((from, to), at)| {
            format!(
                "{from} (floor {}) -> {to} (floor {}) in {at}",
                floors[from], floors[to]
            )
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "imports that go up a floor:\n{}",
        unlisted.join("\n")
    );
    let gone: Vec<String> = admitted
        .iter()
        .filter(|edge| !upward.contains_key(edge))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md still lists upward imports that are gone (take them off):\n{}",
        gone.join("\n")
    );

    // No circle among the imports that keep to the floors: a module
    // reaches itself only through an admitted upward import.
    let kept: BTreeSet<(String, String)> = imports
        .into_keys()
        .filter(|edge| !admitted.contains(edge))
        .collect();
    if let Some(circle) = circle(&kept) {
        panic!(
            "modules import each other in a circle: {}",
            circle.join(" -> ")
        );
    }
}

/// A path of `edges` that comes back to where it started, if there is one.
fn circle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        graph.entry(from.as_str()).or_default().push(to.as_str());
    }
    for start in graph.keys() {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Vec<&str>> = vec![vec![start]];
        while let Some(path) = stack.pop() {
            for next in graph.get(path[path.len() - 1]).into_iter().flatten() {
                if next == start {
                    let mut circle: Vec<String> = path.iter().map(|m| m.to_string()).collect();
                    circle.push(next.to_string());
                    return Some(circle);
                }
                if seen.insert(*next) {
                    let mut longer = path.clone();
                    longer.push(next);
                    stack.push(longer);
                }
            }
        }
    }
    None
}

#[test]
fn a_circle_is_found_and_a_ladder_is_not() {
    let edges = |pairs: &[(&str, &str)]| -> BTreeSet<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    let ladder = edges(&[("a", "b"), ("b", "c"), ("a", "c"), ("d", "c")]);
    assert_eq!(circle(&ladder), None);
    let ring = edges(&[("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]);
    let found = circle(&ring).expect("a circle");
    assert_eq!(found.first(), found.last());
    assert_eq!(found.len(), 4, "{found:?}");
}

#[test]
fn crate_paths_are_read_as_rust_writes_them() {
    let paths =
        "use crate::a::b;\nuse crate::{c, d::e, f::{g, h}};\nlet x = crate::i::j(); $crate::k";
    let joined = |paths: Vec<Vec<String>>| -> Vec<String> {
        paths.iter().map(|path| path.join("::")).collect()
    };
    assert_eq!(
        joined(crate_paths(paths)),
        ["a::b", "c", "d::e", "f::g", "f::h", "i::j"]
    );
    let commented = "x // crate::y\n/// crate::z\nlet a = crate::b; // \"http://crate::w\"";
    assert_eq!(joined(crate_paths(&code(commented))), ["b"]);
    let here = ["a2a".to_owned(), "server".to_owned(), "run".to_owned()];
    let relative = "use super::tasks::T;\nuse super::super::{wire::M, client};";
    assert_eq!(
        joined(super_paths(relative, &here)),
        ["a2a::server::tasks::T", "a2a::wire::M", "a2a::client"]
    );
}

/// Every `crate::` path the files of `module` (a folder or a file of
/// host/src) name, as written (a re-export at the crate's root by its own
/// name), with the file it is in.
fn paths_named_in(
    source: &Path,
    module: &str,
    drawn: &BTreeSet<String>,
) -> Vec<(Vec<String>, String)> {
    let mut files = Vec::new();
    rust_files(source, &mut files);
    files.sort();
    let mut named = Vec::new();
    for file in files {
        let here = module_path(source, &file);
        if drawn_module(&here, drawn).as_deref() != Some(module) {
            continue;
        }
        let text = code(&std::fs::read_to_string(&file).unwrap());
        let place = file.strip_prefix(source).unwrap().display().to_string();
        for path in crate_paths(&text) {
            named.push((path, place.clone()));
        }
    }
    named
}

#[test]
fn modules_know_only_what_architecture_md_says() {
    let page = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let drawn: BTreeSet<String> = floors(&page).into_keys().collect();
    let source = repo().join("host/src");
    let rules = block(&page, "knows");
    assert!(!rules.is_empty(), "ARCHITECTURE.md's knows block is empty");
    let mut broken = Vec::new();
    for rule in &rules {
        let mut words = rule.split_whitespace();
        let (Some(module), Some(kind)) = (words.next(), words.next()) else {
            panic!("a knows line is `MODULE only PATH...` or `MODULE never MODULE...`: {rule}");
        };
        assert!(drawn.contains(module), "{module} has no floor: {rule}");
        let listed: Vec<Vec<&str>> = words.map(|w| w.split("::").collect()).collect();
        for (path, place) in paths_named_in(&source, module, &drawn) {
            let starts = |prefix: &Vec<&str>| {
                prefix.len() <= path.len() && prefix.iter().zip(&path).all(|(a, b)| a == b)
            };
            let wrong = match kind {
                "only" => {
                    drawn_module(&path, &drawn).as_deref() != Some(module)
                        && !listed.iter().any(starts)
                }
                "never" => listed.iter().any(starts),
                other => panic!("{other:?} is neither only nor never: {rule}"),
            };
            if wrong {
                broken.push(format!("{place} names crate::{} ({rule})", path.join("::")));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "modules that know more than ARCHITECTURE.md says:\n{}",
        broken.join("\n")
    );
}
