//! How the WASI capabilities are granted: host folders (`fs`), the node's
//! environment variables (`env`) and outgoing HTTP (`http`).
//!
//! ```toml
//! fs = [{ host = "/srv/notes", guest = "/notes", access = "read-write" }]
//! http = ["https://api.example.com", "http://127.0.0.1:*"]
//! env = ["API_KEY"]
//! ```

use super::http_allow::HttpPattern;
use crate::capabilities::grant::{Capability, value_of};
use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A host folder mounted into the agent's filesystem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsGrant {
    /// The folder on the host (absolute).
    pub host: PathBuf,
    /// Where the agent sees it, such as `/data`.
    pub guest: String,
    #[serde(default)]
    pub access: Access,
}

/// What an agent may do in a granted folder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    #[default]
    ReadOnly,
    ReadWrite,
}

/// Takes the entries that match out of a list; whether any was.
fn remove_where<T>(list: &mut Vec<T>, matches: impl Fn(&T) -> bool) -> bool {
    let before = list.len();
    list.retain(|entry| !matches(entry));
    list.len() != before
}

fn same_guest(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// Host folders (`fs`).
pub struct Fs;

impl Capability for Fs {
    const ENTRY: Option<&'static str> = Some("fs=/guest");
    type Grant = Vec<FsGrant>;
    type Granted = Vec<FsGrant>;

    fn validate(folders: &Vec<FsGrant>) -> Result<(), String> {
        let mut guests = std::collections::HashSet::new();
        for fs in folders {
            if !fs.host.is_absolute() {
                return Err(format!(
                    "fs host folder {:?} must be an absolute path",
                    fs.host
                ));
            }
            if !fs.guest.starts_with('/') || fs.guest.split('/').any(|part| part == "..") {
                return Err(format!(
                    "fs guest path {:?} must be absolute (start with /) and contain no `..`",
                    fs.guest
                ));
            }
            if !guests.insert(fs.guest.trim_end_matches('/')) {
                return Err(format!("fs guest path {:?} is granted twice", fs.guest));
            }
        }
        Ok(())
    }

    /// `fs=/host/folder:/guest/path[:rw]`, in place of a folder granted
    /// at the same guest path.
    fn parse(
        item: &str,
        value: Option<&str>,
        now: Option<&Vec<FsGrant>>,
    ) -> anyhow::Result<Vec<FsGrant>> {
        let fs = parse_fs(value_of(item, value, "/host/folder:/guest/path[:rw]")?)?;
        let mut folders = now.cloned().unwrap_or_default();
        folders.retain(|f| !same_guest(&f.guest, &fs.guest));
        folders.push(fs);
        Ok(folders)
    }

    fn revoke_entry(folders: &mut Vec<FsGrant>, guest: &str) -> bool {
        remove_where(folders, |f| same_guest(&f.guest, guest))
    }

    fn is_empty(folders: &Vec<FsGrant>) -> bool {
        folders.is_empty()
    }

    fn resolve(folders: &Vec<FsGrant>) -> Vec<FsGrant> {
        folders.clone()
    }

    fn describe(folders: &Vec<FsGrant>) -> Vec<String> {
        folders
            .iter()
            .map(|fs| {
                let access = match fs.access {
                    Access::ReadOnly => "read-only",
                    Access::ReadWrite => "read-write",
                };
                format!("fs       {} at {} ({access})", fs.host.display(), fs.guest)
            })
            .collect()
    }

    fn revocable(folders: &Vec<FsGrant>) -> Vec<(String, String)> {
        folders
            .iter()
            .map(|fs| {
                (
                    format!("fs {} at {}", fs.host.display(), fs.guest),
                    format!("fs={}", fs.guest),
                )
            })
            .collect()
    }
}

fn parse_fs(text: &str) -> anyhow::Result<FsGrant> {
    let mut parts = text.split(':');
    let (Some(host), Some(guest)) = (parts.next(), parts.next()) else {
        anyhow::bail!("write it as fs=/host/folder:/guest/path[:rw]");
    };
    let access = match parts.next() {
        None | Some("ro") => Access::ReadOnly,
        Some("rw") => Access::ReadWrite,
        Some(other) => anyhow::bail!("access {other:?} is neither ro nor rw"),
    };
    anyhow::ensure!(
        parts.next().is_none(),
        "write it as fs=/host/folder:/guest/path[:rw]"
    );
    let host = PathBuf::from(host);
    // The folder is named as it is now: a symlink swapped in later cannot
    // move the grant somewhere else.
    let host =
        std::fs::canonicalize(&host).with_context(|| format!("host folder {}", host.display()))?;
    anyhow::ensure!(host.is_dir(), "{} is not a folder", host.display());
    Ok(FsGrant {
        host,
        guest: guest.to_owned(),
        access,
    })
}

/// Outgoing HTTP (`http`), by origin pattern.
pub struct Http;

impl Capability for Http {
    /// WASI 0.2's outgoing handler and WASI 0.3's client.
    const IMPORTS: &'static [&'static str] = &["wasi:http/outgoing-handler", "wasi:http/client"];
    const ENTRY: Option<&'static str> = Some("http=PATTERN");
    type Grant = Vec<HttpPattern>;
    type Granted = Vec<HttpPattern>;

    /// `http=https://host[:port]`, once however often it is granted.
    fn parse(
        item: &str,
        value: Option<&str>,
        now: Option<&Vec<HttpPattern>>,
    ) -> anyhow::Result<Vec<HttpPattern>> {
        let pattern: HttpPattern = value_of(item, value, "https://host[:port]")?.parse()?;
        let mut patterns = now.cloned().unwrap_or_default();
        if !patterns.contains(&pattern) {
            patterns.push(pattern);
        }
        Ok(patterns)
    }

    fn revoke_entry(patterns: &mut Vec<HttpPattern>, pattern: &str) -> bool {
        remove_where(patterns, |p| p.to_string() == pattern)
    }

    fn is_empty(patterns: &Vec<HttpPattern>) -> bool {
        patterns.is_empty()
    }

    fn resolve(patterns: &Vec<HttpPattern>) -> Vec<HttpPattern> {
        patterns.clone()
    }

    fn describe(patterns: &Vec<HttpPattern>) -> Vec<String> {
        patterns.iter().map(|p| format!("http     {p}")).collect()
    }

    fn revocable(patterns: &Vec<HttpPattern>) -> Vec<(String, String)> {
        patterns
            .iter()
            .map(|p| (format!("http {p}"), format!("http={p}")))
            .collect()
    }
}

