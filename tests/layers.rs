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

/// The first path segment of every `crate::` path in `code`, including
/// each item of a `crate::{a, b::c}` group.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        // `agentsite_sdk::crate::` does not occur; a path segment ending in
        // `crate` (`$crate::`) is a macro's and names no module here.
        if code[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.push(identifier(group[start..i].trim()).to_owned());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.push(identifier(group[start..i].trim()).to_owned());
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.push(identifier(rest).to_owned());
        }
    }
    found.retain(|name| !name.is_empty());
    found
}

/// The top-level module a file of `host/src` belongs to.
fn module_of(source: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(source).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    let first = first.to_str().unwrap();
    first.strip_suffix(".rs").unwrap_or(first).to_owned()
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

/// Every import between top-level modules: (from, to) → where it is.
fn imports(source: &Path, modules: &BTreeSet<String>) -> BTreeMap<(String, String), String> {
    let lib = std::fs::read_to_string(source.join("lib.rs")).unwrap();
    let reexported = reexports(&lib);
    let mut files = Vec::new();
    rust_files(source, &mut files);
    files.sort();
    let mut imports = BTreeMap::new();
    for file in files {
        let from = module_of(source, &file);
        if from == "lib" || from == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for name in crate_paths(&code(&text)) {
            let to = reexported.get(&name).cloned().unwrap_or(name);
            if to != from && modules.contains(&to) {
                let place = file.strip_prefix(source).unwrap().display().to_string();
                imports.entry((from.clone(), to)).or_insert(place);
            }
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
    let present: BTreeSet<String> = files
        .iter()
        .map(|file| module_of(&source, file))
        .filter(|module| module != "lib" && module != "main")
        .collect();
    let drawn: BTreeSet<String> = floors.keys().cloned().collect();
    assert_eq!(
        present, drawn,
        "ARCHITECTURE.md's floors and the modules of host/src differ"
    );

    let imports = imports(&source, &present);
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
    assert_eq!(crate_paths(paths), ["a", "c", "d", "f", "i"]);
    let commented = "x // crate::y\n/// crate::z\nlet a = crate::b; // \"http://crate::w\"";
    assert_eq!(crate_paths(&code(commented)), ["b"]);
}
