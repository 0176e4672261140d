//! `agentsite chat [@AGENT] [MESSAGE]`: a conversation at the terminal, as
//! `ollama run` gives one, with the running node's agents. It is one of the
//! node's conversations, the chat page's too: started here, it is listed
//! there, and `--resume ID` carries on one started there.
//!
//! With a message it is sent, answered, and the command ends (the reply on
//! stdout, for a script). Without one, lines are read until `/bye` or the
//! end of input: each line is a message; `"""` opens and closes a message
//! of several lines; `/team MESSAGE` asks the agents to team up on it.

mod view;

use super::network::NodeClient;
use crate::chat::api::{ConversationAnswer, NewConversation, Said};
use crate::chat::{Conversation, Entry, EntryBody};
use crate::config::DataDir;
use crate::text::terminal_safe;
use anyhow::Context as _;
use futures::StreamExt as _;
use std::io::IsTerminal as _;
use std::time::Duration;
use tokio::io::AsyncBufReadExt as _;
use view::View;

/// What `agentsite chat` was asked.
pub struct ChatArgs {
    /// `@AGENT`, then the words of a message.
    pub words: Vec<String>,
    /// A conversation to carry on.
    pub resume: Option<String>,
    /// List the conversations instead.
    pub list: bool,
}

/// Entries of a resumed conversation shown before its next message.
const SHOWN_HISTORY: usize = 20;

/// `agentsite chat`. Returns whether every answer came (a script's exit
/// status).
pub async fn chat(data: &DataDir, args: ChatArgs) -> anyhow::Result<bool> {
    let client = NodeClient::connect(data)?;
    if args.list {
        list(&client).await?;
        return Ok(true);
    }
    let mut words = args.words.as_slice();
    let agent = match words.first().and_then(|w| w.strip_prefix('@')) {
        Some(agent) => {
            words = &words[1..];
            Some(agent.to_owned())
        }
        None => None,
    };
    let live = std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
    let mut view = View::new(live);
    let conversation = match &args.resume {
        Some(id) => {
            anyhow::ensure!(
                agent.is_none(),
                "a resumed conversation keeps its agents: mention another with @name in a message"
            );
            resume(&client, id, &mut view).await?
        }
        None => {
            let new = NewConversation {
                title: None,
                agent: agent.clone(),
            };
            let response = client
                .post("/api/chat", serde_json::to_value(&new)?)
                .await?;
            response
                .json::<Conversation>()
                .await
                .context("the node's answer is not what this command expects")?
        }
    };
    let id = conversation.id.clone();
    let page = format!("{}/chat/{id}", client.file().api);
    if !words.is_empty() {
        let text = words.join(" ");
        return say(&client, &id, &text, false, &mut view).await;
    }
    let typing = std::io::stdin().is_terminal();
    if typing {
        let with = match conversation.agents.as_slice() {
            [] => "the node's agents (@name brings one in)".to_owned(),
            agents => agents
                .iter()
                .map(|a| format!("@{}", terminal_safe(a)))
                .collect::<Vec<_>>()
                .join(", "),
        };
        eprintln!(
            "conversation {id} with {with}, also at {page}\n/bye ends it, \"\"\" opens and closes a message of several lines, /team MESSAGE asks the agents to team up"
        );
    }
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut all_answered = true;
    loop {
        let Some(message) = read_message(&mut lines, typing).await? else {
            break;
        };
        let (text, team_up) = match message.trim() {
            "" => continue,
            "/bye" | "/exit" | "/quit" => break,
            "/help" | "/?" => {
                eprintln!(
                    "/bye ends the conversation; \"\"\" opens and closes a message of several lines; /team MESSAGE asks the agents to team up on it; @name brings an agent in; the conversation is also at {page}"
                );
                continue;
            }
            text => match text.strip_prefix("/team ") {
                Some(rest) => (rest.trim().to_owned(), true),
                None if text.starts_with('/') => {
                    eprintln!("{} is not a command: /help lists them", terminal_safe(text));
                    continue;
                }
                None => (message.trim_end().to_owned(), false),
            },
        };
        match say(&client, &id, &text, team_up, &mut view).await {
            Ok(answered) => all_answered &= answered,
            // The node refused this message (too long, busy): said, and the
            // conversation goes on.
            Err(e) if typing => {
                eprintln!("error: {}", terminal_safe(&format!("{e:#}")));
                all_answered = false;
            }
            Err(e) => return Err(e),
        }
    }
    if typing {
        eprintln!("the conversation {id} stays on the node: agentsite chat --resume {id}");
    }
    Ok(all_answered)
}

