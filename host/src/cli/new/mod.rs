//! `agentsite new NAME [--lang rust|python|js]`: a new agent's project,
//! ready to build, as `cargo new`, `spin new` and `wash new` start one. It
//! holds two tools to change, one answering text and one structured
//! output, and builds against the SDK this binary carries ([`super::sdk`]),
//! wherever it is made. It says the commands that build, add and call it.

mod names;

use crate::config::DataDir;
use anyhow::Context as _;
use std::path::{Path, PathBuf};

/// The languages an agent can be made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

/// `agentsite new NAME [--lang L] [--path DIR]`.
pub fn new(data: &DataDir, name: &str, lang: Lang, path: Option<&Path>) -> anyhow::Result<()> {
    names::check(name, lang)?;
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
    let sdk = super::sdk::install(data)?;
    for (file, text) in files(name, lang, &sdk) {
        let file = dir.join(file);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot make {}", parent.display()))?;
        }
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    println!("{}", dir.display());
    eprintln!(
        "made the agent {name} ({}) in {}; build it, add it and call its tools:\n  cd {}\n{}  agentsite call {name} greet '{{\"name\": \"world\"}}'\n  agentsite call {name} count '{{\"text\": \"a tiny example sentence\"}}'\nor let `agentsite dev` in the folder build, add and serve it, and again on each save",
        lang.name(),
        dir.display(),
        dir.display(),
        build_steps(name, lang, &sdk)
    );
    Ok(())
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }
}

/// Where a build of the agent `name` in `lang` writes its component,
/// relative to its project folder.
fn component(name: &str, lang: Lang) -> PathBuf {
    match lang {
        Lang::Rust => PathBuf::from(format!(
            "target/wasm32-wasip2/release/{}.wasm",
            name.replace('-', "_")
        )),
        Lang::Python | Lang::Js => PathBuf::from(format!("{name}.wasm")),
    }
}

/// The commands that build the project and add what they built.
fn build_steps(name: &str, lang: Lang, sdk: &super::sdk::Sdk) -> String {
    let component = component(name, lang);
    let build = match lang {
        Lang::Rust => {
            "  rustup target add wasm32-wasip2\n  cargo build --release --target wasm32-wasip2\n"
                .to_owned()
        }
        Lang::Python => format!(
            "  pip install componentize-py==0.25.1\n  PYTHONPATH={} python3 -m agentsite.build app.py -o {}\n",
            sdk.python().display(),
            component.display()
        ),
        Lang::Js => format!(
            "  npm ci --prefix {}    # once: componentize-js and rolldown (Node.js 22)\n  node {} app.js -o {}\n",
            sdk.js().display(),
            sdk.js().join("build.mjs").display(),
            component.display()
        ),
    };
    format!("{build}  agentsite add {}\n", component.display())
}

/// The project's files, each with its text.
fn files(name: &str, lang: Lang, sdk: &super::sdk::Sdk) -> Vec<(&'static str, String)> {
    let fill = |template: &str| {
        template
            .replace("__NAME__", name)
            .replace("__TYPE__", &type_name(name))
            // A TOML string, quoted and escaped as TOML needs.
            .replace(
                "__SDK__",
                &toml::Value::String(sdk.rust().display().to_string()).to_string(),
            )
    };
    match lang {
        Lang::Rust => vec![
            (
                "Cargo.toml",
                fill(include_str!("templates/rust/Cargo.toml")),
            ),
            ("Cargo.lock", super::sdk::Sdk::lock().to_owned()),
            (
                "src/lib.rs",
                fill(include_str!("templates/rust/src/lib.rs")),
            ),
            (".gitignore", "/target\n".to_owned()),
        ],
        Lang::Python => vec![
            ("app.py", fill(include_str!("templates/python/app.py"))),
            (
                ".gitignore",
                "*.wasm\n*.wasm.inputs\n__pycache__/\n".to_owned(),
            ),
        ],
        Lang::Js => vec![
            ("app.js", fill(include_str!("templates/js/app.js"))),
            (
                ".gitignore",
                "*.wasm\n*.wasm.inputs\nnode_modules/\n".to_owned(),
            ),
        ],
    }
}

/// `word-count` as a Rust type: `WordCount`.
fn type_name(name: &str) -> String {
    name.split(['-', '_'])
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_rust_type_names() {
        assert_eq!(type_name("word-count"), "WordCount");
        assert_eq!(type_name("fa_helper2"), "FaHelper2");
    }

    #[test]
    fn a_bad_name_or_a_full_folder_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path().join("data"));
        let error = new(&data, "Bad Name", Lang::Rust, Some(&dir.path().join("x"))).unwrap_err();
        assert!(error.to_string().contains("name"), "{error}");
        assert!(!dir.path().join("x").exists());
        std::fs::write(dir.path().join("keep.txt"), "mine").unwrap();
        let error = new(&data, "fine", Lang::Python, Some(dir.path())).unwrap_err();
        assert!(error.to_string().contains("is not empty"), "{error}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("keep.txt")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn each_language_gets_its_project_pointing_at_the_carried_sdk() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::new(dir.path().join("data"));
        for (lang, file) in [
            (Lang::Rust, "src/lib.rs"),
            (Lang::Python, "app.py"),
            (Lang::Js, "app.js"),
        ] {
            let project = dir.path().join(format!("{lang:?}"));
            new(&data, "word-count", lang, Some(&project)).unwrap();
            let text = std::fs::read_to_string(project.join(file)).unwrap();
            assert!(!text.contains("__"), "{file} has a blank left: {text}");
            assert!(text.contains("count"), "{text}");
        }
        let manifest = std::fs::read_to_string(dir.path().join("Rust/Cargo.toml")).unwrap();
        let sdk = super::super::sdk::install(&data).unwrap().rust();
        assert!(
            manifest.contains(&format!("path = \"{}\"", sdk.display())),
            "{manifest}"
        );
    }
}
