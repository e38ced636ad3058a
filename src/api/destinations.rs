//! Where webhooks may deliver: a guard against server-side request forgery (SSRF).
//!
//! A webhook's URL is chosen by any user with a token, and the service connects to it. Left
//! alone, a user could point it at the service's own network (PostgreSQL on `127.0.0.1:5432`,
//! a cloud's metadata service at `169.254.169.254`, hosts of `10.0.0.0/8`) and use the delivery
//! log as a port scanner. So a destination is refused when its host is, or resolves to, an
//! address that is not on the public Internet ([`AddressKind`]: loopback, private, shared
//! (carrier-grade NAT), link-local, unique-local, multicast, unspecified, broadcast, reserved;
//! IPv4-mapped and IPv4-compatible IPv6 addresses count as the IPv4 address they carry),
//! unless an admin allowed it ([`DestinationPolicy`], `serve --webhook-allow CIDR|HOST`).
//!
//! The check runs at registration (`422` naming the reason) and again at every connection,
//! because what a name resolves to may change after registration (DNS rebinding): a delivery
//! resolves the name itself ([`DestinationPolicy::resolve`], also reqwest's resolver through
//! [`PolicyResolver`]) and connects only to an address it checked. Literal addresses are
//! checked in every form the URL parser or the system resolver accepts (`2130706433`,
//! `0x7f.1`, `[::ffff:127.0.0.1]`, ...): an `http(s)` URL's host is normalised by the URL
//! parser, a `nats://` URL's host (opaque to it) goes through `getaddrinfo`, which reads the
//! same forms.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

/// How long a registration waits for a name to resolve.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why an address is not a public one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::Display)]
#[strum(serialize_all = "kebab-case")]
pub enum AddressKind {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// `100.64.0.0/10` (carrier-grade NAT).
    Shared,
    /// `169.254.0.0/16` (cloud metadata services live here), `fe80::/10`.
    LinkLocal,
    /// `fc00::/7`.
    UniqueLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `255.255.255.255`.
    Broadcast,
    /// `240.0.0.0/4`, `192.0.0.0/24`, the documentation and benchmarking ranges, the
    /// deprecated site-local `fec0::/10`, `64:ff9b:1::/48`, `100::/64`, `2001:db8::/32`.
    Reserved,
}

/// The kind of a non-public address; `None` for a public one.
pub fn classify(ip: IpAddr) -> Option<AddressKind> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressKind> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        _ if ip.is_broadcast() => AddressKind::Broadcast,
        (0, ..) => AddressKind::Unspecified,
        (127, ..) => AddressKind::Loopback,
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => AddressKind::Private,
        (100, 64..=127, _) => AddressKind::Shared,
        (169, 254, _) => AddressKind::LinkLocal,
        (224..=239, ..) => AddressKind::Multicast,
        (240..=255, ..)
        | (192, 0, 0)
        | (192, 0, 2)
        | (198, 51, 100)
        | (203, 0, 113)
        | (198, 18..=19, _)
        | (192, 88, 99) => AddressKind::Reserved,
        _ => return None,
    })
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressKind> {
    // An IPv4 address carried in IPv6 (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64
    // `64:ff9b::a.b.c.d`) reaches that IPv4 address.
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some(AddressKind::Unspecified);
    }
    if ip.is_loopback() {
        return Some(AddressKind::Loopback);
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return classify_v4(v4).or(Some(AddressKind::Reserved).filter(|_| s[0] == 0));
    }
    Some(match s[0] {
        0xfe80..=0xfebf => AddressKind::LinkLocal,
        0xfec0..=0xfeff => AddressKind::Reserved,
        0xfc00..=0xfdff => AddressKind::UniqueLocal,
        0xff00..=0xffff => AddressKind::Multicast,
        0x0100 if s[1..4] == [0, 0, 0] => AddressKind::Reserved,
        0x2001 if s[1] == 0x0db8 => AddressKind::Reserved,
        0x0064 if s[1] == 0xff9b && s[2] == 1 => AddressKind::Reserved,
        // 6to4 (2002::/16) carries an IPv4 address too.
        0x2002 => return classify_v4(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8)),
        _ => return None,
    })
}

/// One entry of `--webhook-allow`: a network (`10.1.0.0/16`, or one address) or a host name
/// (`hooks.internal`, every address it resolves to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// Addresses in this network may be reached.
    Net(IpNet),
    /// This host name (lower case, no trailing dot) may be reached at any address.
    Host(String),
}

