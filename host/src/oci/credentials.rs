//! Who the node is at a registry: anonymous, a user and password, or a
//! token, found where container tools keep them. Credentials live only in
//! memory, in oci-client's `RegistryAuth`, whose `Debug` hides them; they
//! are never written into a record, a log line or an error.

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use std::path::PathBuf;

/// Environment variables read when no credentials are given on the
/// command line: a bearer token, or a user name and password.
pub const TOKEN_VARIABLE: &str = "AGENTSITE_REGISTRY_TOKEN";
pub const USERNAME_VARIABLE: &str = "AGENTSITE_REGISTRY_USERNAME";
pub const PASSWORD_VARIABLE: &str = "AGENTSITE_REGISTRY_PASSWORD";
/// The registry (`host[:port]`) the environment's credentials are for: they
/// go to no other.
pub const REGISTRY_VARIABLE: &str = "AGENTSITE_REGISTRY";

/// The largest credentials file read (Docker's `config.json`, or the
/// `auth.json` of podman, buildah and skopeo).
const MAX_AUTH_FILE: u64 = 1024 * 1024;

/// Credentials given on the command line: `--username` with the password
/// read from stdin (`--password-stdin`), as `docker login` takes them.
#[derive(Default)]
pub struct Given {
    pub username: Option<String>,
    pub password: Option<String>,
}

impl std::fmt::Debug for Given {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Given")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The credentials for `registry`, from the first of: the command line;
/// `AGENTSITE_REGISTRY_TOKEN`, or `AGENTSITE_REGISTRY_USERNAME` and
/// `AGENTSITE_REGISTRY_PASSWORD`, when `AGENTSITE_REGISTRY` names this
/// registry; the registry's entry in the credentials
/// file of container tools (`$REGISTRY_AUTH_FILE`, then
/// `$DOCKER_CONFIG/config.json` or `~/.docker/config.json`). Anonymous
/// when none has any.
pub fn for_registry(registry: &str, given: Given) -> anyhow::Result<RegistryAuth> {
    match (given.username, given.password) {
        (Some(username), Some(password)) => return Ok(RegistryAuth::Basic(username, password)),
        (Some(_), None) => {
            anyhow::bail!("--username needs the password too: pipe it to --password-stdin")
        }
        (None, Some(_)) => anyhow::bail!("--password-stdin needs --username"),
        (None, None) => {}
    }
    if let Some(auth) = from_environment(registry)? {
        return Ok(auth);
    }
    for file in auth_files() {
        if let Some(auth) = from_auth_file(&file, registry)? {
            return Ok(auth);
        }
    }
    Ok(RegistryAuth::Anonymous)
}

/// The environment's credentials, when `AGENTSITE_REGISTRY` names
/// `registry` as theirs. Set without it, they are an error: credentials
/// that name no registry would go to whichever one asks.
fn from_environment(registry: &str) -> anyhow::Result<Option<RegistryAuth>> {
    let auth = match (
        variable(TOKEN_VARIABLE),
        variable(USERNAME_VARIABLE),
        variable(PASSWORD_VARIABLE),
    ) {
        (Some(token), _, _) => RegistryAuth::Bearer(token),
        (None, Some(username), Some(password)) => RegistryAuth::Basic(username, password),
        (None, Some(_), None) | (None, None, Some(_)) => anyhow::bail!(
            "{USERNAME_VARIABLE} and {PASSWORD_VARIABLE} go together: one is set without the other"
        ),
        (None, None, None) => return Ok(None),
    };
    match variable(REGISTRY_VARIABLE) {
        Some(named) if same_registry(&named, registry) => Ok(Some(auth)),
        Some(_) => Ok(None),
        None => anyhow::bail!(
            "registry credentials are set in the environment, but {REGISTRY_VARIABLE} does not name the registry they are for: \
             set {REGISTRY_VARIABLE}={registry} to send them to {registry}"
        ),
    }
}

/// Whether two names of a registry (`host[:port]`, perhaps as a URL) are
/// the same registry; Docker Hub answers to three.
fn same_registry(a: &str, b: &str) -> bool {
    let canonical = |name: &str| {
        let name = name
            .trim()
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_ascii_lowercase();
        match name.as_str() {
            "docker.io" | "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
            _ => name,
        }
    };
    canonical(a) == canonical(b)
}

fn variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// The credentials files container tools write, in the order they are read.
fn auth_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some(file) = std::env::var_os("REGISTRY_AUTH_FILE") {
        files.push(PathBuf::from(file));
    }
    match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => files.push(PathBuf::from(dir).join("config.json")),
        None => {
            if let Some(home) = std::env::var_os("HOME") {
                files.push(PathBuf::from(home).join(".docker/config.json"));
            }
        }
    }
    files
}

