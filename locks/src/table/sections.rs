//! The state kept outside the table's serde form, as named sections of snapshot files
//! (format CDLSNAP4): new state needs no new layout, and a file written before a section
//! existed simply lacks it.

use super::super::command::Rejection;
use super::LockTable;

impl LockTable {
    /// Every section with state in it.
    pub fn sections(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = vec![self.deadlines_section()];
        out.extend(self.lock_delays.sections());
        out.extend(self.permits_section());
        out.extend(self.slot_runs_section());
        out.extend(self.features.section());
        out.extend(self.api_keys_section());
        out
    }

    /// Restores the sections of a snapshot file. A section this version does not know
    /// means the file was written by a newer one: refused, rather than dropping state.
    pub fn restore_sections(&mut self, sections: Vec<(String, Vec<u8>)>) -> Result<(), Rejection> {
        for (name, bytes) in sections {
            let known = self.restore_deadlines(&name, &bytes)?
                || self.lock_delays.restore_section(&name, &bytes)?
                || self.restore_permits(&name, &bytes)?
                || self.restore_slot_runs(&name, &bytes)?
                || self.features.restore_section(&name, &bytes)?
                || self.restore_api_keys(&name, &bytes)?;
            if !known {
                return Err(Rejection::Invalid(format!(
                    "snapshot section {name:?} is unknown to this version (written by a newer dls?)"
                )));
            }
        }
        Ok(())
    }
}
