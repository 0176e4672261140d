//! Where the node never sends a request of its own or an agent's: the
//! link-local range and the cloud's metadata services, which hand out the
//! machine's own credentials to whoever on it asks (169.254.169.254 on AWS,
//! GCP, Azure and most others). Nothing a stranger hands the node (a card's
//! endpoint, a registry's realm, a grant from a policy file) may point it
//! there.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// Names that resolve to a metadata service inside the clouds that use them.
const METADATA_NAMES: [&str; 4] = [
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "instance-data.ec2.internal",
];

/// Why a request to `host` (a name or an address, as a URL writes it,
/// IPv6 in brackets or not) is never made, or `None` when it may be.
pub fn forbidden(host: &str) -> Option<&'static str> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return forbidden_ip(ip);
    }
    METADATA_NAMES
        .contains(&host.as_str())
        .then_some("is a cloud metadata service, which hands out this machine's credentials")
}

/// The one line that refuses a request to `host`, when [`forbidden`] says
/// it is never made.
pub fn refusal(host: &str) -> Option<String> {
    forbidden(host).map(|why| format!("{host} {why}: the node sends no request there"))
}

/// Why a request to `ip` is never made, or `None` when it may be.
pub fn forbidden_ip(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        // An IPv4 address written as IPv6 (::ffff:169.254.169.254) is
        // reached as the IPv4 one.
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    let metadata = "is a cloud metadata service, which hands out this machine's credentials";
    match ip {
        IpAddr::V4(v4) if v4.octets() == [169, 254, 169, 254] => Some(metadata),
        // Alibaba Cloud's.
        IpAddr::V4(v4) if v4.octets() == [100, 100, 100, 200] => Some(metadata),
        IpAddr::V4(v4) if v4.is_link_local() => {
            Some("is a link-local address, where metadata services and unconfigured devices answer")
        }
        // AWS's over IPv6.
        IpAddr::V6(v6) if v6.segments() == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254] => Some(metadata),
        IpAddr::V6(v6) if v6.is_unicast_link_local() => {
            Some("is a link-local address, where metadata services and unconfigured devices answer")
        }
        _ => None,
    }
}

/// `builder` with a name resolver that never hands out a forbidden
/// address: a name that resolves only to link-local or metadata addresses
/// (as an attacker's DNS can make any name do) fails to resolve, naming
/// why. Addresses written into a URL are not resolved: check them with
/// [`forbidden`] where the URL is accepted.
pub fn guarded(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder.dns_resolver(Arc::new(Resolver))
}

struct Resolver;

impl reqwest::dns::Resolve for Resolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            if let Some(refusal) = refusal(&host) {
                return Err(refusal.into());
            }
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|address| forbidden_ip(address.ip()).is_none())
                .collect();
            if allowed.is_empty() && !found.is_empty() {
                return Err(format!(
                    "{host} resolves only to link-local or metadata addresses: the node sends no request there"
                )
                .into());
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_link_local_destinations_are_named_however_written() {
        for host in [
            "169.254.169.254",
            "169.254.1.1",
            "[fe80::1]",
            "fe80::1",
            "[::ffff:169.254.169.254]",
            "[fd00:ec2::254]",
            "100.100.100.200",
            "metadata.google.internal",
            "Metadata.Google.Internal.",
            "metadata",
        ] {
            assert!(forbidden(host).is_some(), "{host}");
        }
        for host in [
            "127.0.0.1",
            "[::1]",
            "10.0.0.5",
            "api.example.com",
            "169.255.0.1",
            "metadata.example.com",
        ] {
            assert_eq!(forbidden(host), None, "{host}");
        }
    }
}
