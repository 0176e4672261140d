//! How far a grant of folders, environment variables and HTTP opens the
//! sandbox.
//!
//! What reaches the node itself is refused, whichever way it is asked for
//! (typed, imported from a policy file, sent from the pages, written into
//! the policy file by hand), unless the operator grants it with
//! `--dangerously-allow-node-access`: the node's data directory and
//! anything above or below it, its configuration and policy files, the
//! kernel's views of the machine (`/proc`, `/sys`, `/dev`, and wherever else
//! they are mounted), the node's secrets in its environment, every host at
//! once and the cloud's metadata service. An agent given `/proc` reads
//! `/proc/self/environ`, the node's secrets; one given the data directory
//! rewrites the policy file to grant itself more.
//!
//! What is broad (a writable folder outside the scratch area, every
//! subdomain of a top-level domain, every port of a host) is granted, but
//! an import of a stranger's policy file asks before it grants it.

use super::grant::{Access, FsGrant};
use super::http_allow::HttpPattern;
use crate::capabilities::grant::Grant;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The kernel's views of the machine, wherever a folder tree keeps them.
const KERNEL_FOLDERS: [(&str, &str); 3] = [
    (
        "/proc",
        "the kernel's view of the machine's processes (/proc/self/environ holds the node's secrets, /proc/self/mem its memory)",
    ),
    ("/sys", "the kernel's devices and settings"),
    (
        "/dev",
        "the machine's devices (its disks, its memory, its terminals)",
    ),
];

/// Filesystems that are the kernel's views, by the type the mount table
/// gives them: a bind mount of `/proc` elsewhere is still `/proc`.
const KERNEL_FILESYSTEMS: [&str; 13] = [
    "proc",
    "sysfs",
    "devtmpfs",
    "devpts",
    "debugfs",
    "tracefs",
    "securityfs",
    "bpf",
    "cgroup",
    "cgroup2",
    "efivarfs",
    "configfs",
    "pstore",
];

/// The prefix of every variable the node reads its own settings and
/// secrets from (`AGENTSITE_TOKEN`, `AGENTSITE_REGISTRY_PASSWORD`, ...).
const NODE_VARIABLES: &str = "AGENTSITE_";

/// Variables that hold credentials of the node's, whatever its
/// configuration names.
const SECRET_VARIABLES: [(&str, &str); 3] = [
    (
        "OPENAI_API_KEY",
        "holds the key of the node's OpenAI-compatible models",
    ),
    (
        "REGISTRY_AUTH_FILE",
        "names the file of the node's registry credentials",
    ),
    (
        "DOCKER_CONFIG",
        "names the folder of the node's registry credentials",
    ),
];

/// The node's own places and secrets, which no grant hands an agent unless
/// the operator says so.
#[derive(Debug, Clone, Default)]
pub struct NodeSelf {
    /// Folders no granted folder may be, lie inside or contain, each with
    /// what it is.
    folders: Vec<(PathBuf, String)>,
    /// Files no granted folder may contain.
    files: Vec<(PathBuf, String)>,
    /// Variables holding the node's secrets (besides every `AGENTSITE_`
    /// one), each with what it holds.
    secrets: BTreeMap<String, String>,
}

/// One entry of a grant that reaches the node, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    /// The entry as a table's `node_access` list names it: `fs /proc`,
    /// `env AGENTSITE_TOKEN`, `http http://*:*`.
    pub entry: String,
    /// How it reaches the node.
    pub why: String,
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.entry, self.why)
    }
}

