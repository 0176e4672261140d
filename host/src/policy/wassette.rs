//! Wassette's permission file (`policy.yaml`, the format of
//! microsoft/policy-mcp-rs) read as agentsite grant items, for `agentsite
//! grant NAME --from-policy policy.yaml`.
//!
//! Both deny by default, so an `allow` becomes a grant and a `deny` adds
//! nothing, except where it carves a hole out of an `allow`: agentsite
//! grants whole folders and whole origins, so such a deny cannot be kept
//! and the file is refused. Whatever has no safe equivalent (address
//! ranges, a CPU share, another sandbox's settings, IPC) is refused too,
//! with its reason; nothing is granted from a file that is refused.
//!
//! | policy.yaml | grant item |
//! |---|---|
//! | `storage.allow: {uri: fs:///srv/data, access: [read, write]}` | `fs=/srv/data:/srv/data:rw` |
//! | `storage.allow: {uri: fs://data, access: [read]}` (beside the file) | `fs=/…/data:/data` |
//! | `network.allow: {host: api.example.com}` | `http=https://api.example.com` |
//! | `network.allow: {host: "http://10.0.0.5:8080/"}` | `http=http://10.0.0.5:8080` |
//! | `environment.allow: {key: API_KEY}` | `env=API_KEY` |
//! | `resources.limits.memory: 512Mi` | `memory=512MiB` |

use crate::capabilities::wasi::http_allow::HttpPattern;
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::path::{Path, PathBuf};

/// The largest policy file read.
pub const MAX_POLICY_FILE: u64 = 1024 * 1024;

/// The deepest nesting of brackets (`[`, `{`) a policy file may have;
/// Wassette's own go two deep. The YAML parser's work grows with the square
/// of a flow collection's depth (a file nested 100,000 deep took 22 s to
/// refuse), so the depth is counted, in one pass, before it parses.
pub const MAX_NESTING: usize = 64;

