//! `agentsite models`: the node's language models, and a quick test of one.

use super::{print_json, print_table};
use crate::llm::config::{Backend, GgufConfig, LlmConfig, ModelConfig};
use crate::llm::models::Models;
use crate::llm::{ChatRequest, Delta, Message};
use crate::llm::{download, embedded};
use crate::text::terminal_safe as safe;
use anyhow::Context as _;
use bytesize::ByteSize;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// The question `models test` asks unless given another.
const TEST_QUESTION: &str = "What is the capital of France? Answer in one sentence.";

/// `agentsite models`: each model with its state.
pub async fn list(models: &Models, json: bool) -> anyhow::Result<()> {
    let statuses = models.statuses().await;
    if json {
        return print_json(&statuses);
    }
    let rows: Vec<[String; 5]> = statuses
        .iter()
        .map(|s| {
            [
                if s.default {
                    format!("{} (default)", s.name)
                } else {
                    s.name.clone()
                },
                s.kind.clone(),
                s.size
                    .map_or_else(|| "-".to_owned(), |n| ByteSize(n).to_string()),
                safe(&s.state).into_owned(),
                safe(&s.location).into_owned(),
            ]
        })
        .collect();
    print_table(["NAME", "KIND", "SIZE", "STATE", "WHERE"], &rows);
    Ok(())
}

/// `agentsite models test [NAME]`: sends one short request, prints the
/// answer as it comes, then the time to first token and the speed.
pub async fn test(
    models: &Models,
    name: Option<&str>,
    question: Option<&str>,
    deadline: Duration,
) -> anyhow::Result<()> {
    let model = models.get(name)?;
    let request = ChatRequest {
        messages: vec![Message::user(question.unwrap_or(TEST_QUESTION))],
        max_tokens: Some(64),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let loading = Instant::now();
    model
        .prepare()
        .await
        .map_err(|e| anyhow::anyhow!("model {:?} cannot answer: {e}", model.name()))?;
    let loaded_in = loading.elapsed();
    let started = Instant::now();
    let (sink, mut pieces) = tokio::sync::mpsc::channel(64);
    let printer = tokio::spawn(async move {
        let mut stdout = std::io::stdout();
        while let Some(piece) = pieces.recv().await {
            if let Delta::Text(text) = piece {
                let _ = write!(stdout, "{}", safe(&text));
                let _ = stdout.flush();
            }
        }
        let _ = writeln!(stdout);
    });
    let completion = models
        .complete(
            Some(model.name()),
            request,
            started + deadline,
            Some(sink),
            "cli",
        )
        .await
        .map_err(|e| anyhow::anyhow!("model {:?} did not answer: {e}", model.name()))?;
    let _ = printer.await;
    let total = started.elapsed();
    let first = completion.time_to_first_token.unwrap_or(total);
    let decode = total.saturating_sub(first).as_secs_f64();
    let speed = if completion.usage.completion_tokens > 1 && decode > 0.0 {
        format!(
            ", {:.0} tokens/s",
            f64::from(completion.usage.completion_tokens - 1) / decode
        )
    } else {
        String::new()
    };
    eprintln!(
        "model {}: ready in {} ms; first token after {} ms, {} tokens in {} ms{speed} ({})",
        completion.model,
        loaded_in.as_millis(),
        first.as_millis(),
        completion.usage.completion_tokens,
        total.as_millis(),
        completion.stop_reason.as_str(),
    );
    Ok(())
}

/// Where `models add` finds the model and what it must be.
pub struct Addition<'a> {
    /// A GGUF file's path, or an http(s) URL to download it from.
    pub source: &'a str,
    pub name: Option<&'a str>,
    pub context: usize,
    /// The sha256 a downloaded file must have.
    pub sha256: Option<&'a str>,
    /// The largest file a download may bring.
    pub max_size: u64,
    /// Where downloaded files are kept.
    pub models_dir: &'a Path,
}

