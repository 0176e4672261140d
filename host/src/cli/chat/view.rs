//! A conversation as the terminal shows it: replies on stdout, streamed as
//! the model writes them when stdout is a terminal; tool calls, what the
//! node is doing and notes on stderr. Everything shown came from a model,
//! an agent or another person: each line goes through [`terminal_safe`].
//!
//! A streamed draft is not always the reply: the node checks the model's
//! wording against the tools' results and states them itself when the
//! wording does not hold. The draft is then taken back (the rows it took
//! are cleared, counted at the terminal's width) and the reply shown.

use crate::chat::{Answered, Entry, EntryBody};
use crate::text::terminal_safe;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Write as _;
use std::time::Duration;

/// What the terminal shows of one conversation.
pub struct View {
    /// Whether stdout and stderr are a terminal: then drafts stream and a
    /// spinner says what the node is doing.
    live: bool,
    spinner: Option<ProgressBar>,
    /// The draft of the reply being written, as shown.
    draft: String,
    /// Whether the entries shown are a conversation's past, which goes to
    /// stderr with the rest of what is not this command's answer.
    past: bool,
}

impl View {
    pub fn new(live: bool) -> View {
        View {
            live,
            spinner: None,
            draft: String::new(),
            past: false,
        }
    }

    /// A conversation's past entries, before anything is said in it.
    pub fn past(&mut self, entries: &[Entry]) {
        self.past = true;
        for entry in entries {
            self.entry(entry, false);
        }
        self.past = false;
    }

    /// What the node is doing for the answer now.
    pub fn working(&mut self, text: &str) {
        if !self.live || !self.draft.is_empty() {
            return;
        }
        let text = terminal_safe(&crate::text::one_line(text, 100)).into_owned();
        match &self.spinner {
            Some(spinner) => spinner.set_message(text),
            None => {
                let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                spinner.set_style(
                    ProgressStyle::with_template("{spinner} {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                spinner.set_message(text);
                spinner.enable_steady_tick(Duration::from_millis(120));
                self.spinner = Some(spinner);
            }
        }
    }

    /// Text of the reply being written.
    pub fn delta(&mut self, text: &str) {
        if !self.live {
            return;
        }
        self.stop_spinner();
        let shown = safe_lines(text);
        let mut stdout = std::io::stdout().lock();
        let _ = write!(stdout, "{shown}");
        let _ = stdout.flush();
        self.draft.push_str(&shown);
    }

    /// An entry of the conversation; `mine` when it is the message this
    /// terminal just sent (already on the screen as typed).
    pub fn entry(&mut self, entry: &Entry, mine: bool) {
        match &entry.body {
            EntryBody::Person { text, team_up } => {
                if !mine {
                    let team = if *team_up { " (team up)" } else { "" };
                    self.note(&format!(">>> {}{team}", safe_lines(text)));
                }
            }
            EntryBody::ToolUse {
                agent,
                tool,
                arguments,
                output,
                elapsed_ms,
                node,
            } => {
                let result = crate::text::one_line(&output.text(), 160);
                let (mark, said) = if output.is_error {
                    ("✗", format!("failed: {result}"))
                } else {
                    ("✓", format!("= {result}"))
                };
                self.note(&format!(
                    "  {mark} {}.{} {} {} · {elapsed_ms:.0} ms · on {}",
                    terminal_safe(agent),
                    terminal_safe(tool),
                    terminal_safe(&crate::text::one_line(&arguments.to_string(), 120)),
                    terminal_safe(&said),
                    terminal_safe(node),
                ));
            }
            EntryBody::Reply { text, answered, .. } => {
                if self.past {
                    self.note(&safe_lines(text.trim_end()));
                } else {
                    self.reply(text);
                }
                match answered {
                    Some(Answered::Partial) => {
                        self.note("  (partly answered: the reply names what was not done)");
                    }
                    Some(Answered::NotAnswered) => {
                        self.note("  (not answered: the reply says what the agents said)");
                    }
                    _ => {}
                }
            }
            EntryBody::Goal { goal } => self.note(&format!(
                "  the agents team up as goal {goal}: `agentsite goal show {goal}` follows it"
            )),
            EntryBody::Problem { text } => {
                self.note(&format!("  problem: {}", safe_lines(text)));
            }
        }
    }

    /// The answer is complete.
    pub fn idle(&mut self) {
        self.stop_spinner();
        if !self.draft.is_empty() {
            // A draft no reply followed (the answer failed): it ends here.
            println!();
            self.draft.clear();
        }
    }

    /// The reply, in place of its draft.
    fn reply(&mut self, text: &str) {
        self.stop_spinner();
        let shown = safe_lines(text.trim_end());
        let draft = std::mem::take(&mut self.draft);
        let mut stdout = std::io::stdout().lock();
        let rest = match shown.strip_prefix(draft.as_str()) {
            Some(rest) => rest.to_owned(),
            None => {
                let width = console::Term::stdout().size().1.max(1) as usize;
                let _ = write!(stdout, "{}", take_back(rows(&draft, width)));
                shown
            }
        };
        let _ = writeln!(stdout, "{rest}");
        let _ = stdout.flush();
    }

    /// A line on stderr, below the spinner.
    fn note(&mut self, line: &str) {
        self.stop_spinner();
        if !self.draft.is_empty() {
            println!();
            self.draft.clear();
        }
        eprintln!("{line}");
    }

    fn stop_spinner(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }
}

/// `text` made safe for a terminal line by line: its line breaks stay.
fn safe_lines(text: &str) -> String {
    text.split('\n')
        .map(|line| terminal_safe(line.strip_suffix('\r').unwrap_or(line)).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rows `text`, written from the start of a row, takes on a terminal
/// `width` columns wide (a terminal wraps a full row at the next character).
fn rows(text: &str, width: usize) -> usize {
    let mut rows = 1;
    let mut column = 0;
    for c in text.chars() {
        if c == '\n' {
            rows += 1;
            column = 0;
            continue;
        }
        let wide = console::measure_text_width(c.encode_utf8(&mut [0; 4]));
        if column + wide > width {
            rows += 1;
            column = 0;
        }
        column += wide;
    }
    rows
}

/// The escapes that take back `rows` rows, the cursor on the last: to the
/// first's start, and everything below cleared.
fn take_back(rows: usize) -> String {
    match rows {
        0 | 1 => "\r\x1b[J".to_owned(),
        rows => format!("\r\x1b[{}A\x1b[J", rows - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_count_line_breaks_and_wrapping() {
        assert_eq!(rows("", 80), 1);
        assert_eq!(rows("short", 80), 1);
        assert_eq!(rows("one\ntwo", 80), 2);
        assert_eq!(
            rows(&"x".repeat(80), 80),
            1,
            "a full row wraps at the next character"
        );
        assert_eq!(rows(&"x".repeat(81), 80), 2);
        assert_eq!(
            rows(&"界".repeat(41), 80),
            2,
            "wide characters take two columns"
        );
    }

    #[test]
    fn a_draft_is_taken_back_from_its_first_row() {
        assert_eq!(take_back(1), "\r\x1b[J");
        assert_eq!(take_back(3), "\r\x1b[2A\x1b[J");
    }

    #[test]
    fn line_breaks_stay_and_escapes_are_shown() {
        assert_eq!(
            safe_lines("one\r\ntwo \x1b[31mred"),
            "one\ntwo \\x1b[31mred"
        );
    }
}
