//! `agentsite new NAME`: a new agent's crate, ready to build, as `cargo
//! new`, `spin new` and `wash new` start a project. It holds one tool to
//! change, the `Cargo.toml` an agent needs (a `cdylib` on `agentsite-sdk`,
//! the small release profile) and says the commands that build, add and
//! call it.

use anyhow::Context as _;
use std::path::{Path, PathBuf};

/// Where the SDK is when this binary was built from a checkout of the
/// repository: the new crate depends on it by path while the SDK is not on
/// crates.io.
fn sdk_checkout() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    sdk.join("Cargo.toml")
        .is_file()
        .then(|| sdk.canonicalize().ok())?
}

/// `agentsite new NAME [--path DIR]`.
pub fn new(name: &str, path: Option<&Path>) -> anyhow::Result<()> {
    crate::agent::tool::validate_agent_name(name).map_err(|e| anyhow::anyhow!("{e}"))?;
    let dir = path.map_or_else(|| PathBuf::from(name), Path::to_path_buf);
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut entries| entries.next().is_some())
            .unwrap_or(true)
    {
        anyhow::bail!(
            "{} already exists and is not empty; choose another with --path",
            dir.display()
        );
    }
    let sdk = match sdk_checkout() {
        Some(sdk) => format!("{{ path = {:?} }}", sdk.display().to_string()),
        None => format!("\"{}\"", env!("CARGO_PKG_VERSION")),
    };
    let files = [
        ("Cargo.toml", cargo_toml(name, &sdk)),
        ("src/lib.rs", lib_rs(name)),
        (".gitignore", "/target\n".to_owned()),
    ];
    for (file, text) in files {
        let file = dir.join(file);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot make {}", parent.display()))?;
        }
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    println!("{}", dir.display());
    let wasm = format!(
        "target/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    );
    eprintln!(
        "made the agent {name} in {}; build it, add it and call its tool:\n  cd {}\n  rustup target add wasm32-wasip2\n  cargo build --release --target wasm32-wasip2\n  agentsite add {wasm}\n  agentsite call {name} greet '{{\"name\": \"world\"}}'",
        dir.display(),
        dir.display(),
    );
    Ok(())
}

fn cargo_toml(name: &str, sdk: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

# An agent is a WebAssembly component: a C-compatible dynamic library,
# built with `cargo build --release --target wasm32-wasip2`.
[lib]
crate-type = ["cdylib"]

[dependencies]
agentsite-sdk = {sdk}

# Small components load and compile faster on every node that runs them.
[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = true

# A crate of its own, also inside another project's folder.
[workspace]
"#
    )
}

fn lib_rs(name: &str) -> String {
    let type_name: String = name
        .split(['-', '_'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    // A name that starts with a digit is no Rust type name.
    let type_name = match type_name.starts_with(|c: char| c.is_ascii_digit()) {
        true => format!("Agent{type_name}"),
        false => type_name,
    };
    format!(
        r#"//! The agent {name}. Each method of the `#[agent]` block is a tool: its
//! doc comment is the tool's description, its arguments' types make the
//! input schema (checked before the method runs), and what it returns is
//! the result (`String` as text; any `Serialize + JsonSchema` type as
//! structured content). `Err` is a tool error the caller reads.

use agentsite_sdk::agent;

struct {type_name};

/// What {name} does, in a sentence: people and other agents find it by
/// these words.
#[agent(tags = ["example"])]
impl {type_name} {{
    /// Greets someone by name.
    #[tool(read_only, idempotent)]
    fn greet(
        /// Who to greet.
        name: String,
    ) -> String {{
        format!("Hello, {{name}}!")
    }}
}}
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_rust_type_names() {
        assert!(lib_rs("word-count").contains("struct WordCount;"));
        assert!(lib_rs("2fa_helper").contains("struct Agent2faHelper;"));
    }

    #[test]
    fn a_bad_name_or_a_full_folder_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let error = new("Bad Name", Some(&dir.path().join("x"))).unwrap_err();
        assert!(error.to_string().contains("name"), "{error}");
        assert!(!dir.path().join("x").exists());
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let error = new("fine", Some(dir.path())).unwrap_err();
        assert!(error.to_string().contains("is not empty"), "{error}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }
}
