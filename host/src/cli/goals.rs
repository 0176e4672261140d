//! `agentsite goal`, `goals`, `goal show|say|cancel`: goals given to the
//! running node, followed live (a spinner per running task) or replayed.
//!
//! Everything a goal's messages hold came from a model or an agent: it is
//! escaped before it reaches the terminal.

use super::network::NodeClient;
use crate::config::DataDir;
use crate::goals::api::GoalAnswer;
use crate::goals::message::{Body, GoalRecord, GoalState, Message, Speaker};
use crate::text::terminal_safe;
use anyhow::Context as _;
use futures::StreamExt as _;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::time::Duration;

/// `agentsite goal ...`
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct GoalArgs {
    #[command(subcommand)]
    pub command: Option<GoalCommand>,
    /// The goal, in words.
    #[arg(required = true, value_name = "TEXT")]
    pub text: Option<String>,
    /// The team: agents by name, id or search words, comma-separated
    /// [default: the node forms one from this node's agents and the network's].
    #[arg(long, value_delimiter = ',', value_name = "AGENT,...")]
    pub team: Vec<String>,
    /// Times the node may look for more agents when no member's tool can take what is left (0: never) [default: `depth` under [goals]].
    #[arg(long)]
    pub depth: Option<u32>,
    /// Requests to the model (a step's call, the conclusion's wording) before the goal stops [default: `turns` under [goals]].
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Wall-clock limit, such as 90s or 5m [default: `deadline` under [goals]].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub deadline: Option<Duration>,
    /// The node's model that speaks for the members [default: the node's default model].
    #[arg(long)]
    pub model: Option<String>,
    /// Check other nodes' answers by running replayable calls again: none,
    /// sampled (each node's first answer, then one in four) or all
    /// [default: `verify` under [goals]].
    #[arg(long, value_parser = ["none", "sampled", "all"])]
    pub verify: Option<String>,
    /// Print the goal's id and return; the goal runs on.
    #[arg(long)]
    pub detach: bool,
}

