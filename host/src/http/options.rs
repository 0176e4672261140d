//! How the node serves HTTP: where it listens, the names and pages it
//! answers for, its token and its connections' bounds.

use std::net::SocketAddr;

/// How a node serves HTTP.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub listen: SocketAddr,
    /// Required as `Authorization: Bearer <token>` where a route asks for
    /// it (MCP, `/v1`, A2A, goals, `/metrics`) when set.
    pub token: Option<String>,
    /// Host names (or host:port) clients may use besides the loopback names
    /// and the listen address, for example a public DNS name.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed besides this machine's own, such as
    /// `https://app.example.com:443`.
    pub allowed_origins: Vec<String>,
    /// How many connections the front end holds, and for how long.
    pub connections: super::connections::ConnectionLimits,
}

impl HttpOptions {
    /// Refuses to expose the node beyond this machine without a token.
    pub fn check(&self) -> anyhow::Result<()> {
        if !self.listen.ip().is_loopback() && self.token.as_deref().is_none_or(str::is_empty) {
            anyhow::bail!(
                "refusing to listen on {} without a bearer token: anyone who can reach it could run the hosted agents; set --token (or `token` under [serve] in the config), or listen on 127.0.0.1",
                self.listen
            );
        }
        Ok(())
    }

    /// The `Host` names clients may use: the loopback names, the listen
    /// address and the configured ones.
    pub fn allowed_hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
        if !self.listen.ip().is_unspecified() {
            hosts.push(self.listen.ip().to_string());
        }
        hosts.extend(self.allowed_hosts.iter().cloned());
        hosts
    }

    /// The browser origins allowed: this machine's, on any port, and the
    /// configured ones.
    pub fn allowed_origins(&self) -> Vec<String> {
        let mut origins: Vec<String> =
            ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
                .map(String::from)
                .into();
        origins.extend(self.allowed_origins.iter().cloned());
        origins
    }

    /// The Host and Origin rules these options set.
    pub fn rules(&self) -> super::guard::Rules {
        super::guard::Rules::new(&self.allowed_hosts(), &self.allowed_origins())
    }

    /// The gate asking for the node's token, for clients of `family`.
    pub fn gate(&self, family: super::token::Family) -> super::token::Gate {
        super::token::Gate::new(self.token.clone(), family)
    }
}

/// Why a listener could not be opened on `address`, in one line: a port
/// another process holds names the flag to choose another with.
pub fn cannot_listen(address: &str, error: &std::io::Error, flag: &str) -> anyhow::Error {
    match error.kind() {
        std::io::ErrorKind::AddrInUse => anyhow::anyhow!(
            "cannot listen on {address}: the port is in use by another process (another `agentsite serve`?); stop it or choose another port with {flag}"
        ),
        _ => anyhow::anyhow!("cannot listen on {address}: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_address_needs_a_token() {
        let mut options = HttpOptions {
            listen: "0.0.0.0:7777".parse().unwrap(),
            token: None,
            allowed_hosts: vec![],
            allowed_origins: vec![],
            connections: Default::default(),
        };
        let error = options.check().unwrap_err().to_string();
        assert!(error.contains("without a bearer token"), "{error}");
        options.token = Some("s3cret".into());
        options.check().unwrap();
        options.token = None;
        options.listen = "127.0.0.1:7777".parse().unwrap();
        options.check().unwrap();
    }
}
