//! Text that came from an agent or a peer, made fit to show.
//!
//! An agent chooses its description, tool titles, error messages and log
//! lines; a peer chooses what its manifests say. None of it may drive the
//! operator's terminal: an escape sequence in a description could rewrite
//! what `inspect` shows, hide a line or retitle the window. Every such
//! string goes through [`terminal_safe`] on its way to a terminal or a log
//! line, and long ones through [`truncated`] where a bound applies.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every character that a terminal would act on, rather than
/// print, made visible: C0 and C1 controls and DEL as `\x1b`-style escapes,
/// and the Unicode marks that reorder or hide text (bidirectional
/// overrides and isolates, zero-width characters) as `\u{202e}`. Tabs stay;
/// newlines do not, so that one message cannot pose as several lines.
/// Text without such characters is returned as it is.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    escaped(text, |shown, c| {
        if (c as u32) < 0x100 {
            let _ = write!(shown, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(shown, "\\u{{{:x}}}", c as u32);
        }
    })
}

/// JSON text (as serde_json writes it) with the characters of
/// [`terminal_safe`] that JSON leaves raw (DEL, C1 controls, bidirectional
/// and zero-width marks) written as `\uXXXX` escapes: the same JSON to a
/// parser, inert on a terminal. Such characters only occur inside strings,
/// where the escape is valid.
pub fn json_terminal_safe(json: &str) -> Cow<'_, str> {
    // The newlines of indented JSON lie between tokens (inside strings
    // JSON escapes them), so they stay: they are the layout.
    let lines: Vec<Cow<'_, str>> = json
        .split('\n')
        .map(|line| {
            // All of them are in the Basic Multilingual Plane: four hex digits.
            escaped(line, |shown, c| {
                let _ = write!(shown, "\\u{:04x}", c as u32);
            })
        })
        .collect();
    if lines.iter().all(|line| matches!(line, Cow::Borrowed(_))) {
        return Cow::Borrowed(json);
    }
    Cow::Owned(lines.join("\n"))
}

/// `text` with each character that [`needs_escape`] written by `escape`;
/// borrowed when there is none.
fn escaped(text: &str, escape: impl Fn(&mut String, char)) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_escape(c) {
            escape(&mut shown, c);
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

fn needs_escape(c: char) -> bool {
    match c {
        '\t' => false,
        c if c.is_control() => true,
        // Bidirectional embeddings, overrides and isolates; zero-width
        // spaces and joiners; the BOM; line and paragraph separators.
        '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' => true,
        '\u{feff}' => true,
        _ => false,
    }
}

/// The one of `known` that `word` was most likely meant to be, when one is
/// close enough to be a typo or a shortening of it (`calculater` and
/// `calculator`, `devide` and `divide`, not `stats` and `notes`):
/// Jaro-Winkler similarity of at least 0.8, near what clap asks before it
/// suggests a subcommand.
pub fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .filter(|candidate| *candidate != word)
        .map(|candidate| (strsim::jaro_winkler(word, candidate), candidate))
        .filter(|(similarity, _)| *similarity >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// `did you mean "X"? ` for the [`closest`] of `known`, else nothing.
pub fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, known).map_or_else(String::new, |c| {
        format!("did you mean {:?}? ", terminal_safe(c))
    })
}

/// `text` cut to at most `max` bytes at a character boundary, with a note
/// of how much was left out when it was cut.
pub fn truncated(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let cut = floor_char_boundary(&text, max);
    let left_out = text.len() - cut;
    text.truncate(cut);
    let _ = write!(text, "… ({left_out} more bytes)");
    text
}

/// The first at most `max` bytes of `text`, at a character boundary, with
/// an ellipsis when cut: for quoting untrusted text inside an error.
pub fn excerpt(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(format!("{}…", &text[..floor_char_boundary(text, max)]))
    }
}

/// `text` as one line of at most `max` bytes (and an ellipsis): control
/// characters become spaces. For a message from elsewhere inside an error.
pub fn one_line(text: &str, max: usize) -> String {
    excerpt(text, max)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .trim()
        .to_owned()
}

