//! Backend pools: FastCGI, uwsgi, SCGI and HTTP. The protocol codecs (`fastcgi`, `uwsgi`,
//! `scgi`, `response`) have no I/O; `pool` is the endpoint policy; `handler` does the I/O.

pub mod cgi_env;
pub mod dns;
pub mod fastcgi;
pub mod handler;
pub mod pool;
pub mod response;
pub mod scgi;
pub mod uwsgi;

#[cfg(test)]
mod robustness_tests;