#[derive(clap::Subcommand)]
pub enum GoalCommand {
    /// Replay a goal: its team, every message, its conclusion.
    Show {
        id: String,
        /// Print the record and messages as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Continue a running or finished goal with a message.
    Say {
        id: String,
        text: String,
        /// Return at once instead of following the goal.
        #[arg(long)]
        detach: bool,
    },
    /// Stop a running goal and every call it started.
    Cancel { id: String },
}

/// `agentsite goal ...`
pub async fn goal(data: &DataDir, args: GoalArgs) -> anyhow::Result<bool> {
    let client = NodeClient::connect(data)?;
    match args.command {
        Some(GoalCommand::Show { id, json }) => show(&client, &id, json).await,
        Some(GoalCommand::Say { id, text, detach }) => {
            let before: GoalAnswer = client.get(&format!("/api/goals/{id}"), &[]).await?;
            let after = before.messages.last().map_or(0, |m| m.seq);
            client
                .post(
                    &format!("/api/goals/{id}/messages"),
                    json!({ "text": text }),
                )
                .await
                .with_context(|| format!("cannot continue goal {id}"))?;
            if detach {
                println!("{id}");
                return Ok(true);
            }
            follow(&client, &id, after).await
        }
        Some(GoalCommand::Cancel { id }) => {
            client
                .post(&format!("/api/goals/{id}/cancel"), json!({}))
                .await
                .with_context(|| format!("cannot cancel goal {id}"))?;
            eprintln!("cancelling goal {id}");
            Ok(true)
        }
        None => {
            let text = args.text.unwrap_or_default();
            let mut limits = serde_json::Map::new();
            if let Some(depth) = args.depth {
                limits.insert("depth".into(), depth.into());
            }
            if let Some(turns) = args.max_turns {
                limits.insert("turns".into(), turns.into());
            }
            if let Some(deadline) = args.deadline {
                limits.insert(
                    "deadline".into(),
                    humantime::format_duration(deadline).to_string().into(),
                );
            }
            let body = json!({
                "text": text,
                "team": args.team,
                "limits": limits,
                "model": args.model,
                "verify": args.verify,
            });
            let record: GoalRecord = client
                .post("/api/goals", body)
                .await
                .context("the node did not take the goal")?
                .json()
                .await
                .context("the node's answer is not a goal")?;
            if args.detach {
                println!("{}", record.id);
                return Ok(true);
            }
            eprintln!(
                "goal {} (cancel: agentsite goal cancel {})",
                record.id, record.id
            );
            follow(&client, &record.id, 0).await
        }
    }
}

/// `agentsite goals`
pub async fn list(data: &DataDir, json: bool) -> anyhow::Result<()> {
    let client = NodeClient::connect(data)?;
    let goals: Vec<GoalRecord> = client.get("/api/goals", &[("limit", "100")]).await?;
    if json {
        return super::print_json(&goals);
    }
    if goals.is_empty() {
        eprintln!("no goals yet: agentsite goal \"...\" gives the node one");
        return Ok(());
    }
    let now = crate::goals::message::unix_millis();
    let rows: Vec<[String; 6]> = goals
        .iter()
        .map(|g| {
            [
                g.id.clone(),
                g.state.as_str().to_owned(),
                super::age(now, g.created_at),
                terminal_safe(&g.team.join(",")).into_owned(),
                format!(
                    "{} turns, {} tokens, {} calls",
                    g.usage.turns, g.usage.tokens, g.usage.tool_calls
                ),
                terminal_safe(&crate::text::one_line(&g.text, 50)).into_owned(),
            ]
        })
        .collect();
    super::print_table(["ID", "STATE", "AGE", "TEAM", "COST", "GOAL"], &rows);
    Ok(())
}

async fn show(client: &NodeClient, id: &str, json: bool) -> anyhow::Result<bool> {
    let answer: GoalAnswer = client.get(&format!("/api/goals/{id}"), &[]).await?;
    if json {
        super::print_json(&answer)?;
        return Ok(true);
    }
    let mut view = View::new(false);
    for message in &answer.messages {
        view.message(message);
    }
    view.end(&answer.record);
    Ok(answer.record.state == GoalState::Concluded)
}

/// Follows goal `id` from message `after` until it stops; Ctrl-C cancels it.
async fn follow(client: &NodeClient, id: &str, after: u64) -> anyhow::Result<bool> {
    let mut view = View::new(std::io::stderr().is_terminal());
    let mut after = after;
    // A stream that breaks (the node restarting, a proxy) is opened again
    // from the last message seen.
    for _attempt in 0..5 {
        let mut events = client
            .events(&format!("/api/goals/{id}/events"), after)
            .await?;
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                _ = tokio::signal::ctrl_c() => {
                    view.clear();
                    let _ = client.post(&format!("/api/goals/{id}/cancel"), json!({})).await;
                    eprintln!("cancelled goal {id}");
                    return Ok(false);
                }
            };
            let Some(Ok(event)) = event else { break };
            let Some(data) = event.data else { continue };
            match event.event.as_deref() {
                Some("message") => {
                    let message: Message = serde_json::from_str(&data)
                        .context("the node sent a message this command cannot read")?;
                    after = message.seq;
                    view.message(&message);
                }
                Some("state") => {
                    let record: GoalRecord = serde_json::from_str(&data)
                        .context("the node sent a state this command cannot read")?;
                    if !record.state.is_active() {
                        view.end(&record);
                        return Ok(record.state == GoalState::Concluded);
                    }
                }
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    view.clear();
    anyhow::bail!(
        "lost the node's event stream; `agentsite goal show {id}` shows where the goal is"
    )
}

/// The conversation as the terminal shows it.
struct View {
    /// Spinners of running tasks, when stderr is a terminal.
    bars: Option<MultiProgress>,
    running: HashMap<u32, ProgressBar>,
    /// The team (task number) each task's sub-team speaks in, for indents.
    task_team: HashMap<u32, Option<u32>>,
    /// Members already shown: a team that grows shows only who joins.
    shown_members: Vec<String>,
    /// Where each task's call ran and how long it took, for its result.
    calls: HashMap<u32, String>,
}

impl View {
    fn new(live: bool) -> View {
        View {
            bars: live.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr())),
            running: HashMap::new(),
            task_team: HashMap::new(),
            shown_members: Vec::new(),
            calls: HashMap::new(),
        }
    }

    fn depth(&self, team: Option<u32>) -> usize {
        let mut depth = 0;
        let mut team = team;
        while let Some(task) = team {
            depth += 1;
            team = self.task_team.get(&task).copied().flatten();
            if depth > 16 {
                break;
            }
        }
        depth
    }

    fn line(&self, text: &str) {
        match &self.bars {
            Some(bars) => {
                let _ = bars.println(text);
            }
            None => println!("{text}"),
        }
    }