/// `agentsite models add FILE.gguf|URL`: downloads the file if given a URL,
/// checks that it holds a model the node can run and registers it in the
/// config file under `name` (the file's name when not given). A config
/// with no models gets the embedded default registered too, so that it
/// stays.
pub async fn add(
    config_file: &Path,
    llm: &LlmConfig,
    addition: Addition<'_>,
) -> anyhow::Result<()> {
    let name = addition.name;
    if let Some(name) = name {
        crate::llm::config::valid_model_name(name)?;
    }
    let path = if addition.source.starts_with("http://") || addition.source.starts_with("https://")
    {
        download(&addition).await?
    } else {
        anyhow::ensure!(
            addition.sha256.is_none(),
            "--sha256 checks a download; for a file on disk, compare `sha256sum {}` yourself",
            addition.source
        );
        let file = Path::new(addition.source);
        std::fs::canonicalize(file).with_context(|| format!("cannot read {}", file.display()))?
    };
    let context = addition.context;
    let facts = embedded::inspect_file(&path).map_err(anyhow::Error::msg)?;
    let name = match name {
        Some(name) => name.to_owned(),
        None => name_of_file(&path),
    };
    let mut models = Vec::new();
    if llm.models.is_empty() {
        let default = embedded::EmbeddedModel::default_model();
        models.push(gguf_entry(
            embedded::DEFAULT_NAME,
            default.path(),
            embedded::DEFAULT_CONTEXT,
        ));
    }
    if llm.models.iter().chain(&models).any(|m| m.name == name) {
        anyhow::bail!("the config already has a model called {name:?}; choose another with --name");
    }
    models.push(gguf_entry(&name, &path, context));

    #[derive(serde::Serialize)]
    struct Models<'a> {
        models: &'a [ModelConfig],
    }
    #[derive(serde::Serialize)]
    struct Addition<'a> {
        llm: Models<'a>,
    }
    let addition = toml::to_string(&Addition {
        llm: Models { models: &models },
    })?;
    let before = match std::fs::read_to_string(config_file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read {}", config_file.display()));
        }
    };
    let separator = if before.is_empty() || before.ends_with("\n\n") {
        ""
    } else if before.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    };
    let after = format!("{before}{separator}{addition}");
    // The file must still be a config the node reads (an `[llm]` written
    // another way, say): else it is left as it was.
    let dir = config_file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut staged = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    staged.write_all(after.as_bytes())?;
    crate::server::config::Config::load(staged.path(), true).with_context(|| {
        format!(
            "adding the model would leave {} unreadable; add a [[llm.models]] table by hand",
            config_file.display()
        )
    })?;
    staged
        .persist(config_file)
        .with_context(|| format!("cannot write {}", config_file.display()))?;
    let context_note = facts
        .trained_context
        .map(|n| format!(", trained for {n} tokens of context"))
        .unwrap_or_default();
    println!("{name}");
    eprintln!(
        "added model {name:?} ({} parameters{context_note}) to {}; try it with `agentsite models test {name}`",
        parameters(facts.parameters),
        config_file.display()
    );
    Ok(())
}

/// Downloads the model file at `addition.source` into the models folder,
/// with a progress bar at a terminal; returns its path.
async fn download(addition: &Addition<'_>) -> anyhow::Result<std::path::PathBuf> {
    let request = download::Request {
        url: addition.source,
        dir: addition.models_dir,
        file_name: addition.name.map(|name| format!("{name}.gguf")),
        sha256: addition.sha256,
        max_bytes: addition.max_size,
    };
    let mut bar = Bar::new(addition.source);
    let fetched = download::fetch(request, &mut bar).await?;
    let checked = match fetched.vouched {
        _ if fetched.already_there => format!("already downloaded (sha256 {})", fetched.sha256),
        download::Vouched::Operator => format!("sha256 {} as given", fetched.sha256),
        download::Vouched::Server(header) => {
            format!("sha256 {} as the server's {header} says", fetched.sha256)
        }
        download::Vouched::Nobody => format!(
            "sha256 {}, unchecked: the server named none; pass --sha256 to check it",
            fetched.sha256
        ),
    };
    eprintln!(
        "{}: {}, {checked}",
        fetched.path.display(),
        ByteSize(fetched.bytes)
    );
    Ok(fetched.path)
}

