//! Removing a directory tree an agent wrote, whatever its shape.
//!
//! std's `remove_dir_all` recurses once per directory level, and an agent
//! can nest directories as deep as it likes (`mkdir d && cd d` in a loop:
//! each step is a short relative path, so the limit on a path's length
//! never applies). Tens of thousands of levels overflow a thread's stack,
//! and a stack overflow aborts the whole process: intake and every worker.
//! This removal walks the tree with a list of its own instead, holding a
//! descriptor and a listing per level it stands in, and never stands deeper
//! than [`MAX_HELD`] levels: a directory met below that is first moved to
//! the top of the tree being removed, and removed from there in its turn.
//! So neither the stack nor the descriptors grow with the depth, and each
//! directory is listed once (the top again after something was moved to it).
//!
//! It never follows a symbolic link (the link is removed, not what it
//! names), and opens up the directories it must read or empty where their
//! mode forbids it (Go's module cache, a test that chmods its fixtures),
//! through a descriptor that cannot be a link. It does not stop at mount
//! points, as std's did not. Nothing else should work in the tree
//! meanwhile (its agent, goals and their daemons are gone first); what
//! something changes there meanwhile is an error, never a removal
//! outside the tree.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The deepest the walk stands in a tree (levels held open at once).
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
    empty(open_child(CWD, path)?)?;
    std::fs::remove_dir(path)
}

/// Removes the entry `name` of the directory `parent` holds, with
/// everything under it when it is a directory (a file or a link is removed
/// itself). Nothing on the way to `parent` is looked up again, so a
/// directory above swapped for a link meanwhile leads nowhere.
pub fn remove_at(parent: &OwnedFd, name: &CStr) -> io::Result<()> {
    let stat = match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => return Ok(()),
        other => other?,
    };
    if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
        return gone_is_fine(rustix::fs::unlinkat(parent, name, AtFlags::empty()));
    }
    empty(open_child(parent, name)?)?;
    gone_is_fine(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR))
}

/// A directory the walk stands in.
struct Level {
    fd: OwnedFd,
    /// Where the walk is in its entries.
    listing: Dir,
}

impl Level {
    fn new(fd: OwnedFd) -> io::Result<Level> {
        let listing = Dir::read_from(&fd)?;
        Ok(Level { fd, listing })
    }
}

/// Empties the directory `top` holds, depth first.
fn empty(top: OwnedFd) -> io::Result<()> {
    let mut top = Level::new(top)?;
    // The levels below the top the walk stands in, each with its name in
    // the one above.
    let mut below: Vec<(Level, CString)> = Vec::new();
    let mut moved = 0u64;
    // Directories were moved to the top since its listing started, which
    // that listing may not show.
    let mut moved_since_listed = false;
    loop {
        let here = match below.last_mut() {
            Some((level, _)) => level,
            None => &mut top,
        };
        let next = next_dir(here)?;
        let here = below.last().map_or(&top, |(level, _)| level);
        match next {
            Some(name) if below.len() + 1 >= MAX_HELD => {
                move_to_top(&here.fd, &name, &top.fd, &mut moved)?;
                moved_since_listed = true;
            }
            Some(name) => {
                let child = open_child(&here.fd, name.as_c_str())?;
                below.push((Level::new(child)?, name));
            }
            None => match below.pop() {
                Some((done, name)) => {
                    drop(done);
                    let parent = below.last().map_or(&top, |(level, _)| level);
                    gone_is_fine(rustix::fs::unlinkat(&parent.fd, &name, AtFlags::REMOVEDIR))?;
                }
                None if moved_since_listed => {
                    moved_since_listed = false;
                    top.listing = Dir::read_from(&top.fd)?;
                }
                None => return Ok(()),
            },
        }
    }
}

/// Removes the entries of `level` that are not directories as its listing
/// goes on, and answers the name of the next directory in it, if any.
fn next_dir(level: &mut Level) -> io::Result<Option<CString>> {
    while let Some(entry) = level.listing.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => {
                match rustix::fs::statat(&level.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                    Err(Errno::NOENT) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            kind => kind,
        };
        if kind == FileType::Directory {
            return Ok(Some(name.to_owned()));
        }
        gone_is_fine(rustix::fs::unlinkat(&level.fd, name, AtFlags::empty()))?;
    }
    Ok(None)
}

/// Moves the directory `name` in `dir` to `top`, under a name of its own
/// (one taken, by whatever the agent left there, is passed over). A directory that is not writable cannot move (its `..` changes): it is
/// opened up first.
fn move_to_top(dir: &OwnedFd, name: &CStr, top: &OwnedFd, moved: &mut u64) -> io::Result<()> {
    let mut opened_up = false;
    loop {
        *moved += 1;
        let to = format!(".closer-removing-{moved}");
        match rustix::fs::renameat(dir, name, top, to.as_str()) {
            Err(Errno::EXIST | Errno::NOTEMPTY | Errno::NOTDIR | Errno::ISDIR) => continue,
            Err(Errno::ACCESS | Errno::PERM) if !opened_up => {
                open_up(dir, name)?;
                opened_up = true;
            }
            done => return Ok(done?),
        }
    }
}

/// Opens the directory `name` in `parent` (`CWD`: a path), after giving
/// its owner the rights to read it when it had none.
fn open_child<Fd: AsFd + Copy, P: rustix::path::Arg + Copy>(
    parent: Fd,
    name: P,
) -> io::Result<OwnedFd> {
    match open_dir(parent, name) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            open_up(parent, name)?;
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

/// Gives the owner every right on the directory `name` in `parent`, which
/// cannot be read yet: through a path-only descriptor of it, which is
/// never a link (`chmod` on a name would follow one put there meanwhile).
fn open_up<Fd: AsFd, P: rustix::path::Arg>(parent: Fd, name: P) -> io::Result<()> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty())?;
    let own = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::chmod(own.as_str(), Mode::RWXU)?)
}

/// An entry removed meanwhile is removed.
fn gone_is_fine(result: rustix::io::Result<()>) -> io::Result<()> {
    match result {
        Err(Errno::NOENT) => Ok(()),
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests;