/// A `--webhook-allow` value that is neither a network, an address nor a host name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--webhook-allow `{0}` is not a CIDR network (10.0.0.0/8), an address or a host name")]
pub struct BadAllowed(pub String);

impl std::str::FromStr for Allowed {
    type Err = BadAllowed;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if let Ok(net) = t.parse::<IpNet>() {
            return Ok(Allowed::Net(net.trunc()));
        }
        if let Ok(ip) = t.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return Ok(Allowed::Net(IpNet::from(ip)));
        }
        let host = t.trim_end_matches('.').to_ascii_lowercase();
        let label_ok = |l: &str| {
            !l.is_empty() && l.len() <= 63 && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
            return Err(BadAllowed(s.to_owned()));
        }
        Ok(Allowed::Host(host))
    }
}

impl std::fmt::Display for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Allowed::Net(n) => write!(f, "{n}"),
            Allowed::Host(h) => f.write_str(h),
        }
    }
}

/// Why a destination is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// The URL names a non-public address.
    #[error("the destination {ip} is a {kind} address, which webhooks may not reach (an admin may allow it: --webhook-allow)")]
    Address { ip: IpAddr, kind: AddressKind },
    /// The host name resolves to a non-public address.
    #[error("the destination {host} resolves to a {kind} address, which webhooks may not reach (an admin may allow it: --webhook-allow)")]
    Resolves { host: String, kind: AddressKind },
    /// The host name did not resolve (at delivery: nothing to connect to).
    #[error("the destination {host} does not resolve")]
    Unresolved { host: String },
}

/// Which destinations webhooks may reach: every public address, and what an admin allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestinationPolicy {
    allowed: Vec<Allowed>,
}

impl DestinationPolicy {
    /// Public addresses, and the `allowed` networks and hosts.
    pub fn new(allowed: Vec<Allowed>) -> Self {
        DestinationPolicy { allowed }
    }

    fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allowed.iter().any(|a| matches!(a, Allowed::Host(h) if *h == host))
    }

    /// May `ip` be reached (reached through `host`, if a name)?
    ///
    /// # Errors
    /// [`DestinationError::Address`] (or `Resolves`, for a name) with its [`AddressKind`].
    pub fn check_ip(&self, host: Option<&str>, ip: IpAddr) -> Result<(), DestinationError> {
        let Some(kind) = classify(ip) else { return Ok(()) };
        let canonical = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let in_net =
            self.allowed.iter().any(|a| matches!(a, Allowed::Net(n) if n.contains(&ip) || n.contains(&canonical)));
        if in_net || host.is_some_and(|h| self.host_allowed(h)) {
            return Ok(());
        }
        Err(match host {
            Some(h) => DestinationError::Resolves { host: h.to_owned(), kind },
            None => DestinationError::Address { ip, kind },
        })
    }

    /// The addresses of `host` (a name or an address in any form `getaddrinfo` reads) at
    /// `port` that may be reached, in the resolver's order.
    ///
    /// # Errors
    /// [`DestinationError::Unresolved`] when the name does not resolve, or the refusal of the
    /// first address when none may be reached.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, DestinationError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            self.check_ip(None, ip)?;
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let unresolved = || DestinationError::Unresolved { host: host.to_owned() };
        let found: Vec<SocketAddr> = tokio::net::lookup_host((bare, port)).await.map_err(|_| unresolved())?.collect();
        let mut refusal = None;
        let mut ok = Vec::new();
        for a in found {
            match self.check_ip(Some(host), a.ip()) {
                Ok(()) => ok.push(a),
                Err(e) => refusal = refusal.or(Some(e)),
            }
        }
        match (ok.is_empty(), refusal) {
            (true, Some(e)) => Err(e),
            (true, None) => Err(unresolved()),
            (false, _) => Ok(ok),
        }
    }

    /// The registration's check of a webhook URL's host: a literal address must be public (or
    /// allowed); a name must resolve (within [`RESOLVE_TIMEOUT`]) to public (or allowed)
    /// addresses only. A name that does not resolve now is accepted: every delivery checks
    /// again.
    ///
    /// # Errors
    /// The [`DestinationError`] of the first address refused.
    pub async fn check_registration(&self, host: &str, port: u16) -> Result<(), DestinationError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return self.check_ip(None, ip);
        }
        let Ok(Ok(found)) = tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((bare, port))).await else {
            return Ok(());
        };
        for a in found {
            self.check_ip(Some(host), a.ip())?;
        }
        Ok(())
    }
}

