//! Removing a directory tree an agent wrote, whatever its shape.
//!
//! std's `remove_dir_all` recurses once per directory level, and an agent
//! can nest directories as deep as it likes (`mkdir d && cd d` in a loop:
//! each step is a short relative path, so the limit on a path's length
//! never applies). Tens of thousands of levels overflow a thread's stack,
//! and a stack overflow aborts the whole process: intake and every worker.
//! This removal walks the tree with a list of its own instead, holding one
//! descriptor per level it stands in, and never stands deeper than
//! [`MAX_HELD`] levels: a directory met below that is first moved to the
//! top of the tree being removed, and removed from there in its turn. So
//! neither the stack nor the descriptors grow with the depth.
//!
//! It never follows a symbolic link (the link is removed, not what it
//! names), and opens up the directories it must read or empty where their
//! mode forbids it (Go's module cache, a test that chmods its fixtures).
//! Nothing else works in the tree meanwhile: its agent, goals and their
//! daemons are gone before closer removes what they left.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags};

/// The deepest the walk stands in a tree (descriptors held at once).
const MAX_HELD: usize = 64;

/// Removes `path`, with everything under it when it is a directory (a file
/// or a link is removed itself). Gone already is done.
pub async fn remove_tree(path: &Path) -> io::Result<()> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || remove_tree_blocking(&owned))
        .await
        .map_err(io::Error::other)?
}

/// [`remove_tree`] on the calling thread.
pub fn remove_tree_blocking(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        other => other?,
    };
    if !meta.is_dir() {
        return std::fs::remove_file(path);
    }
    let top = match open_dir(CWD, path) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            rustix::fs::chmodat(CWD, path, Mode::RWXU, AtFlags::empty())?;
            open_dir(CWD, path)?
        }
        other => other?,
    };
    empty(top)?;
    std::fs::remove_dir(path)
}

/// Empties the directory `top` holds, depth first.
fn empty(top: OwnedFd) -> io::Result<()> {
    // The directories the walk stands in above `here`, from the top, each
    // with the name `here`'s ancestor has in it.
    let mut above: Vec<(OwnedFd, CString)> = Vec::new();
    let mut here = top;
    let mut moved = 0u64;
    loop {
        match first_dir_left(&here)? {
            Some(name) if above.len() >= MAX_HELD => {
                move_to_top(&here, &name, &above[0].0, &mut moved)?;
            }
            Some(name) => {
                let child = open_child(&here, &name)?;
                above.push((here, name));
                here = child;
            }
            None => {
                let Some((parent, name)) = above.pop() else {
                    return Ok(());
                };
                drop(here);
                gone_is_fine(rustix::fs::unlinkat(&parent, &name, AtFlags::REMOVEDIR))?;
                here = parent;
            }
        }
    }
}

/// Removes every entry of `dir` that is not a directory, and answers the
/// name of the first directory in it, if any.
fn first_dir_left(dir: &OwnedFd) -> io::Result<Option<CString>> {
    // A listing of its own, from the start: what an earlier one left
    // behind is directories, which come up at once.
    let mut listing = Dir::read_from(dir)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => {
                let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
                FileType::from_raw_mode(stat.st_mode)
            }
            kind => kind,
        };
        if kind == FileType::Directory {
            return Ok(Some(name.to_owned()));
        }
        gone_is_fine(rustix::fs::unlinkat(dir, name, AtFlags::empty()))?;
    }
    Ok(None)
}

/// Moves the directory `name` in `dir` to `top`, under a name of its own.
fn move_to_top(dir: &OwnedFd, name: &CStr, top: &OwnedFd, moved: &mut u64) -> io::Result<()> {
    loop {
        *moved += 1;
        let to = format!(".closer-removing-{moved}");
        match rustix::fs::renameat(dir, name, top, to.as_str()) {
            Err(rustix::io::Errno::EXIST | rustix::io::Errno::NOTEMPTY) => continue,
            done => return Ok(done?),
        }
    }
}

/// Opens the directory `name` in `parent`, after giving its owner the
/// rights to read it when it had none.
fn open_child(parent: &OwnedFd, name: &CStr) -> io::Result<OwnedFd> {
    match open_dir(parent, name) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            rustix::fs::chmodat(parent, name, Mode::RWXU, AtFlags::empty())?;
            open_dir(parent, name)
        }
        other => other,
    }
}

/// Opens a directory (never through a link) and gives its owner the rights
/// to empty it.
fn open_dir<Fd: AsFd, P: rustix::path::Arg>(at: Fd, path: P) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(at, path, flags, Mode::empty())?;
    let mode = rustix::fs::fstat(&fd)?.st_mode;
    if mode & 0o700 != 0o700 {
        // Not ours to change (another owner): unlinking says so below.
        let _ = rustix::fs::fchmod(&fd, Mode::from_bits_truncate(mode | 0o700));
    }
    Ok(fd)
}

/// An entry removed meanwhile is removed.
fn gone_is_fine(result: rustix::io::Result<()>) -> io::Result<()> {
    match result {
        Err(rustix::io::Errno::NOENT) => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests;
