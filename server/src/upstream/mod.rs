//! Backend pools: FastCGI, uwsgi, SCGI and HTTP. The protocol codecs have no I/O and are
//! kept apart from connection handling and from routing policy.

pub mod fastcgi;
pub mod response;
pub mod scgi;
pub mod uwsgi;