/// reqwest's resolver for webhook deliveries: the system's resolver, keeping only the
/// addresses the [`DestinationPolicy`] allows, so that the connection goes only to a checked
/// address whatever the name resolves to by then.
pub struct PolicyResolver(pub Arc<DestinationPolicy>);

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = policy.resolve(&host, 0).await?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn non_public_addresses_are_classified_and_public_ones_are_not() {
        for (a, kind) in [
            ("127.0.0.1", AddressKind::Loopback),
            ("127.255.0.9", AddressKind::Loopback),
            ("::1", AddressKind::Loopback),
            ("10.0.0.1", AddressKind::Private),
            ("172.31.255.1", AddressKind::Private),
            ("192.168.1.1", AddressKind::Private),
            ("100.64.0.1", AddressKind::Shared),
            ("169.254.169.254", AddressKind::LinkLocal),
            ("fe80::1", AddressKind::LinkLocal),
            ("fd00::1", AddressKind::UniqueLocal),
            ("fc00::1", AddressKind::UniqueLocal),
            ("224.0.0.1", AddressKind::Multicast),
            ("ff02::1", AddressKind::Multicast),
            ("0.0.0.0", AddressKind::Unspecified),
            ("0.1.2.3", AddressKind::Unspecified),
            ("::", AddressKind::Unspecified),
            ("255.255.255.255", AddressKind::Broadcast),
            ("240.0.0.1", AddressKind::Reserved),
            ("::ffff:127.0.0.1", AddressKind::Loopback),
            ("::ffff:169.254.169.254", AddressKind::LinkLocal),
            ("::ffff:10.0.0.1", AddressKind::Private),
            ("::127.0.0.1", AddressKind::Loopback),
            ("64:ff9b::10.0.0.1", AddressKind::Private),
            ("2002:7f00:1::", AddressKind::Loopback),
            ("2001:db8::1", AddressKind::Reserved),
        ] {
            assert_eq!(classify(ip(a)), Some(kind), "{a}");
        }
        for a in ["8.8.8.8", "1.1.1.1", "172.32.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "100.128.0.1"] {
            assert_eq!(classify(ip(a)), None, "{a}");
        }
    }

    #[test]
    fn an_allowed_network_or_host_lets_its_addresses_through() {
        let p = DestinationPolicy::new(vec!["127.0.0.1".parse().unwrap(), "10.1.0.0/16".parse().unwrap()]);
        assert_eq!(p.check_ip(None, ip("127.0.0.1")), Ok(()));
        assert_eq!(p.check_ip(None, ip("::ffff:127.0.0.1")), Ok(()), "the mapped form of an allowed address");
        assert_eq!(p.check_ip(None, ip("10.1.2.3")), Ok(()));
        assert!(matches!(
            p.check_ip(None, ip("10.2.0.1")),
            Err(DestinationError::Address { kind: AddressKind::Private, .. })
        ));
        assert!(matches!(
            p.check_ip(None, ip("127.0.0.2")),
            Err(DestinationError::Address { kind: AddressKind::Loopback, .. })
        ));
        let p = DestinationPolicy::new(vec!["Hooks.Internal.".parse().unwrap()]);
        assert_eq!(p.check_ip(Some("hooks.internal"), ip("10.0.0.1")), Ok(()));
        assert!(p.check_ip(Some("other.internal"), ip("10.0.0.1")).is_err());
        assert!("not a host!".parse::<Allowed>().is_err());
        assert!("10.0.0.0/33".parse::<Allowed>().is_err());
    }

    #[tokio::test]
    async fn names_and_numeric_forms_are_resolved_before_the_check() {
        let p = DestinationPolicy::default();
        for host in ["localhost", "2130706433", "0x7f.1", "127.1", "0", "[::1]"] {
            let e = p.resolve(host, 80).await.unwrap_err();
            assert!(
                matches!(
                    e,
                    DestinationError::Address { kind: AddressKind::Loopback | AddressKind::Unspecified, .. }
                        | DestinationError::Resolves { kind: AddressKind::Loopback | AddressKind::Unspecified, .. }
                ),
                "{host}: {e}"
            );
            assert!(p.check_registration(host, 80).await.is_err(), "{host}");
        }
        let allowed = DestinationPolicy::new(vec!["127.0.0.0/8".parse().unwrap(), "::1".parse().unwrap()]);
        assert!(!allowed.resolve("localhost", 80).await.unwrap().is_empty());
    }
}
