//! Outgoing HTTP allowlist patterns: a scheme, a host and a port, each of
//! which the operator names exactly or with a wildcard.
//!
//! `https://api.example.com` allows that host on port 443 only;
//! `https://*.example.com` allows its subdomains (not the apex itself);
//! `http://127.0.0.1:*` allows every port of that address. A pattern never
//! names a path: what an agent may reach is decided per origin, as a browser
//! would, so a redirect to another origin is checked again on its own.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One allowed origin pattern, as written in the policy file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpPattern {
    text: String,
    scheme: Scheme,
    host: HostPattern,
    port: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn parse(text: &str) -> Option<Scheme> {
        match text.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// Any host at all.
    Any,
    /// Exactly this host (lowercase).
    Exact(String),
    /// Any subdomain of this one (lowercase, without the leading `*.`).
    SubdomainOf(String),
}

/// Why a pattern was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid HTTP pattern {pattern:?}: {reason}")]
pub struct PatternError {
    pattern: String,
    reason: String,
}

impl FromStr for HttpPattern {
    type Err = PatternError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let fail = |reason: &str| PatternError {
            pattern: text.to_owned(),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| {
            fail("write it as scheme://host[:port], e.g. https://api.example.com")
        })?;
        let scheme =
            Scheme::parse(scheme).ok_or_else(|| fail("the scheme must be http or https"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(fail(
                "a pattern names scheme, host and port only: no path, query or user",
            ));
        }
        let (host, port) = split_port(rest).map_err(|reason| fail(&reason))?;
        let host = host.to_ascii_lowercase();
        let host = if host == "*" {
            HostPattern::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            check_host(domain).map_err(|reason| fail(&reason))?;
            HostPattern::SubdomainOf(domain.to_owned())
        } else {
            check_host(&host).map_err(|reason| fail(&reason))?;
            HostPattern::Exact(host)
        };
        let port = match port {
            None => Some(scheme.default_port()),
            Some("*") => None,
            Some(port) => Some(
                port.parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| fail("the port must be 1-65535 or *"))?,
            ),
        };
        Ok(HttpPattern {
            text: text.to_owned(),
            scheme,
            host,
            port,
        })
    }
}

/// Splits `host[:port]`, keeping an IPv6 literal's brackets with the host.
fn split_port(authority: &str) -> Result<(&str, Option<&str>), String> {
    if authority.starts_with('[') {
        let end = authority
            .find(']')
            .ok_or("an IPv6 address needs its closing ]")?;
        let (host, rest) = authority.split_at(end + 1);
        return match rest {
            "" => Ok((host, None)),
            _ => rest
                .strip_prefix(':')
                .map(|port| (host, Some(port)))
                .ok_or_else(|| "unexpected text after the IPv6 address".to_owned()),
        };
    }
    Ok(match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("the host is missing".into());
    }
    if host.contains('*') {
        return Err(
            "a wildcard may only stand for the whole host or lead it, as *.example.com".into(),
        );
    }
    Ok(())
}

impl HttpPattern {
    /// The pattern as a content security policy source expression
    /// (`https://*.example.com:443`, `http://127.0.0.1:*`), built from its
    /// parsed parts; none for a host a source expression cannot hold (an
    /// IPv6 literal, or characters outside letters, digits, `.` and `-`).
    pub fn csp_source(&self) -> Option<String> {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        let host = match &self.host {
            HostPattern::Any => "*".to_owned(),
            HostPattern::Exact(host) => host.clone(),
            HostPattern::SubdomainOf(domain) => format!("*.{domain}"),
        };
        let name = host.strip_prefix("*.").unwrap_or(&host);
        let plain = host == "*"
            || (!name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-')));
        if !plain {
            return None;
        }
        let port = match self.port {
            Some(port) => port.to_string(),
            None => "*".to_owned(),
        };
        Some(format!("{scheme}://{host}:{port}"))
    }

    /// Whether a request to `scheme://host:port` is allowed by this pattern.
    /// `port` is the port the request will connect to (the scheme's default
    /// when its URI names none).
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        Scheme::parse(scheme).is_some_and(|scheme| self.matches(scheme, host, port))
    }

    fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        if scheme != self.scheme || self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        match &self.host {
            HostPattern::Any => true,
            HostPattern::Exact(exact) => host == *exact,
            HostPattern::SubdomainOf(domain) => host
                .strip_suffix(domain.as_str())
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
        }
    }

    /// Whether this pattern allows every host (`*`).
    pub fn any_host(&self) -> bool {
        self.host == HostPattern::Any
    }

    /// The one host it allows, when it names one exactly (lowercase).
    pub fn exact_host(&self) -> Option<&str> {
        match &self.host {
            HostPattern::Exact(host) => Some(host),
            _ => None,
        }
    }

    /// The domain whose subdomains it allows (`*.example.com`).
    pub fn subdomains_of(&self) -> Option<&str> {
        match &self.host {
            HostPattern::SubdomainOf(domain) => Some(domain),
            _ => None,
        }
    }

    /// Whether it allows every port of its hosts.
    pub fn any_port(&self) -> bool {
        self.port.is_none()
    }

    /// Whether `uri` (absolute, as the guest sent it) is allowed.
    pub fn allows_uri(&self, uri: &http::Uri) -> bool {
        let (Some(scheme), Some(host)) = (uri.scheme_str().and_then(Scheme::parse), uri.host())
        else {
            return false;
        };
        self.matches(
            scheme,
            host,
            uri.port_u16().unwrap_or(scheme.default_port()),
        )
    }
}

impl fmt::Display for HttpPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for HttpPattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for HttpPattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_is_a_csp_source_only_when_one_can_hold_it() {
        let source = |text: &str| pattern(text).csp_source();
        assert_eq!(
            source("https://api.example.com").as_deref(),
            Some("https://api.example.com:443")
        );
        assert_eq!(
            source("https://*.example.com").as_deref(),
            Some("https://*.example.com:443")
        );
        assert_eq!(
            source("http://127.0.0.1:*").as_deref(),
            Some("http://127.0.0.1:*")
        );
        assert_eq!(source("https://*:8443").as_deref(), Some("https://*:8443"));
        assert_eq!(source("http://[::1]:8080"), None);
        assert_eq!(source("https://evil.example;script-src:443"), None);
        assert_eq!(source("https://a'b.example"), None);
    }

    fn pattern(text: &str) -> HttpPattern {
        text.parse().unwrap()
    }

    #[test]
    fn an_exact_host_allows_its_default_port_only() {
        let p = pattern("https://api.example.com");
        assert!(p.allows("https", "api.example.com", 443));
        assert!(p.allows("HTTPS", "API.Example.com.", 443));
        assert!(!p.allows("https", "api.example.com", 8443));
        assert!(!p.allows("http", "api.example.com", 443));
        assert!(!p.allows("https", "api.example.com.evil.net", 443));
        assert!(!p.allows("https", "evilapi.example.com", 443));
    }

    #[test]
    fn wildcards_cover_subdomains_and_ports() {
        let p = pattern("https://*.example.com");
        assert!(p.allows("https", "a.example.com", 443));
        assert!(p.allows("https", "a.b.example.com", 443));
        assert!(!p.allows("https", "example.com", 443));
        assert!(!p.allows("https", "badexample.com", 443));
        let p = pattern("http://127.0.0.1:*");
        assert!(p.allows("http", "127.0.0.1", 1));
        assert!(p.allows("http", "127.0.0.1", 65535));
        assert!(!p.allows("http", "127.0.0.2", 80));
        let p = pattern("http://[::1]:8080");
        assert!(p.allows("http", "[::1]", 8080));
    }

    #[test]
    fn uris_are_matched_by_origin() {
        let p = pattern("http://localhost:8080");
        assert!(p.allows_uri(&"http://localhost:8080/a/b?c".parse().unwrap()));
        assert!(!p.allows_uri(&"http://localhost/".parse().unwrap()));
        assert!(!p.allows_uri(&"/relative".parse().unwrap()));
        assert!(pattern("http://example.com").allows_uri(&"http://example.com/x".parse().unwrap()));
    }

    #[test]
    fn bad_patterns_say_what_is_wrong() {
        for (text, reason) in [
            ("api.example.com", "scheme://host"),
            ("ftp://example.com", "http or https"),
            ("https://example.com/path", "no path"),
            ("https://user@example.com", "no path"),
            ("https://ex*ample.com", "wildcard"),
            ("https://example.com:0", "port"),
            ("https://example.com:99999", "port"),
            ("https://", "missing"),
        ] {
            let error = text.parse::<HttpPattern>().unwrap_err().to_string();
            assert!(error.contains(reason), "{text}: {error}");
        }
    }
}
