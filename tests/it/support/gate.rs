//! A scripted agent step held open: it says it started through a FIFO and
//! waits until the test lets it go on, so the test can act (reply, crash
//! the workers, take GitHub down) while an iteration is running.

use std::path::PathBuf;
use std::time::Duration;

use super::OutputApart as _;
use super::story::Story;

/// How long a story waits for its held step to start.
const START_WAIT: Duration = Duration::from_secs(120);

pub struct Gate {
    fifo: PathBuf,
    go: PathBuf,
}

impl Gate {
    /// A gate in the story's shared directory (the agent can reach it).
    pub fn new(s: &Story) -> Gate {
        let (fifo, go) = (s.path("started.fifo"), s.path("go"));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status_apart();
        assert!(made.expect("mkfifo").success());
        Gate { fifo, go }
    }

    /// One line of shell: say "started", then wait for [`Gate::open`].
    pub fn hold(&self) -> String {
        format!(
            "echo started > '{}'; while [ ! -f '{}' ]; do sleep 0.05; done",
            self.fifo.display(),
            self.go.display()
        )
    }

    /// Resolves once the held step has said it started; fails the story
    /// after [`START_WAIT`]. The FIFO is opened for reading and writing,
    /// which never blocks, so the wait is a timed async read that a
    /// failing story does not leave behind on a blocked thread.
    pub async fn started(&self) {
        use tokio::io::AsyncBufReadExt as _;
        let fifo = tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(&self.fifo)
            .expect("the gate's FIFO opens");
        let mut said = String::new();
        let mut reader = tokio::io::BufReader::new(fifo);
        tokio::time::timeout(START_WAIT, reader.read_line(&mut said))
            .await
            .expect("the held step started")
            .unwrap();
        assert_eq!(said.trim(), "started");
    }

    /// Lets the held step go on.
    pub fn open(&self) {
        std::fs::write(&self.go, "").unwrap();
    }
}
