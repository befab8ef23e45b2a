use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use super::*;

/// Directories this deep overflow a small stack under std's recursion.
const DEEP: usize = 5_000;

/// A thread stack std's `remove_dir_all` cannot remove [`DEEP`] levels in.
const SMALL_STACK: usize = 64 * 1024;

/// Nests [`DEEP`] directories `d` under `top` (relative steps, as an agent
/// would), with a file every hundred levels.
fn nest(top: &Path) {
    std::fs::create_dir_all(top).unwrap();
    let mut here = rustix::fs::openat(CWD, top, OFlags::DIRECTORY, Mode::empty()).unwrap();
    for level in 0..DEEP {
        if level % 100 == 0 {
            let file = rustix::fs::openat(
                &here,
                "f",
                OFlags::CREATE | OFlags::WRONLY,
                Mode::RUSR | Mode::WUSR,
            )
            .unwrap();
            drop(file);
        }
        rustix::fs::mkdirat(&here, "d", Mode::RWXU).unwrap();
        here = rustix::fs::openat(&here, "d", OFlags::DIRECTORY, Mode::empty()).unwrap();
    }
}

/// Runs `remove` on a thread with [`SMALL_STACK`].
fn on_a_small_stack(path: PathBuf, remove: fn(&Path) -> io::Result<()>) -> io::Result<()> {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(move || remove(&path))
        .unwrap()
        .join()
        .unwrap()
}

#[test]
fn a_tree_deeper_than_the_stack_allows_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("deep");
    // Names the walk moves deep directories to, taken by what the agent
    // left at the top. Whether the walk meets them before it removes them
    // depends on the order of the top's listing:
    // `a_name_taken_at_the_top_is_passed_over` meets each kind for sure.
    std::fs::create_dir_all(&top).unwrap();
    for k in 1..=30 {
        let name = top.join(format!(".closer-removing-{k}"));
        match k % 3 {
            0 => std::fs::write(name, "x").unwrap(),
            1 => std::os::unix::fs::symlink("/", name).unwrap(),
            _ => std::fs::create_dir_all(name.join("full")).unwrap(),
        }
    }
    nest(&top);
    for n in 0..2_000 {
        std::fs::create_dir(top.join(format!("d/w{n}"))).unwrap();
    }
    on_a_small_stack(top.clone(), remove_tree_blocking).unwrap();
    assert!(!top.exists());

    // The control: std's recursion aborts the process on the same tree
    // (run as the ignored test below, in a process of its own).
    let control = dir.path().join("control");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "agent::sandbox::remove::tests::control_std_recursion_overflows_on_a_deep_tree",
            "--ignored",
            "--test-threads=1",
        ])
        .env("CLOSER_REMOVE_CONTROL", &control)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
    assert!(control.exists(), "the control's tree is left");
    remove_tree_blocking(&control).unwrap();
}

/// A directory moved to the top passes over the names taken there,
/// whatever took them: a file, a link, a directory with something in it.
#[test]
fn a_name_taken_at_the_top_is_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path();
    std::fs::create_dir_all(top.join("a/deep/x")).unwrap();
    std::fs::write(top.join(".closer-removing-1"), "x").unwrap();
    std::os::unix::fs::symlink("/", top.join(".closer-removing-2")).unwrap();
    std::fs::create_dir_all(top.join(".closer-removing-3/full")).unwrap();
    let open = |path: &Path| rustix::fs::openat(CWD, path, OFlags::DIRECTORY, Mode::empty());
    let (from, to) = (open(&top.join("a")).unwrap(), open(top).unwrap());
    let mut moved = 0;
    move_to_top(&from, c"deep", &to, &mut moved).unwrap();
    assert_eq!(moved, 4);
    assert!(top.join(".closer-removing-4/x").is_dir());
    assert!(
        std::fs::symlink_metadata(top.join(".closer-removing-2"))
            .unwrap()
            .is_symlink()
    );
}

