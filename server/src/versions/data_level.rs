//! The highest feature level of anything written into a data directory
//! (`<data-dir>/feature-level`), so a node that cannot read it refuses to start instead of
//! stopping on the first entry it cannot decode. Written, and fsynced, before the first
//! entry of a higher level is appended; absent means level 1 (v0.1.0 never writes it).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::locks::feature_level::{BASE_LEVEL, LEVEL};
use crate::raft::store_error::StoreError;

pub const FILE: &str = "feature-level";

/// The data directory's level, and the most this node accepts (`--feature-level`).
#[derive(Debug)]
pub struct DataLevel {
    path: PathBuf,
    recorded: Mutex<u32>,
    max: u32,
}

impl DataLevel {
    /// Reads the recorded level; refuses when this node reads less than what was written.
    pub fn open(data_dir: &Path, max: u32) -> Result<DataLevel, StoreError> {
        let path = data_dir.join(FILE);
        let recorded = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<u32>().map_err(|_| {
                StoreError::Untrusted(format!(
                    "{} does not hold a feature level ({:?}): damaged",
                    path.display(),
                    text.trim()
                ))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => BASE_LEVEL,
            Err(e) => return Err(StoreError::io("read", &path)(e)),
        };
        if recorded > max {
            return Err(refusal(data_dir, recorded, max));
        }
        Ok(DataLevel { path, recorded: Mutex::new(recorded), max })
    }

    /// Before entries (or a snapshot) of `level` are made durable: refuses a level this
    /// node does not read, as a node of that release would fail to decode it, and records
    /// a higher level first.
    pub fn admit(&self, level: u32) -> Result<(), StoreError> {
        if level > self.max {
            return Err(StoreError::Level(format!(
                "refusing a raft entry of feature level {level}: this node reads at most level {} \
                 (--feature-level); the leader should not have sent it (gate bug?)",
                self.max
            )));
        }
        let mut recorded = self.recorded.lock().expect("data level lock");
        if level > *recorded {
            write_synced(&self.path, level).map_err(StoreError::io("record the feature level in", &self.path))?;
            *recorded = level;
        }
        Ok(())
    }

    /// At start, the level of the snapshot the table was restored from: a directory whose
    /// snapshot was installed before its level was recorded refuses like [`DataLevel::open`].
    pub fn restored(&self, level: u32) -> Result<(), StoreError> {
        if level > self.max {
            return Err(refusal(self.path.parent().unwrap_or(Path::new(".")), level, self.max));
        }
        self.admit(level)
    }

    pub fn recorded(&self) -> u32 {
        *self.recorded.lock().expect("data level lock")
    }
}

/// Why a node that reads at most `max` does not start on a directory of `level`, and what
/// to run instead.
fn refusal(data_dir: &Path, level: u32, max: u32) -> StoreError {
    let flag = max < LEVEL;
    StoreError::Level(format!(
        "data directory {} holds raft entries or snapshots of feature level {level}, but this node reads at most level \
         {max} ({}): it could not apply them. Start a dls release that reads level {level} (the one that wrote them, or \
         later){}",
        data_dir.display(),
        if flag { "--feature-level" } else { "this release" },
        if flag { format!(", or this one without --feature-level {max}") } else { String::new() }
    ))
}

fn write_synced(path: &Path, level: u32) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{level}\n"))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_reading_less_than_was_written_refuses_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let level = DataLevel::open(dir.path(), 2).unwrap();
        assert_eq!(level.recorded(), 1);
        level.admit(1).unwrap();
        assert!(!dir.path().join(FILE).exists(), "level 1 needs no file");
        level.admit(2).unwrap();
        assert_eq!(DataLevel::open(dir.path(), 2).unwrap().recorded(), 2);
        let err = DataLevel::open(dir.path(), 1).unwrap_err().to_string();
        assert!(err.contains("feature level 2") && err.contains("at most level 1"), "{err}");
        let old = DataLevel::open(tempfile::tempdir().unwrap().path(), 1).unwrap();
        assert!(old.admit(2).unwrap_err().to_string().contains("at most level 1"));
    }
}
