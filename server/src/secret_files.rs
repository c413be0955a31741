//! Files that hold a secret: private keys, the cluster secret, the API keys file.
//!
//! - The ones `dls` writes (`dls keys add`, `dls certs`) are readable by their owner only
//!   (0600), also when they replace a file that was readable by others: the new text goes
//!   to a temporary file created 0600 and renamed over the old one, so there is no moment
//!   when the secret is readable by others, and a reload never reads half a file. An
//!   existing file keeps its owner and group (written by root for a service user, the
//!   service can still read it).
//! - The ones `dls serve` is given are checked at start, as ssh checks a private key: the
//!   cluster secret must not be readable by group or others (refused: one read of it lets
//!   anyone forge raft messages); a TLS private key must not be readable by others
//!   (refused), and a group-readable one is reported (a group such as Kubernetes'
//!   `fsGroup` or Debian's `ssl-cert` is how some deployments hand keys to a service).

use std::io::Write;
#[cfg(unix)]
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Owner read and write, nothing for anyone else.
#[cfg(unix)]
pub const PRIVATE_MODE: u32 = 0o600;

/// Why a secret file cannot be written or used; an OS error is the source.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// The path names no file.
    #[error("{} is not a file name", .0.display())]
    NotAFile(PathBuf),
    /// Writing the file failed.
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file given with `flag` cannot be read.
    #[error("cannot read {flag} {}", path.display())]
    Read {
        flag: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Others may read the file: the node does not start with it. Unix only: Windows
    /// guards files with access lists, which this check does not read.
    #[cfg_attr(not(unix), allow(dead_code))]
    #[error("refusing to start: {problem}; run {fix}")]
    Exposed { problem: String, fix: String },
}

/// Writes `text` to `path` readable by its owner only (see the module).
pub fn write_private(path: &Path, text: &str) -> Result<(), SecretFileError> {
    let failed = |source: std::io::Error| SecretFileError::Write { path: path.to_path_buf(), source };
    let name = path.file_name().ok_or_else(|| SecretFileError::NotAFile(path.to_path_buf()))?;
    let tmp = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    // A temporary file left by a crash may be wider than 0600: start afresh.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
        _ => {}
    }
    #[cfg(unix)]
    let mut file =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(PRIVATE_MODE).open(&tmp).map_err(failed)?;
    // The mode given to open is narrowed by the umask, never widened; set it exactly.
    #[cfg(unix)]
    file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE)).map_err(failed)?;
    #[cfg(unix)]
    if let Ok(old) = std::fs::metadata(path) {
        // Only root may give a file away; anyone else owns what it writes anyway.
        let _ = std::os::unix::fs::fchown(&file, Some(old.uid()), Some(old.gid()));
    }
    // Windows has no modes: the file gets the access list of its directory (a user's
    // profile or a service's data directory is not readable by other users).
    #[cfg(windows)]
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp).map_err(failed)?;
    let written = file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).and_then(|()| {
        drop(file);
        std::fs::rename(&tmp, path)
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(failed(e));
    }
    // The rename itself survives a crash once the directory is synced.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// What a secret file's mode lets others do (Unix modes).
#[cfg(unix)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Owner only.
    Private,
    /// The file's group may read or write it.
    Group,
    /// Every user of the machine may read or write it.
    World,
}

#[cfg(unix)]
impl Exposure {
    pub fn of_mode(mode: u32) -> Exposure {
        if mode & 0o007 != 0 {
            Exposure::World
        } else if mode & 0o070 != 0 {
            Exposure::Group
        } else {
            Exposure::Private
        }
    }
}

/// How strictly a kind of secret file is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strictness {
    /// Refused unless private (the cluster secret).
    OwnerOnly,
    /// Refused when others may read it, reported when its group may (TLS private keys).
    NoOthers,
}

/// Checks the mode of secret file `path`, given with `flag`. `Ok(Some(warning))` for a
/// file that is accepted but should be narrowed; `Err` names the file, its mode and the fix.
#[cfg(unix)]
pub fn check_mode(path: &Path, flag: &str, strictness: Strictness) -> Result<Option<String>, SecretFileError> {
    let meta = std::fs::metadata(path).map_err(|source| unreadable(path, flag, source))?;
    let mode = meta.mode() & 0o777;
    let exposure = Exposure::of_mode(mode);
    let fix = format!("`chmod 600 {}` (readable by the user dls runs as, and nobody else)", path.display());
    let refused = match (exposure, strictness) {
        (Exposure::Private, _) => return Ok(None),
        (Exposure::World, _) | (Exposure::Group, Strictness::OwnerOnly) => true,
        (Exposure::Group, Strictness::NoOthers) => false,
    };
    let who = if exposure == Exposure::World { "every user of this machine" } else { "its group" };
    let problem = format!("{flag} {} has mode {mode:04o}: {who} has access to it", path.display());
    if refused {
        return Err(SecretFileError::Exposed { problem, fix });
    }
    Ok(Some(format!("{problem}; consider {fix}")))
}

/// Not checked on Windows: files have access lists there, not modes, and reading them needs
/// the Win32 security API (`unsafe`, which the workspace forbids). The file must still be
/// readable.
#[cfg(windows)]
pub fn check_mode(path: &Path, flag: &str, _strictness: Strictness) -> Result<Option<String>, SecretFileError> {
    std::fs::metadata(path).map_err(|source| unreadable(path, flag, source))?;
    Ok(None)
}

fn unreadable(path: &Path, flag: &str, source: std::io::Error) -> SecretFileError {
    SecretFileError::Read { flag: flag.to_string(), path: path.to_path_buf(), source }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn a_written_secret_is_owner_only_even_over_a_wider_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.toml");
        write_private(&path, "first").unwrap();
        assert_eq!(mode(&path), 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, "second").unwrap();
        assert_eq!((mode(&path), std::fs::read_to_string(&path).unwrap().as_str()), (0o600, "second"));
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("keys.toml")], "no temporary file is left");
    }

    #[test]
    fn secrets_readable_by_others_are_refused_and_a_group_readable_key_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "x").unwrap();
        let set = |m| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m)).unwrap();
        set(0o600);
        assert_eq!(check_mode(&path, "--cluster-secret-file", Strictness::OwnerOnly).unwrap(), None);
        set(0o640);
        let err = check_mode(&path, "--cluster-secret-file", Strictness::OwnerOnly).unwrap_err().to_string();
        assert!(err.contains("mode 0640") && err.contains("chmod 600") && err.contains("secret"), "{err}");
        let warning = check_mode(&path, "--tls-key", Strictness::NoOthers).unwrap().expect("a warning");
        assert!(warning.contains("its group"), "{warning}");
        set(0o604);
        let err = check_mode(&path, "--tls-key", Strictness::NoOthers).unwrap_err().to_string();
        assert!(err.contains("every user") && err.contains("0604"), "{err}");
        assert_eq!(Exposure::of_mode(0o400), Exposure::Private);
        assert_eq!(Exposure::of_mode(0o620), Exposure::Group);
        assert_eq!(Exposure::of_mode(0o602), Exposure::World);
    }
}
