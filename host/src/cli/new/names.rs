//! Names a new project may take: an agent's name (a-z 0-9 - _), and one
//! its language's tools accept. Refused here, with the reason, rather than
//! by cargo, pip or npm after the files are written.

use super::Lang;

/// Crate names cargo refuses: Rust's keywords, and the names of the crates
/// every build links (`cargo new` says "cannot be used as a package name").
const RUST_RESERVED: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "gen",
    "macro",
    "override",
    "priv",
    "try",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "alloc",
    "core",
    "proc_macro",
    "proc-macro",
    "std",
    "test",
];

/// Package names npm refuses for a new package: Node.js's own modules,
/// and the names npm keeps for itself.
const NPM_RESERVED: &[&str] = &[
    "assert",
    "buffer",
    "child_process",
    "cluster",
    "console",
    "constants",
    "crypto",
    "dgram",
    "dns",
    "domain",
    "events",
    "fs",
    "http",
    "http2",
    "https",
    "inspector",
    "module",
    "net",
    "os",
    "path",
    "perf_hooks",
    "process",
    "punycode",
    "querystring",
    "readline",
    "repl",
    "stream",
    "string_decoder",
    "sys",
    "timers",
    "tls",
    "trace_events",
    "tty",
    "url",
    "util",
    "v8",
    "vm",
    "wasi",
    "worker_threads",
    "zlib",
    "node_modules",
    "favicon.ico",
];

/// Checks `name` for a new project in `lang`.
pub fn check(name: &str, lang: Lang) -> anyhow::Result<()> {
    crate::agent::tool::validate_agent_name(name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let refusal = match lang {
        Lang::Rust if name.starts_with(|c: char| c.is_ascii_digit()) => {
            Some("cargo refuses crate names that start with a digit")
        }
        Lang::Rust if RUST_RESERVED.contains(&name) => {
            Some("cargo refuses it as a crate name (a Rust keyword or a built-in crate)")
        }
        // PEP 508: a name starts and ends with a letter or digit.
        Lang::Python if name.ends_with(['-', '_']) => {
            Some("Python packaging refuses names that end in - or _")
        }
        Lang::Js if NPM_RESERVED.contains(&name) => {
            Some("npm refuses it as a package name (a Node.js module of its own)")
        }
        _ => None,
    };
    match refusal {
        Some(why) => anyhow::bail!(
            "{name:?} cannot name a {} agent: {why}; choose another name",
            lang.name()
        ),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_each_language_refuses_are_refused_with_the_reason() {
        for (name, lang, why) in [
            ("123abc", Lang::Rust, "start with a digit"),
            ("test", Lang::Rust, "a Rust keyword or a built-in crate"),
            ("fn", Lang::Rust, "a Rust keyword"),
            ("tool_", Lang::Python, "end in - or _"),
            ("http", Lang::Js, "a Node.js module"),
            ("Bad Name", Lang::Python, "a-z 0-9 - _"),
        ] {
            let error = check(name, lang).unwrap_err().to_string();
            assert!(error.contains(why), "{name} in {lang:?}: {error}");
        }
        // What one language refuses another may take.
        for (name, lang) in [
            ("123abc", Lang::Python),
            ("123abc", Lang::Js),
            ("test", Lang::Js),
            ("http", Lang::Rust),
            ("unit-convert", Lang::Rust),
        ] {
            check(name, lang).unwrap();
        }
    }
}
