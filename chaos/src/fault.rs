//! The faults `dls-chaos` can inject, by name, and how `--faults` selects them.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    KillLeader,
    KillFollower,
    PauseNode,
    PauseClient,
    PauseQueued,
    PartitionClient,
    PartitionLeader,
    PartitionSplit,
    OneWay,
    Latency,
    RestartAll,
    CrashAfterWrite,
    WipeRejoin,
    MembershipPartition,
    DiskFull,
    TornTail,
    DamagedRecord,
    ClockJump,
}

use Fault::*;

impl Fault {
    /// Process, network and restart faults: `--faults classic`.
    pub const CLASSIC: [Fault; 12] = [
        KillLeader,
        KillFollower,
        PauseNode,
        PauseClient,
        PauseQueued,
        PartitionClient,
        PartitionLeader,
        PartitionSplit,
        OneWay,
        Latency,
        RestartAll,
        CrashAfterWrite,
    ];
    /// Faults of the cluster's life cycle: in `all`; `one-new` picks one by the seed.
    pub const LIFECYCLE: [Fault; 5] = [WipeRejoin, MembershipPartition, DiskFull, TornTail, DamagedRecord];
    /// Only when named (needs libfaketime).
    pub const OPTIONAL: [Fault; 1] = [ClockJump];

    pub fn name(self) -> &'static str {
        match self {
            KillLeader => "kill-leader",
            KillFollower => "kill-follower",
            PauseNode => "pause-node",
            PauseClient => "pause-client",
            PauseQueued => "pause-queued",
            PartitionClient => "partition-client",
            PartitionLeader => "partition-leader",
            PartitionSplit => "partition-split",
            OneWay => "one-way",
            Latency => "latency",
            RestartAll => "restart-all",
            CrashAfterWrite => "crash-after-write",
            WipeRejoin => "wipe-rejoin",
            MembershipPartition => "membership-partition",
            DiskFull => "disk-full",
            TornTail => "torn-tail",
            DamagedRecord => "damaged-record",
            ClockJump => "clock-jump",
        }
    }

    fn known() -> impl Iterator<Item = Fault> {
        Self::CLASSIC.into_iter().chain(Self::LIFECYCLE).chain(Self::OPTIONAL)
    }

    /// The faults a `--faults` value names: a comma-separated list of fault names and the
    /// groups "all" (classic and life cycle), "classic", "one-new" (one life-cycle fault
    /// chosen by `seed`), or "none".
    pub fn parse_list(spec: &str, seed: u64) -> Result<Vec<Fault>, String> {
        let mut faults = Vec::new();
        for word in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match word {
                "none" => {}
                "all" => faults.extend(Self::CLASSIC.into_iter().chain(Self::LIFECYCLE)),
                "classic" => faults.extend(Self::CLASSIC),
                "one-new" => faults.push(Self::LIFECYCLE[(seed % Self::LIFECYCLE.len() as u64) as usize]),
                name => match Self::known().find(|f| f.name() == name) {
                    Some(f) => faults.push(f),
                    None => {
                        let known: Vec<&str> = Self::known().map(Fault::name).collect();
                        return Err(format!(
                            "unknown fault {name:?}; known: {}, or all, classic, one-new, none",
                            known.join(", ")
                        ));
                    }
                },
            }
        }
        Ok(faults)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_names_parse_and_one_new_follows_the_seed() {
        assert_eq!(Fault::parse_list("none", 1).unwrap(), vec![]);
        assert_eq!(Fault::parse_list("all", 1).unwrap().len(), 17);
        assert_eq!(Fault::parse_list("kill-leader, torn-tail", 1).unwrap(), vec![KillLeader, TornTail]);
        let picked: Vec<Fault> = (0..5).map(|seed| Fault::parse_list("one-new", seed).unwrap()[0]).collect();
        assert_eq!(picked, Fault::LIFECYCLE.to_vec(), "each seed modulo 5 picks another life-cycle fault");
        let classic = Fault::parse_list("classic,one-new", 7).unwrap();
        assert_eq!(classic.len(), 13);
        assert!(!classic.contains(&ClockJump));
    }

    #[test]
    fn an_unknown_name_is_refused_naming_the_known_ones() {
        let err = Fault::parse_list("all,kill-everything", 1).unwrap_err();
        assert!(err.contains("\"kill-everything\"") && err.contains("torn-tail"), "{err}");
    }
}