/// The grant items `text` (the policy file at `file`) asks for, or every
/// reason it cannot be imported.
pub fn grant_items(text: &str, file: &Path) -> Result<Vec<String>, String> {
    let depth = bracket_depth(text);
    if depth > MAX_NESTING {
        return Err(format!(
            "{}: not a Wassette policy: brackets nested {depth} deep, where a policy file has at most {MAX_NESTING}",
            file.display()
        ));
    }
    let policy: Policy = serde_yaml_ng::from_str(text)
        .map_err(|e| format!("{}: not a Wassette policy: {e}", file.display()))?;
    if let Some(version) = &policy.version
        && yaml_text(version) != "1.0"
    {
        return Err(format!(
            "{}: version {} is not the policy version 1.0 this reads",
            file.display(),
            yaml_text(version)
        ));
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let mut import = Import::default();
    let permissions = policy.permissions.unwrap_or_default();
    if let Some(storage) = permissions.storage {
        import.storage(storage, base);
    }
    if let Some(network) = permissions.network {
        import.network(network);
    }
    if let Some(environment) = permissions.environment {
        for (i, variable) in environment.allow.unwrap_or_default().iter().enumerate() {
            let valid = !variable.key.is_empty()
                && variable
                    .key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if valid {
                import.items.push(format!("env={}", variable.key));
            } else {
                import.refuse(
                    format!("environment.allow[{i}]"),
                    "is not an environment variable's name",
                );
            }
        }
    }
    if let Some(resources) = permissions.resources {
        import.resources(resources);
    }
    if permissions.runtime.is_some() {
        import.refuse(
            "runtime".into(),
            "configures another sandbox (Docker, Hyperlight); agentsite runs every component in its own",
        );
    }
    if let Some(ipc) = permissions.ipc
        && !ipc.allow.unwrap_or_default().is_empty()
    {
        import.refuse(
            "ipc.allow".into(),
            "agentsite gives components no pipes or sockets to other processes",
        );
    }
    if import.refused.is_empty() {
        import.items.dedup();
        Ok(import.items)
    } else {
        Err(format!(
            "{} cannot be imported as grants (nothing was granted): {}",
            file.display(),
            import.refused.join("; ")
        ))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Policy {
    version: Option<Value>,
    #[allow(dead_code, reason = "read to be allowed, not used")]
    description: Option<String>,
    permissions: Option<Permissions>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Permissions {
    storage: Option<Lists<Storage>>,
    network: Option<Lists<Network>>,
    environment: Option<Environment>,
    runtime: Option<Value>,
    resources: Option<Value>,
    ipc: Option<Lists<Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Lists<T> {
    allow: Option<Vec<T>>,
    deny: Option<Vec<T>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Storage {
    uri: String,
    #[serde(default)]
    access: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Network {
    host: Option<String>,
    cidr: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Environment {
    allow: Option<Vec<Variable>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Variable {
    key: String,
}

fn yaml_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => {
            let text = n.to_string();
            if text.contains('.') {
                text
            } else {
                format!("{text}.0")
            }
        }
        _ => "?".into(),
    }
}

/// A scalar as the file wrote it.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => "?".into(),
    }
}

#[derive(Default)]
struct Import {
    items: Vec<String>,
    refused: Vec<String>,
    folders: Vec<PathBuf>,
    origins: Vec<HttpPattern>,
}

impl Import {
    fn refuse(&mut self, what: String, why: &str) {
        self.refused.push(format!("{what}: {why}"));
    }

    fn storage(&mut self, storage: Lists<Storage>, base: &Path) {
        for (i, entry) in storage.allow.unwrap_or_default().iter().enumerate() {
            let what = format!("storage.allow[{i}] {}", entry.uri);
            let Some(path) = folder(&entry.uri) else {
                self.refuse(what, "is not an fs:// folder (a pattern other than a trailing /** names files; agentsite grants folders)");
                continue;
            };
            if path.contains(':') {
                self.refuse(what, "has a ':' in its path, which a grant cannot name");
                continue;
            }
            let unknown: Vec<&String> = entry
                .access
                .iter()
                .filter(|a| *a != "read" && *a != "write")
                .collect();
            if !unknown.is_empty() || entry.access.is_empty() {
                self.refuse(what, "needs access read, write or both");
                continue;
            }
            let host = base.join(&path);
            if !host.is_dir() {
                self.refuse(what, &format!("is not a folder here ({})", host.display()));
                continue;
            }
            // Wassette mounts a folder where the policy names it; a
            // relative one under the root, where a component's relative
            // paths start.
            let access = if entry.access.iter().any(|a| a == "write") {
                ":rw"
            } else {
                ""
            };
            let guest = if path.starts_with('/') {
                path.clone()
            } else {
                format!("/{path}")
            };
            self.items
                .push(format!("fs={}:{guest}{access}", host.display()));
            self.folders.push(host);
        }
        for (i, entry) in storage.deny.unwrap_or_default().iter().enumerate() {
            let inside_allowed = folder(&entry.uri).is_some_and(|path| {
                let denied = base.join(path);
                self.folders
                    .iter()
                    .any(|allowed| denied.starts_with(allowed))
            });
            if inside_allowed || folder(&entry.uri).is_none() {
                self.refuse(
                    format!("storage.deny[{i}] {}", entry.uri),
                    "takes part of an allowed folder away, which a grant of whole folders cannot keep",
                );
            }
        }
    }

    fn network(&mut self, network: Lists<Network>) {
        for (i, entry) in network.allow.unwrap_or_default().iter().enumerate() {
            let what = format!("network.allow[{i}]");
            match (&entry.host, &entry.cidr) {
                (Some(host), None) => match origin(host) {
                    Some(pattern) => match pattern.parse::<HttpPattern>() {
                        Ok(parsed) => {
                            self.items.push(format!("http={pattern}"));
                            self.origins.push(parsed);
                        }
                        Err(e) => self.refuse(format!("{what} {host}"), &e.to_string()),
                    },
                    None => {
                        self.refuse(format!("{what} {host}"), "is not a host or an http(s) URL")
                    }
                },
                (None, Some(cidr)) => self.refuse(
                    format!("{what} cidr {cidr}"),
                    "allows an address range; agentsite allows HTTP origins by name",
                ),
                _ => self.refuse(what, "needs one of host or cidr"),
            }
        }
        for (i, entry) in network.deny.unwrap_or_default().iter().enumerate() {
            // A denied address range is denied already, unless a granted
            // origin is an address inside it: checked as the names are.
            let Some(host) = &entry.host else { continue };
            let probe = host.trim_start_matches("*.");
            let probe = if host.starts_with("*.") {
                format!("a.{probe}")
            } else {
                probe.to_owned()
            };
            let probe = probe
                .split("://")
                .last()
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_owned();
            let covered = self.origins.iter().any(|allowed| {
                allowed.allows("https", &probe, 443) || allowed.allows("http", &probe, 80)
            });
            if covered {
                self.refuse(
                    format!("network.deny[{i}] {host}"),
                    "takes a host away from an allowed pattern, which a grant of whole origins cannot keep",
                );
            }
        }
    }

    fn resources(&mut self, resources: Value) {
        // `resources: {limits: {memory: 512Mi}}` (Wassette today) or
        // `resources: {memory: …, cpu: …}` (its first format).
        let limits = resources.get("limits").cloned().unwrap_or(resources);
        let Value::Mapping(limits) = limits else {
            self.refuse("resources".into(), "is not a mapping of limits");
            return;
        };
        for (key, value) in limits {
            let key = plain(&key);
            match key.as_str() {
                "memory" => match memory(&value) {
                    Some(size) => self.items.push(format!("memory={size}")),
                    None => self.refuse(
                        format!("resources.memory {}", plain(&value)),
                        "needs its unit, as 512Mi or 1Gi",
                    ),
                },
                "cpu" => self.refuse(
                    "resources.cpu".into(),
                    "asks for a CPU share; agentsite limits each call by its deadline (deadline=DURATION)",
                ),
                other => self.refuse(format!("resources.{other}"), "has no equivalent limit"),
            }
        }
    }
}

/// How deep the brackets of `text` nest, counting every bracket, in
/// quotes or not: a quote's end is the parser's to find, and a count that
/// skipped quoted text could be made to skip the rest of the file.
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for byte in text.bytes() {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The folder an `fs://` URI names, without a trailing `/**` or `/*`.
fn folder(uri: &str) -> Option<String> {
    let path = uri.strip_prefix("fs://")?;
    let path = path.trim_end_matches("/**").trim_end_matches("/*");
    let path = if path.len() > 1 {
        path.trim_end_matches('/')
    } else {
        path
    };
    (!path.is_empty() && !path.contains(['*', '?', '['])).then(|| path.to_owned())
}

/// The HTTP origin pattern a Wassette network host names: a bare host (or
/// `*.domain`) is its HTTPS origin; a URL keeps its scheme and port.
fn origin(host: &str) -> Option<String> {
    let host = host.trim();
    if let Some((scheme, rest)) = host.split_once("://") {
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let authority = rest.split('/').next().unwrap_or_default();
        return (!authority.is_empty()).then(|| format!("{scheme}://{authority}"));
    }
    (!host.is_empty() && !host.contains('/')).then(|| format!("https://{host}"))
}

/// A memory size as Kubernetes writes it (`512Mi`, `1Gi`, `256M`), as a
/// grant's size.
fn memory(value: &Value) -> Option<String> {
    let text = value.as_str()?.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit = match unit {
        "Ki" => "KiB",
        "Mi" => "MiB",
        "Gi" => "GiB",
        "K" | "k" => "KB",
        "M" => "MB",
        "G" => "GB",
        _ => return None,
    };
    Some(format!("{number}{unit}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imported(yaml: &str) -> Result<Vec<String>, String> {
        grant_items(yaml, Path::new("/nonexistent/policy.yaml"))
    }

    #[test]
    fn wassettes_example_policies_become_grants() {
        let folder = tempfile::tempdir().unwrap();
        let yaml = format!(
            "version: \"1.0\"\ndescription: demo\npermissions:\n  storage:\n    allow:\n      - uri: \"fs://{}\"\n        access: [\"read\", \"write\"]\n  network:\n    allow:\n      - host: \"https://rss.nytimes.com/\"\n      - host: \"api.openweathermap.org\"\n      - host: \"*.example.com\"\n  environment:\n    allow:\n      - key: \"OPENWEATHER_API_KEY\"\n  resources:\n    limits:\n      memory: \"512Mi\"\n",
            folder.path().display()
        );
        let path = folder.path().display().to_string();
        assert_eq!(
            imported(&yaml).unwrap(),
            vec![
                format!("fs={path}:{path}:rw"),
                "http=https://rss.nytimes.com".to_owned(),
                "http=https://api.openweathermap.org".to_owned(),
                "http=https://*.example.com".to_owned(),
                "env=OPENWEATHER_API_KEY".to_owned(),
                "memory=512MiB".to_owned(),
            ]
        );
        assert_eq!(
            imported("version: \"1.0\"\npermissions: {}\n").unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn brackets_nested_past_the_bound_are_refused_before_parsing() {
        let deep = format!(
            "permissions:\n  storage:\n    allow:\n      - uri: {}1\n",
            "[".repeat(100_000)
        );
        let refused = imported(&deep).unwrap_err();
        assert!(
            refused.contains("brackets nested 100000 deep, where a policy file has at most 64"),
            "{refused}"
        );
        // Quoted brackets count too: a quote is the parser's to find.
        assert_eq!(bracket_depth("a: \"[[\"\nb: [c, {d: e}]"), 4);
        let shallow = format!("permissions: {}{}\n", "{a: ".repeat(60), "}".repeat(60));
        assert!(!imported(&shallow).unwrap_err().contains("nested"));
    }

    #[test]
    fn what_has_no_safe_equivalent_is_refused_with_its_reason() {
        let refused = imported(
            "version: \"1.0\"\npermissions:\n  network:\n    allow:\n      - host: \"*.company.com\"\n      - cidr: \"10.0.0.0/8\"\n    deny:\n      - host: \"evil.company.com\"\n      - cidr: \"0.0.0.0/0\"\n  resources:\n    cpu: 50.0\n    memory: 1024\n  runtime:\n    docker: {}\n  ipc:\n    allow:\n      - uri: \"pipe://x\"\n",
        )
        .unwrap_err();
        for reason in [
            "nothing was granted",
            "network.allow[1] cidr 10.0.0.0/8: allows an address range",
            "network.deny[0] evil.company.com: takes a host away from an allowed pattern",
            "resources.cpu: asks for a CPU share",
            "resources.memory 1024: needs its unit",
            "runtime: configures another sandbox",
            "ipc.allow: agentsite gives components no pipes",
        ] {
            assert!(refused.contains(reason), "{reason} not in {refused}");
        }
        assert!(!refused.contains('\n'), "one line: {refused}");
        let folder = tempfile::tempdir().unwrap();
        let carve = format!(
            "permissions:\n  storage:\n    allow:\n      - uri: \"fs://{0}\"\n        access: [read]\n    deny:\n      - uri: \"fs://{0}/secret\"\n        access: [read]\n",
            folder.path().display()
        );
        assert!(
            imported(&carve)
                .unwrap_err()
                .contains("takes part of an allowed folder away")
        );
        for (yaml, reason) in [
            ("version: \"2.0\"\n", "version 2.0 is not"),
            ("permissions:\n  teleport: {}\n", "not a Wassette policy"),
            (
                "permissions:\n  storage:\n    allow:\n      - uri: \"fs:///nowhere/at/all\"\n        access: [read]\n",
                "is not a folder here",
            ),
            (
                "permissions:\n  storage:\n    allow:\n      - uri: \"fs:///tmp/*.txt\"\n        access: [read]\n",
                "is not an fs:// folder",
            ),
            (
                "permissions:\n  environment:\n    allow:\n      - key: \"A=B\"\n",
                "is not an environment variable's name",
            ),
        ] {
            let refused = imported(yaml).unwrap_err();
            assert!(refused.contains(reason), "{reason} not in {refused}");
        }
    }
}
