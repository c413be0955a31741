//! Feature levels: which releases can read what is in the log and the snapshots.
//!
//! Level 1 is v0.1.0 (commit ca59f73): every command up to `Scoped` and the snapshot
//! sections it writes. Level 2 adds schedule slots (`ClaimSlot`, `FinishSlot`, the
//! `slot-runs` section), API keys kept by the cluster (their commands, the `api-keys`
//! section and their events) and the cluster's own level (`SetFeatureLevel`, the
//! `feature-level` section). A node that cannot decode an entry stops applying the log,
//! so the leader proposes a command only once the cluster's level (decided through raft,
//! see `FeatureLevels`) is at least the command's.

use serde::{Deserialize, Serialize};

use super::command::{Command, Rejection};

/// The level of v0.1.0, and of a node that does not say (it predates the handshake).
pub const BASE_LEVEL: u32 = 1;
/// The highest level this build reads and writes.
pub const LEVEL: u32 = 2;

/// The section name in snapshot files.
const SECTION: &str = "feature-level";

impl Command {
    /// The lowest feature level whose nodes can decode and apply this command. Every
    /// variant has its own arm (no catch-all), so a new command cannot be added without
    /// deciding its level.
    pub fn feature_level(&self) -> u32 {
        match self {
            Command::Begin { .. }
            | Command::Acquire { .. }
            | Command::CancelWait { .. }
            | Command::Release { .. }
            | Command::End { .. }
            | Command::Expire { .. }
            | Command::Abort { .. }
            | Command::WebhookDelivered { .. }
            | Command::BeginAcquire { .. }
            | Command::AcquireAll { .. }
            | Command::Downgrade { .. }
            | Command::BeginWith { .. }
            | Command::EndOverdue { .. }
            | Command::SetLockDelay { .. }
            | Command::EndLockDelay { .. }
            | Command::AcquirePermit { .. } => BASE_LEVEL,
            Command::Batch(cmds) => cmds.iter().map(Command::feature_level).max().unwrap_or(BASE_LEVEL),
            Command::Scoped { cmd, .. } => cmd.feature_level(),
            Command::ClaimSlot { .. } => 2,
            Command::FinishSlot { .. } => 2,
            Command::CreateApiKey { .. }
            | Command::RevokeApiKey { .. }
            | Command::RotateApiKey { .. }
            | Command::ExpireApiKeys { .. } => 2,
            // Every release with the version handshake decodes it, and only those are ever
            // sent one (see `FeatureLevels`); it must not count as a use of level 2, or
            // raising the level would forbid lowering it again.
            Command::SetFeatureLevel { .. } => BASE_LEVEL,
        }
    }

    /// Whether this is the cluster's own level change (read by every node with the
    /// handshake, whatever its level).
    pub fn is_level_change(&self) -> bool {
        matches!(self, Command::SetFeatureLevel { .. })
    }
}

/// The cluster's feature level as decided through the log, and the highest level of
/// anything applied: both deterministic, the same on every replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureLevels {
    /// What the leader may propose: raised once every member reported at least the new
    /// level, lowered when one reports less (a rolling downgrade) unless `used` forbids it.
    pub level: u32,
    /// The highest level of an entry applied so far: once an entry of level 2 is in the
    /// log, a node of level 1 could not read it, so the level never drops below this.
    pub used: u32,
}

impl Default for FeatureLevels {
    fn default() -> Self {
        FeatureLevels { level: BASE_LEVEL, used: BASE_LEVEL }
    }
}

impl FeatureLevels {
    /// Notes a command being applied.
    pub fn note(&mut self, cmd: &Command) {
        self.used = self.used.max(cmd.feature_level());
    }

    /// Applies `SetFeatureLevel { level }`: refused (changing nothing) below what was used
    /// or outside the levels this build knows.
    pub fn set(&mut self, level: u32) -> Result<(), Rejection> {
        if level < self.used {
            return Err(Rejection::Invalid(format!(
                "feature level {level} is below level {}, which entries in the log already use",
                self.used
            )));
        }
        if !(BASE_LEVEL..=LEVEL).contains(&level) {
            return Err(Rejection::Invalid(format!("feature level {level} is not one of {BASE_LEVEL}..={LEVEL}")));
        }
        self.level = level;
        Ok(())
    }

    /// The higher of the level and the highest used. Above 1, snapshots carry this
    /// section, which v0.1.0 (refusing sections it does not know) could not read; every
    /// later release can, and what it must be able to apply is `used`.
    pub fn needed(&self) -> u32 {
        self.level.max(self.used)
    }

    /// The snapshot section: written only above level 1, so a cluster still at level 1
    /// writes snapshots v0.1.0 reads (it refuses sections it does not know).
    pub fn section(&self) -> Option<(String, Vec<u8>)> {
        (self.needed() > BASE_LEVEL)
            .then(|| (SECTION.to_string(), bincode::serialize(self).expect("two numbers encode")))
    }

    /// Restores the section if `name` is this module's; false if it is not.
    pub fn restore_section(&mut self, name: &str, bytes: &[u8]) -> Result<bool, Rejection> {
        if name != SECTION {
            return Ok(false);
        }
        *self = bincode::deserialize(bytes)
            .map_err(|e| Rejection::Invalid(format!("snapshot section {name:?} does not decode: {e}")))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::LockKey;

    fn claim() -> Command {
        let lock = LockKey { namespace: "n".into(), key: "k".into() };
        Command::ClaimSlot { txn: 1, request_id: "r".into(), lock, period_ms: 60_000, retry_failed: false }
    }

    #[test]
    fn a_batch_or_a_scoped_command_needs_the_highest_level_inside() {
        let expire = Command::Expire { txn: 1 };
        assert_eq!(expire.feature_level(), 1);
        assert_eq!(Command::Batch(vec![expire.clone(), claim()]).feature_level(), 2);
        let scoped = Command::Scoped { key: "k".into(), prefixes: vec![], cmd: Box::new(expire) };
        assert_eq!(scoped.feature_level(), 1);
        assert_eq!(Command::SetFeatureLevel { level: 2 }.feature_level(), 1);
    }

    #[test]
    fn the_level_cannot_drop_below_what_was_used() {
        let mut f = FeatureLevels::default();
        assert!(f.section().is_none(), "level 1 writes no section");
        f.set(2).unwrap();
        f.set(1).unwrap();
        f.set(2).unwrap();
        f.note(&claim());
        assert!(f.set(1).is_err());
        assert_eq!(f.level, 2);
        assert!(f.set(3).is_err());
        let (name, bytes) = f.section().unwrap();
        let mut restored = FeatureLevels::default();
        assert!(restored.restore_section(&name, &bytes).unwrap());
        assert_eq!(restored, f);
    }
}