/// Aborts the process by design: run by the test above, as its control.
#[test]
#[ignore = "aborts its process: the control of a_tree_deeper_than_the_stack_allows_is_removed"]
fn control_std_recursion_overflows_on_a_deep_tree() {
    let top = PathBuf::from(std::env::var_os("CLOSER_REMOVE_CONTROL").unwrap());
    nest(&top);
    let _ = on_a_small_stack(top, |p| std::fs::remove_dir_all(p));
}

#[test]
fn locked_directories_are_opened_and_links_are_removed_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: geteuid only reads the process's user id.
    if unsafe { libc::geteuid() } != 0 {
        return locked_tree(dir.path());
    }
    // Root reads and empties a directory whatever its mode: the same as
    // nobody, in a process of its own, from a copy of this binary nobody
    // can reach (the build directory may be under root's home).
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let exe = dir.path().join("tests");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    let run = || {
        std::process::Command::new(&exe)
            .args([
                "--exact",
                "agent::sandbox::remove::tests::locked_tree_as_nobody",
                "--ignored",
                "--test-threads=1",
            ])
            .env("CLOSER_REMOVE_LOCKED", dir.path())
            .uid(65534)
            .gid(65534)
            .output()
    };
    // A fork elsewhere in this process may still hold the copy open for
    // writing for a moment ("text file busy").
    let mut out = run();
    for _ in 0..20 {
        match &out {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(100));
                out = run();
            }
            _ => break,
        }
    }
    let out = out.unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("1 passed"), "{said}");
}

/// Run as nobody by the test above.
#[test]
#[ignore = "run as another user by locked_directories_are_opened_and_links_are_removed_not_followed"]
fn locked_tree_as_nobody() {
    let dir = PathBuf::from(std::env::var_os("CLOSER_REMOVE_LOCKED").unwrap());
    locked_tree(&dir);
}

/// Directories their owner may not read or empty, links out of the tree,
/// a file, a link and a missing path, under `dir`, by a user other than
/// root.
fn locked_tree(dir: &Path) {
    let outside = dir.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), "kept").unwrap();
    let top = dir.join("tree");
    for sub in [
        "a/b/c",
        "locked/inner",
        "unreadable/x",
        "wide/1",
        "wide/2",
        "wide/3",
    ] {
        std::fs::create_dir_all(top.join(sub)).unwrap();
        std::fs::write(top.join(sub).join("file"), "x").unwrap();
    }
    std::os::unix::fs::symlink(&outside, top.join("a/link")).unwrap();
    std::os::unix::fs::symlink(outside.join("keep"), top.join("a/b/file-link")).unwrap();
    let mode = |path: PathBuf, bits: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits)).unwrap();
    };
    // A locked directory deeper than the walk stands: moved to the top,
    // which takes its write right.
    let deep: PathBuf = std::iter::repeat_n("d", 80).collect();
    std::fs::create_dir_all(top.join(&deep).join("x")).unwrap();
    let locked_deep: PathBuf = std::iter::repeat_n("d", MAX_HELD).collect();
    mode(top.join(&locked_deep), 0o555);
    mode(top.join("locked/inner"), 0o500);
    mode(top.join("locked"), 0o500);
    mode(top.join("unreadable"), 0o000);
    // The control: std's removal stops at them.
    assert!(std::fs::remove_dir_all(top.join("locked")).is_err());
    assert!(std::fs::remove_dir_all(top.join("unreadable")).is_err());

    remove_tree_blocking(&top).unwrap();
    assert!(!top.exists());
    assert_eq!(
        std::fs::read_to_string(outside.join("keep")).unwrap(),
        "kept"
    );

    // A file, a link and a missing path.
    let file = dir.join("file");
    std::fs::write(&file, "x").unwrap();
    remove_tree_blocking(&file).unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    remove_tree_blocking(&link).unwrap();
    assert!(!link.exists() && outside.join("keep").exists());
    remove_tree_blocking(&dir.join("missing")).unwrap();
}
