//! The cluster under test: real `dls` processes from the test kit, each behind a kit proxy
//! on its client port and one on its peer port, so the faults can cut, delay and block the
//! links between nodes; optionally on small tmpfs disks and under libfaketime.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use caerus_testkit::{Cluster, Proxies, Spec};

/// Starts `n` nodes of `dls` with their data and logs in `dir`, behind the kit's proxies;
/// every node under `faketime` (a libfaketime preload library) when given, and on a tmpfs
/// of `tmpfs` bytes (mount(8) syntax) when given.
pub fn start(
    dls: PathBuf,
    n: usize,
    dir: &Path,
    faketime: Option<PathBuf>,
    tmpfs: Option<&str>,
) -> anyhow::Result<(Cluster, Option<Clocks>)> {
    let spec = Spec {
        nodes: n,
        bin: Some(dls),
        dir: Some(dir.to_path_buf()),
        proxies: Proxies::Kit,
        tmpfs: tmpfs.map(str::to_string),
        ..Spec::default()
    };
    let mut c = Cluster::new(spec)?;
    let clocks = faketime.map(|lib| Clocks::preload(&mut c, &lib)).transpose()?;
    c.start_all()?;
    Ok((c, clocks))
}

/// Resumes node `id` and starts it if it does not run. One that exited by itself (a refusal,
/// a storage error, a crash) is started again, and its last words say why.
pub fn ensure_running(c: &mut Cluster, id: u64) -> anyhow::Result<()> {
    c.resume(id);
    if let Some(status) = c.start_node(id)? {
        let log = c.log_of(id);
        let last: Vec<&str> = log.lines().rev().take(2).collect();
        println!("node {id} had exited ({status}); starting it again. Its log ended: {last:?}");
    }
    Ok(())
}

/// The nodes' faked clocks (libfaketime), jumped by writing each node's offset file.
pub struct Clocks {
    files: BTreeMap<u64, PathBuf>,
    /// Seconds each node's faked clocks are off in total (negative: behind).
    offsets: BTreeMap<u64, i64>,
}

impl Clocks {
    /// Puts every node of `c` under the preload library `lib` from its next start.
    fn preload(c: &mut Cluster, lib: &Path) -> std::io::Result<Clocks> {
        let mut clocks = Clocks { files: BTreeMap::new(), offsets: BTreeMap::new() };
        for id in c.ids() {
            let file = c.dir().join(format!("node-{id}.faketime"));
            clocks.files.insert(id, file.clone());
            clocks.offsets.insert(id, 0);
            clocks.write(id)?;
            let node = c.node_mut(id);
            // A relative offset, re-read at most once a second: writing another one jumps
            // the node's faked clocks while it runs.
            node.env.push(("LD_PRELOAD".into(), lib.into()));
            node.env.push(("FAKETIME_TIMESTAMP_FILE".into(), file.into()));
            node.env.push(("FAKETIME_CACHE_DURATION".into(), "1".into()));
            if Self::wall_only(id) {
                node.env.push(("FAKETIME_DONT_FAKE_MONOTONIC".into(), OsString::from("1")));
            }
        }
        Ok(clocks)
    }

    /// Even ids have only CLOCK_REALTIME faked: their wall clock may jump backwards. Odd ids
    /// have every clock faked, CLOCK_MONOTONIC included, and only jump forwards (a
    /// monotonic clock never goes back).
    pub fn wall_only(id: u64) -> bool {
        id.is_multiple_of(2)
    }

    /// Moves node `id`'s faked clocks by `seconds`; returns its total offset.
    pub fn jump(&mut self, id: u64, seconds: i64) -> std::io::Result<i64> {
        *self.offsets.get_mut(&id).expect("node id") += seconds;
        self.write(id)?;
        Ok(self.offsets[&id])
    }

    fn write(&self, id: u64) -> std::io::Result<()> {
        std::fs::write(&self.files[&id], format!("{:+}s\n", self.offsets[&id]))
    }
}
