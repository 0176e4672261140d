//! `agentsite models`: the node's language models, and a quick test of one.

use super::{print_json, print_table};
use crate::llm::models::Models;
use crate::llm::{ChatRequest, Delta, Message};
use crate::text::terminal_safe as safe;
use bytesize::ByteSize;
use std::io::Write as _;
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
