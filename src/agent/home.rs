//! The run's own HOME, which outlives an iteration: made, given the
//! operator's `config_files`, and marked used before each iteration. The
//! agent writes it too, so whatever it left on the way of closer's writes
//! is removed first: closer writes only inside HOME.

use std::path::Path;

use crate::config::agents::AgentConfig;

/// The name of the file whose time says when a run's HOME was last used.
pub const HOME_MARKER: &str = ".closer-last-used";

/// Makes the run's HOME (and its TMPDIR), copies the operator's
/// `config_files` in, and marks it used now. HOME outlives an iteration and
/// the agent writes it, so whatever it left on the way of these writes (a
/// symbolic link to closer's database or key, a FIFO that would block the
/// write) is removed first: closer writes only inside HOME.
pub(super) async fn prepare_home(
    home: &Path,
    config: &AgentConfig,
    dirs: &[&str],
) -> std::io::Result<()> {
    for dir in dirs.iter().chain(&["tmp"]) {
        clear_the_way(home, Path::new(dir), true).await?;
        tokio::fs::create_dir_all(home.join(dir)).await?;
    }
    for (target, source) in &config.config_files {
        clear_the_way(home, Path::new(target), false).await?;
        let to = home.join(target);
        if let Some(parent) = to.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        let copy = async { write_new(&to, &tokio::fs::read(source).await?).await };
        copy.await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("copying {}: {e}", source.display()))
        })?;
    }
    clear_the_way(home, Path::new(HOME_MARKER), false).await?;
    write_new(&home.join(HOME_MARKER), b"").await
}

/// Writes `bytes` to a file that must not exist yet (readable by its owner
/// only): nothing placed there after [`clear_the_way`] is written through.
async fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await?;
    file.write_all(bytes).await?;
    file.flush().await
}

/// Removes what would take a write to `home/relative` elsewhere: a
/// symbolic link (or anything but a directory) where a directory is on the
/// way; at the end, anything but a directory when `dir`, and whatever is
/// there when not (even a regular file: a hard link's other name may be
/// outside HOME, and writing would truncate it). A component outside `home`
/// (`..`, an absolute path) is an error.
async fn clear_the_way(home: &Path, relative: &Path, dir: bool) -> std::io::Result<()> {
    let mut at = home.to_path_buf();
    let mut parts = relative.components().peekable();
    while let Some(part) = parts.next() {
        let std::path::Component::Normal(name) = part else {
            return Err(std::io::Error::other(format!(
                "{} is not a path inside HOME",
                relative.display()
            )));
        };
        at.push(name);
        let Ok(meta) = tokio::fs::symlink_metadata(&at).await else {
            return Ok(());
        };
        let kind = meta.file_type();
        let fits = match parts.peek().is_some() || dir {
            true => kind.is_dir(),
            false => false,
        };
        match (fits, kind.is_dir()) {
            (true, _) => {}
            (false, true) => crate::agent::sandbox::remove::remove_tree(&at).await?,
            (false, false) => tokio::fs::remove_file(&at).await?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hard_link_the_agent_left_in_home_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".tool")).unwrap();
        let outside = dir.path().join("precious");
        let source = dir.path().join("operator.json");
        std::fs::write(&source, "{}").unwrap();
        // The control: a copy onto the link truncates the file outside.
        std::fs::write(&outside, "PRECIOUS").unwrap();
        let target = home.join(".tool/auth.json");
        std::fs::hard_link(&outside, &target).unwrap();
        std::fs::copy(&source, &target).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "{}");

        std::fs::write(&outside, "PRECIOUS").unwrap();
        let mut config: AgentConfig =
            toml::from_str("adapter = \"command\"\ncommand = [\"true\"]").unwrap();
        config
            .config_files
            .insert(".tool/auth.json".into(), source.clone());
        prepare_home(&home, &config, &[]).await.unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "PRECIOUS");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{}");
    }

    #[tokio::test]
    async fn what_the_agent_left_in_home_never_takes_closers_writes_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let (home, outside) = (dir.path().join("home"), dir.path().join("closer.db"));
        std::fs::create_dir_all(home.join(".config")).unwrap();
        std::fs::write(&outside, "DATABASE").unwrap();
        // The control: a write through the planted link lands outside HOME.
        let marker = home.join(HOME_MARKER);
        std::os::unix::fs::symlink(&outside, &marker).unwrap();
        std::fs::write(&marker, "through").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "through");
        std::fs::write(&outside, "DATABASE").unwrap();

        // A linked directory, a FIFO at a config file's place, the marker.
        std::fs::remove_dir_all(home.join(".config")).unwrap();
        std::os::unix::fs::symlink(dir.path(), home.join(".config")).unwrap();
        let source = dir.path().join("operator.json");
        std::fs::write(&source, "{}").unwrap();
        std::fs::create_dir_all(home.join(".tool")).unwrap();
        let fifo = std::ffi::CString::new(home.join(".tool/auth.json").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let mut config: AgentConfig =
            toml::from_str("adapter = \"command\"\ncommand = [\"true\"]").unwrap();
        config
            .config_files
            .insert(".tool/auth.json".into(), source.clone());
        config
            .config_files
            .insert(".config/tool/settings.json".into(), source);
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            prepare_home(&home, &config, &[".config"]),
        )
        .await
        .expect("no write blocks on a FIFO")
        .unwrap();

        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "DATABASE");
        assert!(
            !dir.path().join("tool").exists(),
            "nothing written through .config"
        );
        for file in [HOME_MARKER, ".tool/auth.json", ".config/tool/settings.json"] {
            let meta = std::fs::symlink_metadata(home.join(file)).unwrap();
            assert!(meta.file_type().is_file(), "{file}");
        }
        assert!(
            std::fs::symlink_metadata(home.join(".config"))
                .unwrap()
                .is_dir()
        );
    }
}
