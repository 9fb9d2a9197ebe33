//! What one connection allows: windows, frame and header sizes, and the limits against
//! floods and resets.

use super::super::frame::DEFAULT_MAX_FRAME_SIZE;
use super::super::frame::DEFAULT_WINDOW;

/// Limits and settings of one connection.
#[derive(Debug, Clone)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: more open streams are refused (REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may have in flight.
    /// At least 65,535 (a smaller one would bind the peer only once acknowledged).
    pub initial_window_size: u32,
    /// Request body bytes all streams together may have in flight.
    pub connection_window_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE: the largest frame payload accepted.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: a larger request head is answered 431.
    pub max_header_list_size: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: the peer's HPACK table in our memory.
    pub header_table_size: u32,
    /// Our HPACK table in the peer's memory (capped by what the peer allows).
    pub encoder_table_size: u32,
    /// Compressed bytes of one header block (HEADERS and CONTINUATIONs); past this the
    /// connection ends: buffering it is the CONTINUATION flood. Raised to
    /// `max_header_list_size` if that is larger.
    pub max_header_block: usize,
    /// Bytes of frames the peer makes us queue (PING and SETTINGS acks, resets) while the
    /// driver has not taken the output: a peer that sends them without reading is cut off.
    pub max_control_queued: usize,
    /// Streams the peer may reset or get refused or reset for errors, net of the streams
    /// it completes (each gives one back, up to this): Rapid Reset (CVE-2023-44487).
    pub reset_budget: u32,
    /// Streams reset for the peer's errors (malformed requests, heads too large, empty
    /// DATA) over the connection's life, whatever it completed: completions would
    /// otherwise refill the budget for ever (MadeYouReset, CVE-2025-8671). A peer's own
    /// cancels stay under the budget alone: a browser or a proxy may send many over a long
    /// connection. h2's `max_local_error_reset_streams` is 1024 too.
    pub error_reset_lifetime: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_concurrent_streams: 100,
            initial_window_size: DEFAULT_WINDOW,
            connection_window_size: DEFAULT_WINDOW,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_header_list_size: 16 << 10,
            header_table_size: 4096,
            encoder_table_size: 4096,
            max_header_block: 32 << 10,
            max_control_queued: 16 << 10,
            reset_budget: 200,
            error_reset_lifetime: 1024,
        }
    }
}
