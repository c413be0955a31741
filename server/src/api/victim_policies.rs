//! Which transaction a deadlock sacrifices, per namespace: `--victim-policy` and
//! `--namespace-victim-policy PREFIX=POLICY`, applied when a transaction begins.

use crate::locks::VictimPolicy;

/// The victim policy for each namespace: the longest matching configured prefix, else the default.
#[derive(Clone, Debug, Default)]
pub struct VictimPolicies {
    pub default: VictimPolicy,
    pub by_prefix: Vec<(String, VictimPolicy)>,
}

impl VictimPolicies {
    pub fn for_namespace(&self, namespace: &str) -> VictimPolicy {
        self.by_prefix
            .iter()
            .filter(|(p, _)| namespace.starts_with(p.as_str()))
            .max_by_key(|(p, _)| p.len())
            .map_or(self.default, |(_, policy)| *policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_namespace_prefix_picks_the_victim_policy() {
        let p = VictimPolicies {
            default: VictimPolicy::LowestPriorityThenYoungest,
            by_prefix: vec![("billing-".into(), VictimPolicy::Oldest), ("billing-eu".into(), VictimPolicy::Youngest)],
        };
        assert_eq!(p.for_namespace("billing-us"), VictimPolicy::Oldest);
        assert_eq!(p.for_namespace("billing-eu-1"), VictimPolicy::Youngest);
        assert_eq!(p.for_namespace("reports"), VictimPolicy::LowestPriorityThenYoungest);
    }
}
