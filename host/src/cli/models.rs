//! `agentsite models`: the node's language models, and a quick test of one.

use super::{print_json, print_table};
use crate::llm::config::{Backend, GgufConfig, LlmConfig, ModelConfig};
use crate::llm::embedded;
use crate::llm::models::Models;
use crate::llm::{ChatRequest, Delta, Message};
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

/// `agentsite models add FILE.gguf`: checks that the file holds a model the
/// node can run and registers it in the config file under `name` (the
/// file's name when not given). A config with no models gets the embedded
/// default registered too, so that it stays.
pub fn add(
    config_file: &Path,
    llm: &LlmConfig,
    file: &Path,
    name: Option<&str>,
    context: usize,
) -> anyhow::Result<()> {
    let path =
        std::fs::canonicalize(file).with_context(|| format!("cannot read {}", file.display()))?;
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

/// A model name from a file name: `SmolLM2-360M-Instruct.Q8_0.gguf` is
/// `smollm2-360m-instruct`.
fn name_of_file(path: &Path) -> String {
    let stem = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split('.').next())
        .unwrap_or("model");
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "model".to_owned()
    } else {
        name
    }
}

/// `134.5M`, `7.2B`.
fn parameters(count: u64) -> String {
    match count {
        n if n >= 1_000_000_000 => format!("{:.1}B", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n => n.to_string(),
    }
}