/// The next message typed: a line, or the lines between two `"""`. `None`
/// at the end of input.
async fn read_message<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    typing: bool,
) -> anyhow::Result<Option<String>> {
    let prompt = |text: &str| {
        if typing {
            eprint!("{text}");
        }
    };
    prompt(">>> ");
    let Some(line) = lines.next_line().await.context("cannot read stdin")? else {
        return Ok(None);
    };
    let Some(first) = line.trim_start().strip_prefix("\"\"\"") else {
        return Ok(Some(line));
    };
    let mut message = Vec::new();
    let mut line = first.to_owned();
    loop {
        if let Some(last) = line.trim_end().strip_suffix("\"\"\"") {
            message.push(last.to_owned());
            break;
        }
        message.push(line);
        prompt("... ");
        match lines.next_line().await.context("cannot read stdin")? {
            Some(next) => line = next,
            None => break,
        }
    }
    Ok(Some(message.join("\n").trim().to_owned()))
}

/// Sends `text` and shows the answer as it comes; whether it is a reply.
async fn say(
    client: &NodeClient,
    id: &str,
    text: &str,
    team_up: bool,
    view: &mut View,
) -> anyhow::Result<bool> {
    let said = Said {
        text: text.to_owned(),
        team_up,
    };
    let sent: Entry = client
        .post(
            &format!("/api/chat/{id}/messages"),
            serde_json::to_value(&said)?,
        )
        .await?
        .json()
        .await
        .context("the node's answer is not what this command expects")?;
    follow(client, id, sent.seq, view).await
}

/// Shows conversation `id`'s events after entry `after` until the answer is
/// complete; whether a reply (or a goal) came.
async fn follow(
    client: &NodeClient,
    id: &str,
    after: u64,
    view: &mut View,
) -> anyhow::Result<bool> {
    let mine = after;
    let mut after = after;
    let mut answered = false;
    // A stream that breaks (the node restarting, a proxy) is opened again
    // from the last entry seen.
    for _attempt in 0..5 {
        let mut events = client
            .events(&format!("/api/chat/{id}/events"), after)
            .await?;
        while let Some(Ok(event)) = events.next().await {
            let Some(data) = event.data else { continue };
            match event.event.as_deref() {
                Some("entry") => {
                    let entry: Entry = serde_json::from_str(&data)
                        .context("the node sent an entry this command cannot read")?;
                    after = entry.seq;
                    answered |=
                        matches!(entry.body, EntryBody::Reply { .. } | EntryBody::Goal { .. });
                    view.entry(&entry, entry.seq == mine);
                }
                Some("delta") => {
                    if let Ok(text) = serde_json::from_str::<String>(&data) {
                        view.delta(&text);
                    }
                }
                Some("working") => {
                    if let Ok(text) = serde_json::from_str::<String>(&data) {
                        view.working(&text);
                    }
                }
                Some("idle") => {
                    view.idle();
                    return Ok(answered);
                }
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    view.idle();
    anyhow::bail!(
        "lost the node's event stream; `agentsite chat --resume {id}` shows where the conversation is"
    )
}

/// Shows the last entries of conversation `id`; returns its record.
async fn resume(client: &NodeClient, id: &str, view: &mut View) -> anyhow::Result<Conversation> {
    let answer: ConversationAnswer = client
        .get(
            &format!("/api/chat/{id}"),
            &[("last", &SHOWN_HISTORY.to_string())],
        )
        .await?;
    eprintln!(
        "{} ({})",
        terminal_safe(&answer.conversation.title),
        answer.conversation.id
    );
    view.past(&answer.entries);
    Ok(answer.conversation)
}

/// `agentsite chat --list`
async fn list(client: &NodeClient) -> anyhow::Result<()> {
    let conversations: Vec<Conversation> = client.get("/api/chat", &[]).await?;
    if conversations.is_empty() {
        eprintln!("no conversations yet: agentsite chat starts one");
        return Ok(());
    }
    let now = crate::chat::unix_millis();
    let rows: Vec<[String; 4]> = conversations
        .iter()
        .map(|c| {
            [
                c.id.clone(),
                super::age(now, c.updated_at),
                terminal_safe(&c.agents.join(",")).into_owned(),
                terminal_safe(&crate::text::one_line(&c.title, 60)).into_owned(),
            ]
        })
        .collect();
    super::print_table(["ID", "UPDATED", "AGENTS", "TITLE"], &rows);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn messages(typed: &str) -> Vec<String> {
        let mut lines = tokio::io::BufReader::new(typed.as_bytes()).lines();
        let mut read = Vec::new();
        while let Some(message) = read_message(&mut lines, false).await.unwrap() {
            read.push(message);
        }
        read
    }

    #[tokio::test]
    async fn a_line_is_a_message_and_triple_quotes_hold_several_lines() {
        assert_eq!(
            messages("Add 2 and 3.\n\"\"\"first line\nsecond line\n\"\"\"\n/bye\n").await,
            ["Add 2 and 3.", "first line\nsecond line", "/bye"]
        );
        assert_eq!(messages("\"\"\"one line\"\"\"\n").await, ["one line"]);
        // Input that ends inside a message sends what was typed.
        assert_eq!(messages("\"\"\"cut\nshort").await, ["cut\nshort"]);
    }
}
