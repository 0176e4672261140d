//! `oci://REGISTRY/REPOSITORY:TAG` (or `@sha256:…`): where a component is
//! in an OCI registry, as `agentsite add` and `push` take it.

use oci_client::Reference;

/// The scheme that tells a registry reference from a file name.
pub const SCHEME: &str = "oci://";

/// Whether a command-line argument names a registry rather than a file.
pub fn is_registry(argument: &str) -> bool {
    argument.starts_with(SCHEME)
}

/// Why an `oci://` argument is not a reference.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("{0:?} is not an oci:// reference (oci://REGISTRY/REPOSITORY:TAG or @sha256:…)")]
    NoScheme(String),
    #[error(
        "an oci:// reference carries no credentials; give them with --username and --password-stdin, \
         or in the registry's entry of Docker's config.json"
    )]
    Credentials,
    #[error("oci://{0} names no registry: write it in full, such as oci://ghcr.io/OWNER/NAME:TAG")]
    NoRegistry(String),
    #[error("oci://{reference} is not a reference: {reason}")]
    Invalid { reference: String, reason: String },
}

/// Parses `oci://REGISTRY/REPOSITORY[:TAG][@DIGEST]`. The registry must be
/// written (a host with a dot or a port, or `localhost`): a short name
/// that Docker would send to Docker Hub is refused rather than guessed.
pub fn parse(argument: &str) -> Result<Reference, ReferenceError> {
    let rest = argument
        .strip_prefix(SCHEME)
        .ok_or_else(|| ReferenceError::NoScheme(argument.to_owned()))?;
    let registry = rest.split('/').next().unwrap_or_default();
    if registry.contains('@') {
        return Err(ReferenceError::Credentials);
    }
    let names_registry = rest.contains('/')
        && (registry.contains('.') || registry.contains(':') || registry == "localhost");
    if !names_registry {
        return Err(ReferenceError::NoRegistry(rest.to_owned()));
    }
    let reference: Reference = rest.parse().map_err(|e| ReferenceError::Invalid {
        reference: rest.to_owned(),
        reason: format!("{e}"),
    })?;
    if let Some(digest) = reference.digest()
        && !digest.starts_with("sha256:")
    {
        return Err(ReferenceError::Invalid {
            reference: rest.to_owned(),
            reason: "only sha256 digests name a component here".to_owned(),
        });
    }
    Ok(reference)
}

/// Whether the registry's host is this machine, which is reached over
/// plain HTTP as Docker and ORAS do: a registry on loopback has no
/// certificate to show.
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => registry.rsplit_once(':').map_or(registry, |(host, _)| host),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_reference_keeps_its_registry_repository_and_tag() {
        let reference = parse("oci://127.0.0.1:5000/agents/echo:1.0").unwrap();
        assert_eq!(reference.registry(), "127.0.0.1:5000");
        assert_eq!(reference.repository(), "agents/echo");
        assert_eq!(reference.tag(), Some("1.0"));
        let digest = format!("sha256:{}", "a".repeat(64));
        let pinned = parse(&format!("oci://ghcr.io/owner/echo@{digest}")).unwrap();
        assert_eq!(pinned.digest(), Some(digest.as_str()));
    }

    #[test]
    fn references_that_would_be_guessed_or_leak_credentials_are_refused() {
        for (argument, expected) in [
            ("echo:1.0", "not an oci:// reference"),
            ("oci://echo:1.0", "names no registry"),
            ("oci://library/echo", "names no registry"),
            (
                "oci://user:secret@ghcr.io/owner/echo:1",
                "carries no credentials",
            ),
            ("oci://ghcr.io/Owner/echo:1", "not a reference"),
            ("oci://ghcr.io/owner/echo@sha512:abcd", "not a reference"),
        ] {
            let error = parse(argument).unwrap_err().to_string();
            assert!(error.contains(expected), "{argument}: {error}");
            assert!(!error.contains("secret"), "{error}");
        }
    }

    #[test]
    fn loopback_registries_are_told_apart() {
        for registry in [
            "localhost:5000",
            "127.0.0.1:5000",
            "[::1]:5000",
            "localhost",
        ] {
            assert!(is_loopback(registry), "{registry}");
        }
        for registry in ["ghcr.io", "10.0.0.1:5000", "localhost.example:5000"] {
            assert!(!is_loopback(registry), "{registry}");
        }
    }
}
