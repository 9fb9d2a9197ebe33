//! What the peer says about our sending: SETTINGS (RFC 9113 §6.5) and WINDOW_UPDATE (§6.9).

use super::{Connection, Event};
use crate::h2::frame::{self, settings_params, MAX_WINDOW};
use crate::h2::stream::grow;
use crate::h2::{Error, Reason, StreamId};

fn conn_err(reason: Reason, why: &'static str) -> Error {
    Error::conn(reason, why)
}

impl Connection {
    pub(super) fn settings(&mut self, ack: bool, params: &[u8]) -> Result<(), Error> {
        use frame::setting::*;
        if ack {
            if self.settings_unacked > 0 {
                self.settings_unacked -= 1;
                self.decoder
                    .set_max_size(self.config.header_table_size as usize);
                self.events.push_back(Event::SettingsAcked);
            }
            return Ok(());
        }
        // Only the last INITIAL_WINDOW_SIZE of a frame is applied: each walks every stream.
        let mut initial_window = None;
        for (id, value) in settings_params(params) {
            match id {
                HEADER_TABLE_SIZE => self.encoder.set_peer_table_size(value),
                ENABLE_PUSH if value > 1 => {
                    return Err(conn_err(Reason::PROTOCOL_ERROR, "ENABLE_PUSH not 0 or 1"));
                }
                INITIAL_WINDOW_SIZE => {
                    if value > MAX_WINDOW {
                        return Err(conn_err(
                            Reason::FLOW_CONTROL_ERROR,
                            "INITIAL_WINDOW_SIZE above 2^31-1",
                        ));
                    }
                    initial_window = Some(value);
                }
                MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_MAX_FRAME_SIZE).contains(&value)
                    {
                        return Err(conn_err(
                            Reason::PROTOCOL_ERROR,
                            "MAX_FRAME_SIZE out of range",
                        ));
                    }
                    self.peer_max_frame = value;
                }
                // MAX_CONCURRENT_STREAMS bounds pushes, which we never make; the peer's
                // MAX_HEADER_LIST_SIZE is advisory; unknown ones are ignored (§6.5.2).
                _ => {}
            }
        }
        if let Some(value) = initial_window {
            // §6.9.2: every open stream's window moves by the difference.
            let delta = value as i64 - self.peer_initial_window as i64;
            for s in self.streams.iter_mut() {
                s.send_window = grow(s.send_window, delta)
                    .ok_or(conn_err(Reason::FLOW_CONTROL_ERROR, "window above 2^31-1"))?;
            }
            self.peer_initial_window = value;
        }
        frame::encode_settings_ack(&mut self.pending);
        self.control_queued += frame::HEADER_LEN;
        Ok(())
    }

    pub(super) fn window_update(&mut self, id: StreamId, increment: u32) -> Result<(), Error> {
        if id == 0 {
            self.send_window = grow(self.send_window, increment as i64).ok_or(conn_err(
                Reason::FLOW_CONTROL_ERROR,
                "connection window above 2^31-1",
            ))?;
            return Ok(());
        }
        // An even stream is one we would have pushed: we push none, so it is idle.
        if id > self.last_stream || id.is_multiple_of(2) && !self.streams.contains(id) {
            return Err(conn_err(
                Reason::PROTOCOL_ERROR,
                "WINDOW_UPDATE on an idle stream",
            ));
        }
        if let Some(s) = self.streams.get(id) {
            s.send_window = grow(s.send_window, increment as i64).ok_or(Error::stream(
                id,
                Reason::FLOW_CONTROL_ERROR,
                "stream window above 2^31-1",
            ))?;
        }
        Ok(())
    }
}
