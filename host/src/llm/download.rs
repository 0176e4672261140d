//! A model file fetched from a URL for `agentsite models add URL`.
//!
//! The file is streamed into `<name>.part` in the models folder and takes
//! its name only once whole and checked. A download that breaks off is
//! resumed by the same command (an HTTP range, held to the same file by the
//! server's validator); a size the operator sets bounds it before a byte is
//! written and while it comes, whatever the server announced; a page that
//! is not a GGUF file (a Hugging Face `/blob/` link) is refused at its first
//! bytes, and a model of a family the node does not run as soon as its
//! header is in, not gigabytes later. Its sha256 is checked against the one
//! the operator gives, else the one the server vouches for (Hugging Face's
//! `X-Linked-Etag`, a `Repr-Digest` or `Digest` header).

use super::embedded;
use anyhow::{Context as _, bail};
use base64::Engine as _;
use bytesize::ByteSize;
use futures::StreamExt as _;
use reqwest::header::{self, HeaderMap};
use sha2::{Digest as _, Sha256};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Redirects followed (Hugging Face sends one to its file store).
const MAX_REDIRECTS: usize = 10;

/// How far into a file still coming its header is looked for: a GGUF
/// header is rarely more than a few MiB (the metadata of a 262,144-token
/// vocabulary is about 5 MiB).
const HEADER_CHECKS: [u64; 3] = [4 << 20, 32 << 20, 128 << 20];

/// What to fetch, and what it must be.
pub struct Request<'a> {
    pub url: &'a str,
    /// The folder the file lands in.
    pub dir: &'a Path,
    /// The file's name there; else the URL's last part.
    pub file_name: Option<String>,
    /// The sha256 the operator expects, as hex.
    pub sha256: Option<&'a str>,
    pub max_bytes: u64,
}

/// Who said what the file's sha256 must be.
#[derive(Debug, PartialEq, Eq)]
pub enum Vouched {
    Operator,
    /// The server, in the header named.
    Server(&'static str),
    Nobody,
}

/// A model file on disk, whole and checked.
pub struct Fetched {
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    pub vouched: Vouched,
    /// It was there from an earlier download; nothing was fetched.
    pub already_there: bool,
}

/// Told how a download goes, for a progress bar.
pub trait Progress {
    /// The transfer starts with `have` bytes of `total` (when known) on disk.
    fn begin(&mut self, have: u64, total: Option<u64>);
    fn advanced(&mut self, have: u64);
    fn end(&mut self);
}

/// Where an unfinished download of `url` stands, kept beside its part file.
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
struct Unfinished {
    url: String,
    /// The server's ETag or Last-Modified: a resumed range is taken only
    /// from the same file.
    validator: Option<String>,
}

/// Fetches the file `request` names, or finds it already fetched.
pub async fn fetch(request: Request<'_>, progress: &mut dyn Progress) -> anyhow::Result<Fetched> {
    let url = reqwest::Url::parse(request.url)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .with_context(|| format!("{:?} is not an http or https URL", request.url))?;
    let expected = request.sha256.map(sha256_hex).transpose()?;
    let file_name = match request.file_name {
        Some(name) => name,
        None => file_name_in(&url)?,
    };
    std::fs::create_dir_all(request.dir)
        .with_context(|| format!("cannot create {}", request.dir.display()))?;
    let path = request.dir.join(&file_name);
    if path.exists() {
        let sha256 = sha256_of_file(&path)?;
        if let Some(expected) = &expected
            && *expected != sha256
        {
            bail!(
                "{} already holds another file (sha256 {sha256}); remove it or give the model another --name",
                path.display()
            );
        }
        return Ok(Fetched {
            bytes: std::fs::metadata(&path)?.len(),
            path,
            sha256,
            vouched: if expected.is_some() {
                Vouched::Operator
            } else {
                Vouched::Nobody
            },
            already_there: true,
        });
    }
    let part = request.dir.join(format!("{file_name}.part"));
    let state = request.dir.join(format!("{file_name}.part.json"));
    let mut download = Download {
        url,
        part,
        state,
        max_bytes: request.max_bytes,
    };
    match download.run(progress).await {
        Ok((sha256, bytes, server_sha256)) => {
            let vouched = match (&expected, &server_sha256) {
                (Some(expected), _) => Some((expected.clone(), "--sha256".to_owned())),
                (None, Some((said, header))) => {
                    Some((said.clone(), format!("the server's {header}")))
                }
                (None, None) => None,
            };
            if let Some((said, who)) = vouched
                && said != sha256
            {
                download.forget();
                bail!("the file's sha256 is {sha256}, not {said} as {who} says; nothing was kept");
            }
            std::fs::rename(&download.part, &path)
                .with_context(|| format!("cannot name {}", path.display()))?;
            let _ = std::fs::remove_file(&download.state);
            Ok(Fetched {
                path,
                sha256,
                bytes,
                vouched: match (expected, server_sha256) {
                    (Some(_), _) => Vouched::Operator,
                    (None, Some((_, header))) => Vouched::Server(header),
                    (None, None) => Vouched::Nobody,
                },
                already_there: false,
            })
        }
        Err(Broken::Resumable(why)) => Err(why),
        Err(Broken::Refused(why)) => {
            download.forget();
            Err(why)
        }
    }
}

/// How a download ended without a file.
enum Broken {
    /// The transfer stopped: what came is kept for the next try.
    Resumable(anyhow::Error),
    /// What came is not wanted: it is thrown away.
    Refused(anyhow::Error),
}

fn refused(why: impl std::fmt::Display) -> Broken {
    Broken::Refused(anyhow::anyhow!("{why}"))
}

struct Download {
    url: reqwest::Url,
    part: PathBuf,
    state: PathBuf,
    max_bytes: u64,
}

impl Download {
    /// Removes what an unwanted download left.
    fn forget(&self) {
        let _ = std::fs::remove_file(&self.part);
        let _ = std::fs::remove_file(&self.state);
    }

