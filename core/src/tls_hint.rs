//! What to check when a connection failed in a way TLS explains. The transport's own words
//! ("BadSignature", "broken pipe", "connection closed") do not say that the CA file is the
//! wrong one or that the node speaks TLS, so the retry error carries a hint naming the
//! setting to change.

/// The hint for an attempt on `uri` that failed with the transport error `error`, or None
/// when TLS is not a likely cause. `client_cert`: whether this client presents one.
pub(crate) fn tls_hint(uri: &str, error: &str, client_cert: bool) -> Option<&'static str> {
    let https = uri.starts_with("https://");
    if error.contains("invalid peer certificate") {
        return Some(if error.contains("NotValidForName") {
            "the node's TLS certificate does not name the host in this endpoint: connect by a name or address \
             its certificate was made for (`dls certs node N --host ...`)"
        } else {
            "the node's TLS certificate is not signed by a CA this client trusts: give the cluster CA \
             (ca.pem of `dls certs init`) as the client's CA file or in DLS_CA_FILE"
        });
    }
    if https && (error.contains("InvalidContentType") || error.contains("corrupt message")) {
        return Some("the node does not speak TLS on this port: use http://HOST:PORT and no CA file");
    }
    if !https {
        // A TLS port drops a plain-text client mid-handshake: the HTTP/2 preface meets a
        // closed socket, the connection closes under the call, or the TLS alert is read as
        // an HTTP/2 frame (which one is a race). A node that died refuses connections
        // rather than closing them, so "connection closed" alone rarely misleads here, and
        // the hint says "if".
        let tls_port =
            ["broken pipe", "frame with invalid size", "connection closed"].iter().any(|s| error.contains(s));
        return tls_port
            .then_some("if the node serves TLS (--tls-cert), use https://HOST:PORT or give a CA file (DLS_CA_FILE)");
    }
    // A server that refuses the client certificate (or its absence) sends an alert and
    // closes the connection; with TLS 1.3 that happens after the client's handshake
    // ended, so the client mostly sees its call cut off rather than the alert.
    let refused =
        ["received fatal alert", "connection closed", "broken pipe", "connection reset", "operation was canceled"]
            .iter()
            .any(|s| error.contains(s));
    match (refused, client_cert) {
        (false, _) => None,
        (true, false) => Some(
            "if the node requires client certificates (--tls-client-ca), give one \
             (DLS_CLIENT_CERT_FILE and DLS_CLIENT_KEY_FILE; `dls certs client NAME` makes one)",
        ),
        (true, true) => {
            Some("if the node requires client certificates (--tls-client-ca), this one must be signed by that CA")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_the_setting_to_change() {
        let wrong_ca = tls_hint("https://n:1", "Unavailable: invalid peer certificate: BadSignature", false);
        assert!(wrong_ca.unwrap().contains("DLS_CA_FILE"));
        let wrong_name = tls_hint("https://n:1", "invalid peer certificate: NotValidForName", false);
        assert!(wrong_name.unwrap().contains("--host"));
        let to_plain = tls_hint("https://n:1", "received corrupt message of type InvalidContentType", false);
        assert!(to_plain.unwrap().contains("http://"));
        let from_plain = tls_hint("http://n:1", "transport error: connection error: broken pipe", false);
        assert!(from_plain.unwrap().contains("https://"));
        let no_cert = tls_hint("https://n:1", "operation was canceled: connection closed", false);
        assert!(no_cert.unwrap().contains("DLS_CLIENT_CERT_FILE"));
        let bad_cert = tls_hint("https://n:1", "operation was canceled: connection closed", true);
        assert!(bad_cert.unwrap().contains("signed by that CA"));
        let alert = tls_hint("https://n:1", "connection error: received fatal alert: DecryptError", true);
        assert!(alert.unwrap().contains("signed by that CA"));
        let garbled =
            tls_hint("http://n:1", "h2 protocol error: connection error detected: frame with invalid size", false);
        assert!(garbled.unwrap().contains("https://"));
    }

    #[test]
    fn no_hint_when_tls_is_not_the_likely_cause() {
        assert_eq!(tls_hint("http://n:1", "tcp connect error: Connection refused", false), None);
        assert_eq!(tls_hint("https://n:1", "no answer from https://n:1 within 5000 ms", false), None);
        assert_eq!(tls_hint("http://n:1", "Unavailable: not the leader", false), None);
        assert_eq!(tls_hint("http://n:1", "transport error: connection reset by peer", false), None);
    }
}
