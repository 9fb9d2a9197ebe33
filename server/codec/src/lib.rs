//! Backend wire codecs with no I/O: FastCGI records, the uwsgi and SCGI request packets,
//! the CGI environment they carry, and the response head a backend sends back. Encoders
//! and decoders work on bytes, so they are unit-tested and fuzzed without sockets.

pub mod cgi_env;
pub mod fastcgi;
pub mod response_head;
pub mod scgi;
pub mod uwsgi;

#[cfg(test)]
mod robustness_tests;