/// The node's environment variables (`env`), by name.
pub struct Env;

impl Capability for Env {
    const ENTRY: Option<&'static str> = Some("env=NAME");
    type Grant = Vec<String>;
    type Granted = Vec<String>;

    fn validate(names: &Vec<String>) -> Result<(), String> {
        for name in names {
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!(
                    "env name {name:?} is not a variable name (letters, digits and _)"
                ));
            }
        }
        Ok(())
    }

    fn parse(
        item: &str,
        value: Option<&str>,
        now: Option<&Vec<String>>,
    ) -> anyhow::Result<Vec<String>> {
        let name = value_of(item, value, "NAME")?.to_owned();
        let mut names = now.cloned().unwrap_or_default();
        if !names.contains(&name) {
            names.push(name);
        }
        Ok(names)
    }

    fn revoke_entry(names: &mut Vec<String>, name: &str) -> bool {
        remove_where(names, |n| n == name)
    }

    fn is_empty(names: &Vec<String>) -> bool {
        names.is_empty()
    }

    fn resolve(names: &Vec<String>) -> Vec<String> {
        names.clone()
    }

    fn describe(names: &Vec<String>) -> Vec<String> {
        names
            .iter()
            .map(|name| format!("env      {name}"))
            .collect()
    }

    fn revocable(names: &Vec<String>) -> Vec<(String, String)> {
        names
            .iter()
            .map(|name| (format!("env {name}"), format!("env={name}")))
            .collect()
    }
}
