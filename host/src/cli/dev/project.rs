//! The agent project `agentsite dev` builds: which language it is in, what
//! its build needs, and the build itself, which makes a component file.

use super::super::sdk::Sdk;
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::AsyncBufReadExt as _;

/// An agent project: a folder, and how it is built.
pub struct Project {
    /// The folder watched for changes.
    pub dir: PathBuf,
    kind: Kind,
}

enum Kind {
    /// A crate built by cargo for wasm32-wasip2.
    Rust,
    /// A program built by the SDK's componentize-py build.
    Python { entry: PathBuf, output: PathBuf },
    /// A program built by the SDK's componentize-js build.
    Js { entry: PathBuf, output: PathBuf },
}

/// Why a build made no component, in a line.
#[derive(Debug)]
pub struct BuildFailed(pub String);

impl Project {
    /// The project at `path`: a folder with a Cargo.toml (Rust), an app.py
    /// (Python) or an app.js (JavaScript), or a Python or JavaScript file.
    pub fn find(path: &Path) -> anyhow::Result<Project> {
        let path = std::fs::canonicalize(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        if path.is_file() {
            let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
            let stem = path.file_stem().unwrap_or_default().to_string_lossy();
            let output = dir.join(format!("{}.wasm", super::super::agent_name_from(&stem)));
            let kind = match path.extension().and_then(|e| e.to_str()) {
                Some("py") => Kind::Python {
                    entry: path.clone(),
                    output,
                },
                Some("js" | "mjs") => Kind::Js {
                    entry: path.clone(),
                    output,
                },
                _ => anyhow::bail!(
                    "{} is not an agent's program: name a folder with a Cargo.toml, app.py or app.js, or a .py or .js file",
                    path.display()
                ),
            };
            return Ok(Project { dir, kind });
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let output = path.join(format!("{}.wasm", super::super::agent_name_from(&name)));
        let kind = if path.join("Cargo.toml").is_file() {
            Kind::Rust
        } else if path.join("app.py").is_file() {
            Kind::Python {
                entry: path.join("app.py"),
                output,
            }
        } else if path.join("app.js").is_file() {
            Kind::Js {
                entry: path.join("app.js"),
                output,
            }
        } else {
            anyhow::bail!(
                "{} holds no agent project: expected a Cargo.toml (Rust), an app.py (Python) or an app.js (JavaScript); `agentsite new NAME --lang rust|python|js` makes one",
                path.display()
            );
        };
        Ok(Project { dir: path, kind })
    }

    /// The language and the build command, for a person.
    pub fn describe(&self) -> &'static str {
        match self.kind {
            Kind::Rust => "Rust: cargo build --release --target wasm32-wasip2",
            Kind::Python { .. } => "Python: componentize-py",
            Kind::Js { .. } => "JavaScript: componentize-js",
        }
    }

    /// Says what the build needs that this machine lacks, with the command
    /// that installs it, before the first build fails on it.
    pub async fn check_tools(&self, sdk: &Sdk) -> anyhow::Result<()> {
        match &self.kind {
            Kind::Rust => {
                let sysroot = output_of("rustc", &["--print", "sysroot"])
                    .await
                    .context("cargo and rustc are not installed (https://rustup.rs)")?;
                let target = Path::new(sysroot.trim()).join("lib/rustlib/wasm32-wasip2");
                anyhow::ensure!(
                    target.is_dir(),
                    "Rust cannot build for wasm32-wasip2 here: rustup target add wasm32-wasip2"
                );
            }
            Kind::Python { .. } => {
                output_of(&python(), &["-c", "import componentize_py"])
                    .await
                    .context("componentize-py is not installed for python3: pip install componentize-py==0.25.1")?;
            }
            Kind::Js { .. } => {
                output_of("node", &["--version"])
                    .await
                    .context("Node.js is not installed (22 or later)")?;
                anyhow::ensure!(
                    sdk.js()
                        .join("node_modules/@bytecodealliance/componentize-js")
                        .is_dir(),
                    "the JavaScript build tools are not installed: npm ci --prefix {}",
                    sdk.js().display()
                );
            }
        }
        Ok(())
    }

    /// Builds the project; its tools' output goes to this terminal. Returns
    /// the component file made.
    pub async fn build(&self, sdk: &Sdk) -> Result<PathBuf, BuildFailed> {
        match &self.kind {
            Kind::Rust => self.build_rust().await,
            Kind::Python { entry, output } => {
                let mut command = tokio::process::Command::new(python());
                command
                    .args(["-m", "agentsite.build"])
                    .arg(entry)
                    .arg("-o")
                    .arg(output)
                    .env("PYTHONPATH", with_path(sdk.python()));
                run("the Python build", command).await?;
                Ok(output.clone())
            }
            Kind::Js { entry, output } => {
                let mut command = tokio::process::Command::new("node");
                command
                    .arg(sdk.js().join("build.mjs"))
                    .arg(entry)
                    .arg("-o")
                    .arg(output);
                run("the JavaScript build", command).await?;
                Ok(output.clone())
            }
        }
    }

    /// `cargo build`, whose JSON messages name the component it made
    /// (wherever its target folder is) while its diagnostics are rendered
    /// to this terminal as usual.
    async fn build_rust(&self) -> Result<PathBuf, BuildFailed> {
        let mut command = tokio::process::Command::new("cargo");
        command
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--message-format=json-render-diagnostics",
            ])
            .current_dir(&self.dir)
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| BuildFailed(format!("cannot start cargo: {e}")))?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
        let mut components = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            components.extend(component_in(&line));
        }
        let status = child
            .wait()
            .await
            .map_err(|e| BuildFailed(format!("cargo did not finish: {e}")))?;
        if !status.success() {
            return Err(BuildFailed(format!("cargo build failed ({status})")));
        }
        components.dedup();
        match components.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(BuildFailed(
                "cargo built no component: the crate needs crate-type = [\"cdylib\"] under [lib]"
                    .into(),
            )),
            several => Err(BuildFailed(format!(
                "cargo built {} components ({}): run dev in one agent's folder",
                several.len(),
                several
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// The component a cargo JSON message says was made, if it says one was.
fn component_in(line: &str) -> Option<PathBuf> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message["reason"] != "compiler-artifact" {
        return None;
    }
    let kinds = message["target"]["kind"].as_array()?;
    if !kinds.iter().any(|k| k == "cdylib") {
        return None;
    }
    message["filenames"]
        .as_array()?
        .iter()
        .filter_map(|f| f.as_str())
        .find(|f| f.ends_with(".wasm"))
        .map(PathBuf::from)
}

/// The Python the componentize-py build runs on: `$PYTHON` or python3.
fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// `dir` first on a search path such as PYTHONPATH, before what it held.
fn with_path(dir: PathBuf) -> std::ffi::OsString {
    let mut paths = vec![dir];
    if let Some(existing) = std::env::var_os("PYTHONPATH") {
        paths.extend(std::env::split_paths(&existing));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

/// Runs a build tool whose output goes to this terminal.
async fn run(what: &str, mut command: tokio::process::Command) -> Result<(), BuildFailed> {
    let status = command
        .kill_on_drop(true)
        .status()
        .await
        .map_err(|e| BuildFailed(format!("cannot start {what}: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(BuildFailed(format!("{what} failed ({status})")))
    }
}

/// What `program args` prints, or why it could not run or failed.
async fn output_of(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await?;
    anyhow::ensure!(
        output.status.success(),
        "{program} failed ({})",
        output.status
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_component_is_read_from_cargos_messages() {
        let made = r#"{"reason":"compiler-artifact","target":{"kind":["cdylib"],"name":"tally"},"filenames":["/t/wasm32-wasip2/release/tally.wasm"]}"#;
        assert_eq!(
            component_in(made),
            Some(PathBuf::from("/t/wasm32-wasip2/release/tally.wasm"))
        );
        let library = r#"{"reason":"compiler-artifact","target":{"kind":["lib"],"name":"serde"},"filenames":["/t/libserde.rlib"]}"#;
        assert_eq!(component_in(library), None);
        assert_eq!(
            component_in(r#"{"reason":"build-finished","success":true}"#),
            None
        );
        assert_eq!(component_in("not json"), None);
    }

    #[test]
    fn each_language_is_found_by_its_files_and_anything_else_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let make = |name: &str, file: &str| {
            let project = dir.path().join(name);
            std::fs::create_dir_all(&project).unwrap();
            std::fs::write(project.join(file), "").unwrap();
            project
        };
        let rust = Project::find(&make("tally", "Cargo.toml")).unwrap();
        assert!(matches!(rust.kind, Kind::Rust));
        let python = Project::find(&make("py_agent", "app.py")).unwrap();
        match python.kind {
            Kind::Python { output, .. } => {
                assert!(output.ends_with("py_agent/py_agent.wasm"), "{output:?}")
            }
            _ => panic!("not Python"),
        }
        let js = make("js-agent", "app.js");
        assert!(matches!(
            Project::find(&js.join("app.js")).unwrap().kind,
            Kind::Js { .. }
        ));
        let error = Project::find(&make("notes", "README.md"))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("holds no agent project"), "{error}");
        let error = Project::find(&dir.path().join("missing"))
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("cannot open"), "{error}");
    }
}
