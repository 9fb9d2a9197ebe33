//! kTLS: after the handshake, the session's keys go to the kernel (`TCP_ULP` "tls", then
//! `TLS_TX`/`TLS_RX`), so the HTTP/1.1 fast path keeps `sendfile(2)` on a TLS socket.
//! Where the kernel has no `tls` module (or a pod may not load it) the first
//! `setsockopt` fails and the connection stays on userspace rustls, with no error.