pub(crate) fn floor_char_boundary(text: &str, max: usize) -> usize {
    let mut cut = max.min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    cut
}

/// The bytes `value` takes as JSON, counted without building the text.
/// What went wrong, in a person's words: the root of an error's sources
/// ("Connection refused", "dns error: ..."), which libraries wrap in
/// layers named after their types; the error itself when its root says
/// nothing.
pub fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut root = error;
    while let Some(source) = root.source() {
        root = source;
    }
    match root.to_string() {
        text if text.trim().is_empty() => error.to_string(),
        text => text,
    }
}

pub fn json_size<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serializing the node's own types into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The brackets of JSON `bytes` outside its strings, each with its offset
/// and the depth of nesting after it: an opening one a level in, a closing
/// one a level out (never below the top). One pass, nothing parsed.
pub fn json_brackets(bytes: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    bytes.iter().enumerate().filter_map(move |(offset, &byte)| {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            return None;
        }
        match byte {
            b'"' => {
                in_string = true;
                None
            }
            b'{' | b'[' => {
                depth += 1;
                Some((offset, depth))
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                Some((offset, depth))
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_brackets_are_counted_outside_strings() {
        let found: Vec<(usize, usize)> = json_brackets(br#"{"a": ["}", {}]}"#).collect();
        assert_eq!(found, [(0, 1), (6, 2), (12, 3), (13, 2), (14, 1), (15, 0)]);
        // A stray closing bracket stays at the top.
        assert_eq!(json_brackets(b"]{").collect::<Vec<_>>(), [(0, 0), (1, 1)]);
    }

    #[test]
    fn plain_text_is_untouched() {
        assert!(matches!(
            terminal_safe("Arithmetic, naïvely — 2×3\tok"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn escape_sequences_are_made_visible() {
        assert_eq!(
            terminal_safe("\x1b[2K\x1b[1Aasks for: nothing\r\n"),
            "\\x1b[2K\\x1b[1Aasks for: nothing\\x0d\\x0a"
        );
        // C1 controls (CSI as one character), DEL, and a bidi override.
        assert_eq!(terminal_safe("a\u{9b}2Jb\u{7f}"), "a\\x9b2Jb\\x7f");
        assert_eq!(terminal_safe("txt.\u{202e}exe"), "txt.\\u{202e}exe");
    }

    #[test]
    fn json_keeps_its_meaning_and_loses_its_escapes() {
        let value = serde_json::json!({"description": "a\u{9b}2J\u{7f}\u{202e}b\x1b"});
        let json = serde_json::to_string(&value).unwrap();
        let shown = json_terminal_safe(&json);
        assert!(!shown.chars().any(needs_escape), "{shown}");
        let parsed: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(parsed, value);
        // Indented JSON keeps its lines, and its strings' escapes.
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let shown = json_terminal_safe(&pretty);
        assert_eq!(shown.lines().count(), 3, "{shown}");
        assert!(
            !shown.lines().any(|l| l.chars().any(needs_escape)),
            "{shown}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&shown).unwrap(),
            value
        );
    }

    #[test]
    fn a_typo_is_matched_to_the_name_it_was_meant_to_be() {
        let names = ["calculator", "wordsmith", "notes"];
        assert_eq!(closest("calculater", names), Some("calculator"));
        assert_eq!(closest("wordsmit", names), Some("wordsmith"));
        assert_eq!(closest("stats", names), None);
        assert_eq!(closest("calculator", names), None);
        assert_eq!(
            did_you_mean("devide", ["add", "divide"]),
            "did you mean \"divide\"? "
        );
        assert_eq!(did_you_mean("power", ["add", "divide"]), "");
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        assert_eq!(truncated("héllo".into(), 2), "h… (5 more bytes)");
        assert_eq!(truncated("short".into(), 10), "short");
        assert_eq!(excerpt("ééé", 3), "é…");
    }
}
