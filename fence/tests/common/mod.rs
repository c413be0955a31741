//! A throwaway PostgreSQL server for the guard's tests: Debian's binaries (package
//! `postgresql`, installed by `make deps`), a fresh cluster in a temporary directory, trust
//! authentication on 127.0.0.1 and a free port; stopped and deleted on drop. As root
//! (CI), the server runs as the `postgres` user, since PostgreSQL refuses to run as root.
//! Missing binaries fail the test: nothing is skipped.
#![allow(dead_code)] // each test file uses part of it

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

pub struct Postgres {
    pub port: u16,
    bin: PathBuf,
    dir: TempDir,
}

/// The newest /usr/lib/postgresql/<version>/bin, or `PG_BIN` when set.
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        let dir = PathBuf::from(dir);
        assert!(dir.join("initdb").is_file(), "no initdb in PG_BIN={}: run `make deps`", dir.display());
        return dir;
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/initdb): \
             run `make deps` (installs Debian's postgresql), or set PG_BIN"
        ),
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

/// Runs a PostgreSQL program, as `postgres` when we are root.
fn run(bin: &Path, program: &str, args: &[&str]) {
    let exe = bin.join(program);
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd.args(args).output().unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Postgres {
    pub fn start() -> Postgres {
        let bin = bin_dir();
        let dir = tempfile::Builder::new().prefix("caerus-fence-pg-").tempdir().unwrap();
        if is_root() {
            let ok = Command::new("chown").arg("postgres:").arg(dir.path()).status().is_ok_and(|s| s.success());
            assert!(ok, "chown postgres {} failed (is the postgres user there? run `make deps`)", dir.path().display());
        }
        let data = dir.path().join("data");
        let log = dir.path().join("server.log");
        let (data, log, sock) = (data.to_str().unwrap(), log.to_str().unwrap(), dir.path().to_str().unwrap());
        // -N: no fsync at initdb; fsync=off below: a test server's data may be lost on a crash.
        run(&bin, "initdb", &["-D", data, "-A", "trust", "-U", "postgres", "-N"]);
        let port = caerus_testkit::free_port();
        let opts = format!("-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off");
        run(&bin, "pg_ctl", &["-D", data, "-l", log, "-w", "-t", "60", "-o", &opts, "start"]);
        Postgres { port, bin, dir }
    }

    /// A libpq-style connection string for the `postgres` superuser and database.
    pub fn conninfo(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.port)
    }

    /// A new connection, its driver task spawned on the current runtime.
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(&self.conninfo(), tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let args = ["-D", data.to_str().unwrap(), "-m", "immediate", "-w", "stop"];
        // A panic here would hide the test's own failure; the directory goes anyway.
        let exe = self.bin.join("pg_ctl");
        let _ = if is_root() {
            Command::new("runuser").args(["-u", "postgres", "--"]).arg(exe).args(args).output()
        } else {
            Command::new(exe).args(args).output()
        };
    }
}