    /// The part file's bytes and validator if they are of this URL.
    fn resumable(&self) -> (u64, Option<String>) {
        let state: Option<Unfinished> = std::fs::read(&self.state)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        match (state, std::fs::metadata(&self.part)) {
            (Some(state), Ok(part)) if state.url == self.url.as_str() => {
                (part.len(), state.validator)
            }
            _ => {
                self.forget();
                (0, None)
            }
        }
    }

    /// Brings the part file to the whole file; returns its sha256, its
    /// length, and the sha256 the server vouched for (with its header).
    async fn run(
        &mut self,
        progress: &mut dyn Progress,
    ) -> Result<(String, u64, Option<(String, &'static str)>), Broken> {
        let (mut have, validator) = self.resumable();
        let (response, server_sha256) = self
            .send(have, validator.as_deref())
            .await
            .map_err(Broken::Resumable)?;
        let status = response.status();
        let total = match status {
            reqwest::StatusCode::PARTIAL_CONTENT => {
                let (start, total) = content_range(response.headers()).ok_or_else(|| {
                    refused("the server sent a part of the file without saying which")
                })?;
                if start != have {
                    return Err(refused(format!(
                        "the server sent the file from byte {start}, not {have} as asked"
                    )));
                }
                total
            }
            reqwest::StatusCode::RANGE_NOT_SATISFIABLE if have > 0 => {
                // Asked for what follows the end: the part may be whole.
                match response.headers().get(header::CONTENT_RANGE) {
                    Some(range) if range.to_str().ok() == Some(&format!("bytes */{have}")) => {
                        Some(have)
                    }
                    _ => {
                        return Err(refused(
                            "the file changed on the server since the download began; run the command again to start over",
                        ));
                    }
                }
            }
            status if status.is_success() => {
                // The whole file (the server ignores ranges, or it changed).
                have = 0;
                response.content_length()
            }
            status => {
                return Err(Broken::Resumable(anyhow::anyhow!(
                    "{} answered {status}",
                    self.url
                )));
            }
        };
        if let Some(total) = total
            && total > self.max_bytes
        {
            return Err(refused(format!(
                "the file is {}, more than the {} a download may take (--max-size)",
                ByteSize(total),
                ByteSize(self.max_bytes)
            )));
        }
        let validator = [header::ETAG, header::LAST_MODIFIED]
            .iter()
            .find_map(|name| response.headers().get(name)?.to_str().ok())
            .filter(|value| !value.starts_with("W/"))
            .map(str::to_owned);
        let unfinished = Unfinished {
            url: self.url.to_string(),
            validator,
        };
        std::fs::write(
            &self.state,
            serde_json::to_vec(&unfinished).unwrap_or_default(),
        )
        .map_err(|e| refused(format!("cannot write {}: {e}", self.state.display())))?;
        let mut hasher = Sha256::new();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.part)
            .map_err(|e| refused(format!("cannot write {}: {e}", self.part.display())))?;
        if have == 0 {
            file.set_len(0)
                .map_err(|e| refused(format!("cannot write {}: {e}", self.part.display())))?;
        } else {
            hash_file_into(&self.part, &mut hasher).map_err(|e| refused(format!("{e:#}")))?;
        }
        let mut header_known = have >= HEADER_CHECKS[0];
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("no type")
            .to_owned();
        progress.begin(have, total);
        let mut body = response.bytes_stream();
        let mut magic = Vec::with_capacity(4);
        while status != reqwest::StatusCode::RANGE_NOT_SATISFIABLE
            && let Some(chunk) = body.next().await
        {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => {
                    progress.end();
                    let _ = file.flush();
                    let of = total
                        .map(|t| format!(" of {}", ByteSize(t)))
                        .unwrap_or_default();
                    return Err(Broken::Resumable(anyhow::anyhow!(
                        "the download broke off at {}{of} ({e}); the same command resumes it",
                        ByteSize(have)
                    )));
                }
            };
            if have + chunk.len() as u64 > total.unwrap_or(self.max_bytes).min(self.max_bytes) {
                progress.end();
                return Err(refused(format!(
                    "the server sent more than {} (its announced size or --max-size)",
                    ByteSize(total.unwrap_or(self.max_bytes).min(self.max_bytes))
                )));
            }
            if magic.len() < 4 && have == magic.len() as u64 {
                let wanted = 4 - magic.len();
                magic.extend_from_slice(&chunk[..wanted.min(chunk.len())]);
                if magic.len() == 4 && magic != b"GGUF" {
                    progress.end();
                    return Err(refused(format!(
                        "{} is not a GGUF file ({content_type}); for a Hugging Face file, use its /resolve/ link, not its page",
                        self.url
                    )));
                }
            }
            file.write_all(&chunk)
                .map_err(|e| refused(format!("cannot write {}: {e}", self.part.display())))?;
            hasher.update(&chunk);
            let before = have;
            have += chunk.len() as u64;
            progress.advanced(have);
            if !header_known && HEADER_CHECKS.iter().any(|&at| before < at && have >= at) {
                let _ = file.flush();
                header_known = self.check_header(have >= HEADER_CHECKS[2])?;
            }
        }
        progress.end();
        file.flush()
            .map_err(|e| refused(format!("cannot write {}: {e}", self.part.display())))?;
        if let Some(total) = total
            && have != total
        {
            return Err(Broken::Resumable(anyhow::anyhow!(
                "the download broke off at {} of {}; the same command resumes it",
                ByteSize(have),
                ByteSize(total)
            )));
        }
        if !header_known {
            self.check_header(true)?;
        }
        Ok((hex::encode(hasher.finalize()), have, server_sha256))
    }