/// The entry for `registry` in a credentials file of Docker's form:
/// `{"auths": {"REGISTRY": {"auth": base64("user:password")}}}` or an
/// `identitytoken`. A missing file or entry is `None`; an unreadable or
/// malformed one is an error naming the file, never its contents.
fn from_auth_file(file: &std::path::Path, registry: &str) -> anyhow::Result<Option<RegistryAuth>> {
    use std::io::Read as _;
    let Ok(opened) = std::fs::File::open(file) else {
        return Ok(None);
    };
    let mut text = String::new();
    opened
        .take(MAX_AUTH_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| anyhow::anyhow!("cannot read the credentials in {}: {e}", file.display()))?;
    anyhow::ensure!(
        text.len() as u64 <= MAX_AUTH_FILE,
        "the credentials file {} is larger than {MAX_AUTH_FILE} bytes",
        file.display()
    );
    let config: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        anyhow::anyhow!(
            "the credentials file {} is not JSON of Docker's form",
            file.display()
        )
    })?;
    let auths = config.get("auths").and_then(|auths| auths.as_object());
    // Docker Hub's entry is kept under its old URL.
    let entry = auths.and_then(|auths| {
        auths.get(registry).or_else(|| {
            auths.iter().find_map(|(key, entry)| {
                let host = key
                    .trim_start_matches("https://")
                    .trim_start_matches("http://");
                (host.split('/').next() == Some(registry)).then_some(entry)
            })
        })
    });
    let Some(entry) = entry else {
        let helped = ["credHelpers", "credsStore"]
            .iter()
            .any(|key| config.get(*key).is_some());
        anyhow::ensure!(
            !helped
                || config
                    .get("credHelpers")
                    .and_then(|helpers| helpers.get(registry))
                    .is_none(),
            "{} names a credential helper for {registry}, which agentsite does not run: \
             give the credentials with --username and --password-stdin",
            file.display()
        );
        return Ok(None);
    };
    if let Some(token) = entry
        .get("identitytoken")
        .and_then(|token| token.as_str())
        .filter(|token| !token.is_empty())
    {
        return Ok(Some(RegistryAuth::Bearer(token.to_owned())));
    }
    let Some(encoded) = entry.get("auth").and_then(|auth| auth.as_str()) else {
        return Ok(None);
    };
    let malformed = || {
        anyhow::anyhow!(
            "the entry for {registry} in {} is not base64 of USER:PASSWORD",
            file.display()
        )
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| malformed())?;
    let decoded = String::from_utf8(decoded).map_err(|_| malformed())?;
    let (username, password) = decoded.split_once(':').ok_or_else(malformed)?;
    Ok(Some(RegistryAuth::Basic(
        username.to_owned(),
        password.to_owned(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(json: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), json).unwrap();
        file
    }

    #[test]
    fn a_registrys_entry_in_dockers_config_is_its_credentials() {
        let auth = base64::engine::general_purpose::STANDARD.encode("ann:s3cret:with-colon");
        let file = written(&format!(
            r#"{{"auths": {{"127.0.0.1:5000": {{"auth": "{auth}"}}, "https://index.docker.io/v1/": {{"identitytoken": "tok"}}}}}}"#
        ));
        assert_eq!(
            from_auth_file(file.path(), "127.0.0.1:5000").unwrap(),
            Some(RegistryAuth::Basic(
                "ann".into(),
                "s3cret:with-colon".into()
            ))
        );
        assert_eq!(
            from_auth_file(file.path(), "index.docker.io").unwrap(),
            Some(RegistryAuth::Bearer("tok".into()))
        );
        assert_eq!(from_auth_file(file.path(), "ghcr.io").unwrap(), None);
    }

    #[test]
    fn a_bad_credentials_file_is_named_but_never_shown() {
        let file = written(r#"{"auths": {"ghcr.io": {"auth": "not base64 s3cret!"}}}"#);
        let error = from_auth_file(file.path(), "ghcr.io")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not base64 of USER:PASSWORD"), "{error}");
        assert!(!error.contains("s3cret"), "{error}");
        let helper = written(r#"{"auths": {}, "credHelpers": {"ghcr.io": "gh"}}"#);
        let error = from_auth_file(helper.path(), "ghcr.io")
            .unwrap_err()
            .to_string();
        assert!(error.contains("credential helper"), "{error}");
        assert!(
            from_auth_file(std::path::Path::new("/nonexistent/x.json"), "ghcr.io")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn credentials_never_show_in_debug_output() {
        let given = Given {
            username: Some("ann".into()),
            password: Some("s3cret".into()),
        };
        assert!(!format!("{given:?}").contains("s3cret"));
        let auth = for_registry("ghcr.io", given).unwrap();
        assert!(!format!("{auth:?}").contains("s3cret"));
    }
}