    fn message(&mut self, message: &Message) {
        let indent = "    ".repeat(self.depth(message.team));
        let who = terminal_safe(message.speaker.name()).into_owned();
        let safe = |text: &str| terminal_safe(text).into_owned();
        let lines: Vec<String> = match &message.body {
            Body::Goal { text } => vec![format!("goal: {}", safe(text))],
            Body::Say { text } => vec![format!("person: {}", safe(text))],
            Body::Team { members, queries } => {
                let mut lines = Vec::new();
                if !queries.is_empty() && self.shown_members.is_empty() {
                    let q: Vec<String> = queries.iter().map(|q| format!("{:?}", safe(q))).collect();
                    lines.push(format!("searched for {}", q.join(", ")));
                }
                let title = if message.team.is_some() {
                    "sub-team"
                } else {
                    "team"
                };
                let joining: Vec<_> = members
                    .iter()
                    .filter(|m| !self.shown_members.contains(&m.name))
                    .collect();
                if !joining.is_empty() {
                    if self.shown_members.is_empty() {
                        lines.push(format!("{title}:"));
                    } else {
                        lines.push(format!("joins the {title}:"));
                    }
                }
                for m in joining {
                    self.shown_members.push(m.name.clone());
                    let node = if m.local {
                        "this node".to_owned()
                    } else {
                        short(&m.node)
                    };
                    lines.push(format!(
                        "  {} ({}, {}) — {}",
                        safe(&m.name),
                        short(&m.agent.to_string()),
                        node,
                        safe(&m.reason)
                    ));
                }
                lines
            }
            Body::Assign { text, tasks } => {
                // The node hands a step's call to a member: the call says
                // it all. A member's own assignment shows its words.
                let mut lines = Vec::new();
                if message.speaker != Speaker::Node {
                    lines.push(format!("{who} assigns: {}", safe(text)));
                }
                for task in tasks {
                    self.task_team.insert(task.task, message.team);
                    lines.push(format!(
                        "  #{} → {}: {}",
                        task.task,
                        safe(&task.assignee),
                        safe(&task.text)
                    ));
                    self.start_spinner(
                        task.task,
                        &format!("{indent}#{} {}", task.task, safe(&task.assignee)),
                    );
                }
                lines
            }
            Body::Progress { task, text, call } => match call {
                // A call's place and time go with its result, shown next.
                Some(call) => {
                    if let Some(bar) = self.running.get(task) {
                        bar.set_message(format!("{} ({} ms)", safe(&call.tool), call.millis));
                    }
                    self.calls.insert(
                        *task,
                        format!("on {}, {} ms{}", short(&call.node), call.millis, seal(call)),
                    );
                    // Nodes caught answering wrongly are said at once.
                    call.check
                        .iter()
                        .flat_map(|check| &check.caught)
                        .map(|caught| format!("  #{task} wrong answer caught: {}", safe(caught)))
                        .collect()
                }
                None => vec![format!("  #{task} {}", safe(text))],
            },
            Body::Result { task, ok, text } => {
                if let Some(bar) = self.running.remove(task) {
                    bar.finish_and_clear();
                }
                let mark = if *ok { "done" } else { "failed" };
                let place = self
                    .calls
                    .remove(task)
                    .map(|p| format!(", {p}"))
                    .unwrap_or_default();
                let mut lines = text.lines();
                let first = lines.next().unwrap_or_default();
                let mut shown = vec![format!("  #{task} {mark} ({who}{place}): {}", safe(first))];
                shown.extend(lines.map(|line| format!("     {}", safe(line))));
                shown
            }
            Body::Failure { text } => vec![format!("failure: {}", safe(text))],
            Body::Notice { text } => vec![format!("note: {}", safe(text))],
            Body::Conclusion { text, limit } => {
                let mut lines = vec![match limit {
                    Some(limit) => format!("stopped by the {limit} limit; found so far:"),
                    None => format!("conclusion ({who}):"),
                }];
                lines.extend(text.lines().map(|l| format!("  {}", safe(l))));
                lines
            }
        };
        for line in lines {
            self.line(&format!("{indent}{line}"));
        }
    }

    fn start_spinner(&mut self, task: u32, label: &str) {
        let Some(bars) = &self.bars else { return };
        let bar = bars.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} {elapsed} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(label.to_owned());
        bar.enable_steady_tick(Duration::from_millis(120));
        self.running.insert(task, bar);
    }

    fn clear(&mut self) {
        for (_, bar) in self.running.drain() {
            bar.finish_and_clear();
        }
    }

    fn end(&mut self, record: &GoalRecord) {
        self.clear();
        let usage = &record.usage;
        let reason = record
            .reason
            .as_ref()
            .map(|r| format!(": {}", terminal_safe(r)))
            .unwrap_or_default();
        eprintln!(
            "goal {} {}{reason} ({} turns, {} tasks, {} tool calls, {} tokens)",
            record.id,
            record.state.as_str(),
            usage.turns,
            usage.tasks,
            usage.tool_calls,
            usage.tokens
        );
    }
}

/// An id or peer id shortened for a line.
fn short(text: &str) -> String {
    let text = text.strip_prefix("sha256:").unwrap_or(text);
    match text.char_indices().nth(12) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// What a step's call proves, after where and how long it ran: checked by
/// running it again, not checked, or only signed by the node that ran it.
fn seal(call: &crate::goals::message::ToolCallRecord) -> &'static str {
    use crate::goals::message::CheckOutcome;
    match (&call.check, &call.receipt) {
        (Some(check), _) if check.outcome == CheckOutcome::Confirmed => ", checked",
        (Some(_), _) => ", not checked",
        (None, Some(_)) => ", signed",
        (None, None) => "",
    }
}