/// A download's progress on stderr: a bar at a terminal, else a line as it
/// starts.
struct Bar {
    url: String,
    bar: Option<indicatif::ProgressBar>,
}

impl Bar {
    fn new(url: &str) -> Self {
        Bar {
            url: safe(url).into_owned(),
            bar: None,
        }
    }
}

impl download::Progress for Bar {
    fn begin(&mut self, have: u64, total: Option<u64>) {
        let resuming = match (have, total) {
            (0, _) => String::new(),
            (have, Some(total)) => {
                format!(" (resuming at {} of {})", ByteSize(have), ByteSize(total))
            }
            (have, None) => format!(" (resuming at {})", ByteSize(have)),
        };
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            let size = total
                .map(|t| format!(", {}", ByteSize(t)))
                .unwrap_or_default();
            eprintln!("downloading {}{size}{resuming}", self.url);
            return;
        }
        let bar = super::byte_bar(total.unwrap_or(0), format!("downloading{resuming}"));
        bar.set_position(have);
        self.bar = Some(bar);
    }

    fn advanced(&mut self, have: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(have);
        }
    }

    fn end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

fn gguf_entry(name: &str, path: &Path, context: usize) -> ModelConfig {
    ModelConfig {
        name: name.to_owned(),
        backend: Backend::Gguf(GgufConfig {
            path: path.to_owned(),
            context,
        }),
        max_concurrent: 1,
        queue: 64,
    }
}

/// A model name from a file name, without the file's quantization:
/// `SmolLM2-360M-Instruct.Q8_0.gguf` is `smollm2-360m-instruct`,
/// `Qwen3-0.6B-Q4_K_M.gguf` is `qwen3-0.6b`.
fn name_of_file(path: &Path) -> String {
    let file = path.file_name().and_then(|n| n.to_str()).unwrap_or("model");
    let mut stem = match file.len().checked_sub(".gguf".len()) {
        Some(at) if file.is_char_boundary(at) && file[at..].eq_ignore_ascii_case(".gguf") => {
            &file[..at]
        }
        _ => file,
    };
    if let Some(at) = stem
        .char_indices()
        .filter(|(_, c)| matches!(c, '.' | '-'))
        .map(|(at, _)| at)
        .rfind(|&at| is_quantization(&stem[at + 1..]))
        && at > 0
    {
        stem = &stem[..at];
    }
    let name: String = stem
        .chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() => c.to_ascii_lowercase(),
            '-' | '_' | '.' => c,
            _ => '-',
        })
        .take(64)
        .collect();
    match name.trim_matches('.') {
        "" => "model".to_owned(),
        name => name.to_owned(),
    }
}

/// Whether `tag` names a GGUF quantization: `Q4_K_M`, `IQ2_XS`, `f16`.
fn is_quantization(tag: &str) -> bool {
    let tag = tag.to_ascii_uppercase();
    let quantized = tag
        .strip_prefix("IQ")
        .or_else(|| tag.strip_prefix('Q'))
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    quantized || matches!(tag.as_str(), "F16" | "BF16" | "F32")
}

/// `134.5M`, `7.2B`.
fn parameters(count: u64) -> String {
    match count {
        n if n >= 1_000_000_000 => format!("{:.1}B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_named_after_its_file_without_the_quantization() {
        let name = |file: &str| name_of_file(Path::new(file));
        assert_eq!(
            name("SmolLM2-135M-Instruct.Q4_1.gguf"),
            "smollm2-135m-instruct"
        );
        assert_eq!(name("/m/Qwen3-0.6B-Q4_K_M.gguf"), "qwen3-0.6b");
        assert_eq!(name("gemma-3-270m-it-Q8_0.gguf"), "gemma-3-270m-it");
        assert_eq!(
            name("Llama-3.2-1B-Instruct-f16.gguf"),
            "llama-3.2-1b-instruct"
        );
        assert_eq!(name("tiny.IQ2_XS.GGUF"), "tiny");
        assert_eq!(name("Q4_0.gguf"), "q4_0");
        assert_eq!(name("my model (v2).gguf"), "my-model--v2-");
    }
}