impl NodeSelf {
    /// The node whose data is in `data_dir`, reading `files` (its
    /// configuration and policy, with what each is) and keeping secrets in
    /// `secrets` (variable names with what each holds).
    pub fn new(
        data_dir: &Path,
        files: impl IntoIterator<Item = (PathBuf, &'static str)>,
        secrets: impl IntoIterator<Item = (String, String)>,
    ) -> NodeSelf {
        let mut folders = vec![(
            real(data_dir),
            "the node's data directory (its keys, its policy, its stores and agents)".to_owned(),
        )];
        folders.extend(
            KERNEL_FOLDERS
                .iter()
                .map(|(folder, what)| (PathBuf::from(folder), (*what).to_owned())),
        );
        for (mount, filesystem) in kernel_mounts() {
            if !folders.iter().any(|(folder, _)| mount.starts_with(folder)) {
                folders.push((
                    mount,
                    format!("a mount of the kernel's {filesystem} filesystem"),
                ));
            }
        }
        let mut known: BTreeMap<String, String> = SECRET_VARIABLES
            .iter()
            .map(|(name, what)| ((*name).to_owned(), (*what).to_owned()))
            .collect();
        known.extend(secrets);
        NodeSelf {
            folders,
            files: files
                .into_iter()
                .map(|(file, what)| (real(&file), what.to_owned()))
                .collect(),
            secrets: known,
        }
    }

    /// Every entry of `grant` that reaches the node, whether the operator
    /// allowed it or not.
    pub fn reaches(&self, grant: &Grant) -> Vec<Reach> {
        let mut reaches = Vec::new();
        for fs in grant.fs.iter().flatten() {
            if let Some(why) = self.folder_reach(fs) {
                reaches.push(Reach {
                    entry: fs_entry(fs),
                    why,
                });
            }
        }
        for name in grant.env.iter().flatten() {
            if let Some(why) = self.variable_reach(name) {
                reaches.push(Reach {
                    entry: env_entry(name),
                    why,
                });
            }
        }
        for pattern in grant.http.iter().flatten() {
            if let Some(why) = pattern_reach(pattern) {
                reaches.push(Reach {
                    entry: http_entry(pattern),
                    why,
                });
            }
        }
        reaches
    }

    /// The entries of `grant` that reach the node and that its table does
    /// not list as allowed.
    pub fn refused(&self, grant: &Grant) -> Vec<Reach> {
        let mut reaches = self.reaches(grant);
        reaches.retain(|reach| !grant.node_access.contains(&reach.entry));
        reaches
    }

    fn folder_reach(&self, fs: &FsGrant) -> Option<String> {
        let host = real(&fs.host);
        if host == Path::new("/") {
            return Some(
                "is the host's root: it holds the node's data, /proc with the node's secrets, and every other file of the machine"
                    .into(),
            );
        }
        for (place, what) in &self.folders {
            let shown = place.display();
            if host == *place {
                return Some(format!("is {shown}, {what}"));
            }
            if host.starts_with(place) {
                return Some(format!("is inside {shown}, {what}"));
            }
            if place.starts_with(&host) {
                return Some(format!("contains {shown}, {what}"));
            }
        }
        self.files
            .iter()
            .find(|(file, _)| file.starts_with(&host))
            .map(|(file, what)| format!("contains {}, {what}", file.display()))
    }

    fn variable_reach(&self, name: &str) -> Option<String> {
        if name.starts_with(NODE_VARIABLES) {
            return Some(match name {
                "AGENTSITE_TOKEN" => "is the node's bearer token".to_owned(),
                _ if name.starts_with("AGENTSITE_REGISTRY_") => {
                    "is one of the node's registry credentials".to_owned()
                }
                _ => "is one of the node's own settings".to_owned(),
            });
        }
        self.secrets.get(name).cloned()
    }
}

fn pattern_reach(pattern: &HttpPattern) -> Option<String> {
    if pattern.any_host() {
        return Some(
            "allows every host: this machine's own services (the node's API on loopback among them) and the cloud's metadata service with them"
                .into(),
        );
    }
    let host = pattern.exact_host()?;
    crate::http::destination::forbidden(host).map(|why| format!("names {host}, which {why}"))
}

/// What is broad in `grant` (granted, but asked about before an import
/// grants it), one line each.
pub fn broad(grant: &Grant) -> Vec<String> {
    let scratch = real(&std::env::temp_dir());
    let mut broad = Vec::new();
    for fs in grant.fs.iter().flatten() {
        if fs.access == Access::ReadWrite && !real(&fs.host).starts_with(&scratch) {
            broad.push(format!(
                "{} is writable, and outside the scratch area {}",
                fs_entry(fs),
                scratch.display()
            ));
        }
    }
    for pattern in grant.http.iter().flatten() {
        if pattern.any_host() {
            broad.push(format!("{} allows every host", http_entry(pattern)));
        } else if let Some(domain) = pattern.subdomains_of()
            && !domain.contains('.')
        {
            broad.push(format!(
                "{} allows every host under .{domain}",
                http_entry(pattern)
            ));
        } else if pattern.any_port() {
            broad.push(format!("{} allows every port", http_entry(pattern)));
        }
    }
    broad
}

/// Every entry of `grant` as a `node_access` list names it.
pub fn entries(grant: &Grant) -> Vec<String> {
    let mut entries: Vec<String> = grant.fs.iter().flatten().map(fs_entry).collect();
    entries.extend(grant.env.iter().flatten().map(|name| env_entry(name)));
    entries.extend(grant.http.iter().flatten().map(http_entry));
    entries
}

fn fs_entry(fs: &FsGrant) -> String {
    format!("fs {}", fs.host.display())
}

fn env_entry(name: &str) -> String {
    format!("env {name}")
}

fn http_entry(pattern: &HttpPattern) -> String {
    format!("http {pattern}")
}

/// `path` with its links resolved as far as it exists: a folder granted
/// through a link, or not made yet, is judged where it really is.
fn real(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => real(parent).join(name),
        _ => path.to_owned(),
    }
}

/// The mount points of the kernel's filesystems, from the mount table.
fn kernel_mounts() -> Vec<(PathBuf, String)> {
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    table
        .lines()
        .filter_map(|line| {
            // `36 35 98:0 /root /mount/point options - fstype source ...`
            let (before, after) = line.split_once(" - ")?;
            let mount = before.split(' ').nth(4)?;
            let filesystem = after.split(' ').next()?;
            KERNEL_FILESYSTEMS
                .contains(&filesystem)
                .then(|| (PathBuf::from(unescape(mount)), filesystem.to_owned()))
        })
        .collect()
}