    /// Whether the file so far holds a whole header of a model the node
    /// runs; refuses one it does not run. `last`: the header must be in.
    fn check_header(&self, last: bool) -> Result<bool, Broken> {
        match embedded::inspect_partial(&self.part, self.url.as_str()) {
            Some(Ok(_)) => Ok(true),
            Some(Err(why)) => Err(refused(why)),
            None if last => Err(refused(format!("{} holds no whole GGUF header", self.url))),
            None => Ok(false),
        }
    }

    /// Sends the request for what follows byte `from`, following redirects
    /// by hand so that a hop's word on the file's sha256 is heard.
    async fn send(
        &self,
        from: u64,
        validator: Option<&str>,
    ) -> anyhow::Result<(reqwest::Response, Option<(String, &'static str)>)> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(30))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("agentsite/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let mut url = self.url.clone();
        let mut vouched = None;
        for _ in 0..=MAX_REDIRECTS {
            let mut request = client.get(url.clone());
            if from > 0 {
                request = request.header(header::RANGE, format!("bytes={from}-"));
                if let Some(validator) = validator {
                    request = request.header(header::IF_RANGE, validator);
                }
            }
            let response = request
                .send()
                .await
                .with_context(|| format!("cannot reach {url}"))?;
            vouched = vouched.or_else(|| sha256_vouched(response.headers()));
            if !response.status().is_redirection() {
                return Ok((response, vouched));
            }
            let location = response
                .headers()
                .get(header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|to| url.join(to).ok())
                .with_context(|| format!("{url} redirects nowhere"))?;
            url = location;
        }
        bail!("{} redirects more than {MAX_REDIRECTS} times", self.url)
    }
}

/// The file name a URL ends with, if it is a fit name for a GGUF file.
fn file_name_in(url: &reqwest::Url) -> anyhow::Result<String> {
    let last = url
        .path_segments()
        .and_then(|mut segments| segments.next_back())
        .unwrap_or_default();
    let name = percent_decoded(last);
    let fit = name.len() <= 200
        && name.to_ascii_lowercase().ends_with(".gguf")
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+'));
    anyhow::ensure!(
        fit,
        "the URL does not end with a .gguf file name ({last:?}); give the model a --name to name the file"
    );
    Ok(name)
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| text.get(at + 1..at + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                at += 3;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A sha256 given as 64 hex digits (or `sha256:` before them), lowercased.
fn sha256_hex(text: &str) -> anyhow::Result<String> {
    let hex = text
        .trim()
        .trim_start_matches("sha256:")
        .to_ascii_lowercase();
    anyhow::ensure!(
        hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "{text:?} is not a sha256 (64 hex digits)"
    );
    Ok(hex)
}

/// The sha256 of the whole file a response's headers vouch for.
fn sha256_vouched(headers: &HeaderMap) -> Option<(String, &'static str)> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // Hugging Face: the sha256 of a large file, as its ETag in quotes.
    if let Some(etag) = text("x-linked-etag")
        && let Ok(hex) = sha256_hex(etag.trim_matches('"'))
    {
        return Some((hex, "X-Linked-Etag"));
    }
    // RFC 9530 (`sha-256=:BASE64:`) and RFC 3230 (`SHA-256=BASE64`).
    for (name, shown) in [("repr-digest", "Repr-Digest"), ("digest", "Digest")] {
        let Some(value) = text(name) else { continue };
        for item in value.split(',') {
            let Some((algorithm, digest)) = item.trim().split_once('=') else {
                continue;
            };
            if !algorithm.eq_ignore_ascii_case("sha-256") {
                continue;
            }
            let digest = digest.trim().trim_matches(':');
            if let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(digest)
                && bytes.len() == 32
            {
                return Some((hex::encode(bytes), shown));
            }
        }
    }
    None
}

/// `Content-Range: bytes START-END/TOTAL`: the start and, if known, the total.
fn content_range(headers: &HeaderMap) -> Option<(u64, Option<u64>)> {
    let value = headers.get(header::CONTENT_RANGE)?.to_str().ok()?;
    let (range, total) = value.strip_prefix("bytes ")?.split_once('/')?;
    let start = range.split_once('-')?.0.parse().ok()?;
    let total = match total {
        "*" => None,
        total => Some(total.parse().ok()?),
    };
    Some((start, total))
}

fn hash_file_into(path: &Path, hasher: &mut Sha256) -> anyhow::Result<()> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file
            .read(&mut buffer)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if read == 0 {
            return Ok(());
        }
        hasher.update(&buffer[..read]);
    }
}

fn sha256_of_file(path: &Path) -> anyhow::Result<String> {
    let mut hasher = Sha256::new();
    hash_file_into(path, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    header::HeaderName::from_static(name),
                    value.parse().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_servers_word_on_the_sha256_is_read_from_each_kind_of_header() {
        let hex = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
        let hugging_face = headers(&[("x-linked-etag", &format!("\"{hex}\""))]);
        assert_eq!(
            sha256_vouched(&hugging_face),
            Some((hex.to_owned(), "X-Linked-Etag"))
        );
        let b64 = base64::engine::general_purpose::STANDARD.encode(hex::decode(hex).unwrap());
        let repr = headers(&[("repr-digest", &format!("sha-512=:AAAA:, sha-256=:{b64}:"))]);
        assert_eq!(sha256_vouched(&repr), Some((hex.to_owned(), "Repr-Digest")));
        let digest = headers(&[("digest", &format!("SHA-256={b64}"))]);
        assert_eq!(sha256_vouched(&digest), Some((hex.to_owned(), "Digest")));
        // An ordinary ETag says nothing about the content's hash.
        assert_eq!(
            sha256_vouched(&headers(&[("x-linked-etag", "\"abc\"")])),
            None
        );
    }

    #[test]
    fn file_names_come_from_the_urls_last_part_and_must_be_gguf() {
        let name = |url: &str| file_name_in(&reqwest::Url::parse(url).unwrap());
        assert_eq!(
            name("https://huggingface.co/Qwen/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q8_0.gguf?download=true").unwrap(),
            "Qwen3-0.6B-Q8_0.gguf"
        );
        assert!(
            name("http://h/a%20b.gguf")
                .unwrap_err()
                .to_string()
                .contains("--name")
        );
        assert!(name("http://h/model").is_err());
        assert!(name("http://h/..%2F..%2Fetc.gguf").is_err());
        assert!(name("http://h/.gguf").is_err());
    }

    #[test]
    fn ranges_and_digests_are_parsed_strictly() {
        assert_eq!(
            content_range(&headers(&[("content-range", "bytes 100-199/200")])),
            Some((100, Some(200)))
        );
        assert_eq!(
            content_range(&headers(&[("content-range", "bytes 5-9/*")])),
            Some((5, None))
        );
        assert_eq!(
            content_range(&headers(&[("content-range", "items 1-2/3")])),
            None
        );
        assert!(sha256_hex("sha256:ABC").is_err());
        assert_eq!(
            sha256_hex(&format!("sha256:{}", "A".repeat(64))).unwrap(),
            "a".repeat(64)
        );
    }
}
