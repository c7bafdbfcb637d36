//! Profile slots: the Chromium user-data-dirs under `LPS_PROFILE_ROOT`, each taken by an
//! exclusive file lock.
//!
//! Slot `n` is the directory `<root>/slot-<n>` guarded by the lock file
//! `<root>/slot-<n>.lock` (outside the directory, so Chromium never touches it). A node takes
//! the lowest free slot numbers, so a restarted node finds the same directories and their
//! warm cookies again. Invariants:
//! - a slot directory is used by at most one browser on the host: the lock is an OS
//!   advisory lock (`flock`) held by an open file for the life of the [`ProfileSlot`], so
//!   two nodes on one host never share one, and a node that dies releases its slots with
//!   its file descriptors (field lesson: two processes sharing a user-data-dir killed the
//!   second browser);
//! - because the slot is exclusively ours, Chromium's own `Singleton*` files in it are
//!   stale leftovers of a killed browser and are removed before each launch.
//!
//! Persisted: the slot directories (cookies, cache) on purpose; nothing else.

use std::{
    fs::{File, OpenOptions, TryLockError},
    path::{Path, PathBuf},
};

use super::BrowserError;

/// How many slot numbers are tried before giving up.
pub const MAX_SLOTS_PER_ROOT: u32 = 512;

/// One locked profile directory. Dropping it releases the lock.
#[derive(Debug)]
pub struct ProfileSlot {
    index: u32,
    dir: PathBuf,
    _lock: File,
}

impl ProfileSlot {
    /// Takes the lowest free slot under `root` (created if missing).
    pub fn acquire(root: &Path) -> Result<Self, BrowserError> {
        std::fs::create_dir_all(root)
            .map_err(|e| BrowserError::Profile(format!("cannot create {}: {e}", root.display())))?;
        for index in 0..MAX_SLOTS_PER_ROOT {
            let lock_path = root.join(format!("slot-{index}.lock"));
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
                .map_err(|e| {
                    BrowserError::Profile(format!("cannot open {}: {e}", lock_path.display()))
                })?;
            match file.try_lock() {
                Ok(()) => {
                    let dir = root.join(format!("slot-{index}"));
                    std::fs::create_dir_all(&dir).map_err(|e| {
                        BrowserError::Profile(format!("cannot create {}: {e}", dir.display()))
                    })?;
                    return Ok(Self {
                        index,
                        dir,
                        _lock: file,
                    });
                }
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => {
                    return Err(BrowserError::Profile(format!(
                        "cannot lock {}: {e}",
                        lock_path.display()
                    )));
                }
            }
        }
        Err(BrowserError::Profile(format!(
            "all {MAX_SLOTS_PER_ROOT} profile slots under {} are taken",
            root.display()
        )))
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    /// The user-data-dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes Chromium's singleton files left by a browser that was killed.
    // NB: only safe because the slot lock proves no live browser uses this directory.
    pub fn clear_stale_locks(&self) {
        for name in ["SingletonLock", "SingletonSocket", "SingletonCookie"] {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_exclusive_and_reused() {
        let root = std::env::temp_dir().join(format!("lps-slot-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let a = ProfileSlot::acquire(&root).unwrap();
        let b = ProfileSlot::acquire(&root).unwrap();
        assert_eq!((a.index(), b.index()), (0, 1));
        assert_ne!(a.dir(), b.dir());
        assert!(a.dir().is_dir());
        drop(a);
        // The freed slot is taken again, so warm cookies survive a restart.
        let c = ProfileSlot::acquire(&root).unwrap();
        assert_eq!(c.index(), 0);
        drop((b, c));
        let _ = std::fs::remove_dir_all(&root);
    }
}
