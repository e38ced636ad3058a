//! Who is at the other end of a mutual-TLS connection: the subject common name of the client
//! certificate that the listener verified against `--tls-client-ca`.
//!
//! With `--trust-client-certificates`, a participant (e.g. a site's LIS on a database of its
//! own) takes that name as a planner principal, so that it trusts the planners of another
//! administrative domain by the CA that signed their certificates, with no token row in a
//! shared database (docs/protocol.md, "Identity"). Read once per connection
//! ([`remember_peer`], actix's `on_connect`), used by the [`super::auth::Caller`] extractor.

use actix_tls::accept::rustls_0_23::TlsStream;
use actix_web::dev::Extensions;
use actix_web::rt::net::TcpStream;

/// The verified client certificate's subject common name, kept with its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerName(pub String);

/// `on_connect` hook: remembers the verified client certificate's common name, if the
/// connection is TLS and the client presented one (the listener verified it against
/// `--tls-client-ca` before the handshake completed).
pub fn remember_peer(conn: &dyn std::any::Any, ext: &mut Extensions) {
    let Some(tls) = conn.downcast_ref::<TlsStream<TcpStream>>() else { return };
    let Some(leaf) = tls.get_ref().1.peer_certificates().and_then(|c| c.first()) else { return };
    if let Some(name) = common_name(leaf.as_ref()) {
        ext.insert(PeerName(name));
    }
}

/// The subject common name of a DER certificate (`None`: unreadable, or no CN).
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?.to_owned();
    (!cn.is_empty()).then_some(cn)
}

#[cfg(test)]
mod tests {
    use super::common_name;

    #[test]
    fn the_common_name_is_read_from_a_certificate() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "planner-a");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(common_name(cert.der()), Some("planner-a".into()));
        assert_eq!(common_name(b"not a certificate"), None);
    }
}