/// A mount table's path, whose spaces, tabs, newlines and backslashes are
/// written as octal escapes (`\040`).
fn unescape(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|digits| {
            std::str::from_utf8(digits)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(items: &[&str]) -> Grant {
        let mut grant = Grant::default();
        for item in items {
            grant.apply(item).unwrap();
        }
        grant
    }

    fn node(data: &Path, policy: &Path) -> NodeSelf {
        NodeSelf::new(
            data,
            [(policy.to_owned(), "the node's policy file")],
            [("MY_MODEL_KEY".to_owned(), "holds a model's key".to_owned())],
        )
    }

    #[test]
    fn what_reaches_the_node_is_named_with_the_reason() {
        let top = tempfile::tempdir().unwrap();
        let data = top.path().join("data");
        let inside = data.join("agents");
        std::fs::create_dir_all(&inside).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let policy = elsewhere.path().join("policy.toml");
        std::fs::write(&policy, "").unwrap();
        let node = node(&data, &policy);
        let link = top.path().join("link-to-proc");
        std::os::unix::fs::symlink("/proc", &link).unwrap();
        for (item, why) in [
            ("fs=/proc:/p".to_owned(), "is /proc, the kernel's view"),
            ("fs=/proc/self:/p".to_owned(), "is inside /proc"),
            ("fs=/sys:/s".to_owned(), "is /sys"),
            ("fs=/dev:/d".to_owned(), "is /dev"),
            (format!("fs={}:/p", link.display()), "is /proc"),
            ("fs=/:/root".to_owned(), "is the host's root"),
            (
                format!("fs={}:/d:rw", data.display()),
                "the node's data directory",
            ),
            (format!("fs={}:/d", inside.display()), "is inside"),
            (format!("fs={}:/d", top.path().display()), "contains"),
            (format!("fs={}:/d", elsewhere.path().display()), "contains"),
            ("env=AGENTSITE_TOKEN".to_owned(), "the node's bearer token"),
            (
                "env=AGENTSITE_REGISTRY_PASSWORD".to_owned(),
                "registry credentials",
            ),
            ("env=OPENAI_API_KEY".to_owned(), "OpenAI"),
            ("env=MY_MODEL_KEY".to_owned(), "a model's key"),
            ("http=https://*".to_owned(), "every host"),
            ("http=http://*:*".to_owned(), "every host"),
            (
                "http=http://169.254.169.254".to_owned(),
                "cloud metadata service",
            ),
            ("http=http://[fe80::1]:80".to_owned(), "link-local"),
        ] {
            let grant = granted(&[&item]);
            let reaches = node.refused(&grant);
            assert_eq!(reaches.len(), 1, "{item}: {reaches:?}");
            assert!(reaches[0].why.contains(why), "{item}: {}", reaches[0]);
        }
        // What stays clear of the node is not named.
        let clear = tempfile::tempdir().unwrap();
        let grant = granted(&[
            &format!("fs={}:/data:rw", clear.path().display()),
            "env=WEATHER_KEY",
            "http=https://api.example.com",
            "http=http://127.0.0.1:8080",
            "http=https://*.example.com",
        ]);
        assert_eq!(node.refused(&grant), vec![]);
        // What the table lists as allowed is no longer refused.
        let mut grant = granted(&["fs=/proc:/p", "env=AGENTSITE_TOKEN"]);
        grant.node_access = vec!["fs /proc".into()];
        let refused = node.refused(&grant);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].entry, "env AGENTSITE_TOKEN");
    }

    #[test]
    fn broad_grants_are_named() {
        let scratch = tempfile::tempdir().unwrap();
        // Outside the temporary folder on any machine: the checkout (and
        // HOME) may be inside it, as in a fresh clone under /tmp.
        let home = std::path::PathBuf::from("/usr");
        let grant = granted(&[
            &format!("fs={}:/tmp:rw", scratch.path().display()),
            &format!("fs={}:/home:rw", home.display()),
            &format!("fs={}:/read", home.display()),
            "http=https://*.com",
            "http=https://*.example.com",
            "http=http://10.0.0.5:*",
            "http=https://api.example.com",
        ]);
        let broad = broad(&grant);
        assert_eq!(broad.len(), 3, "{broad:?}");
        assert!(broad[0].contains("is writable, and outside the scratch area"));
        assert!(broad[1].contains("every host under .com"));
        assert!(broad[2].contains("every port"));
    }

    #[test]
    fn mount_table_paths_are_unescaped() {
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
        assert_eq!(unescape(r"/a\\b"), r"/a\\b");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
        assert!(
            kernel_mounts()
                .iter()
                .any(|(path, fs)| path == Path::new("/proc") && fs == "proc"),
            "{:?}",
            kernel_mounts()
        );
    }
}
