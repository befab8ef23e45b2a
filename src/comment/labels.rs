//! The labels the bot uses, with fixed colours and descriptions, so every
//! repository sees the same ones. The label names are part of the contract
//! with project boards and maintainers: never rename one here without a
//! migration plan.

/// A label the bot creates on first use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelDef {
    pub name: &'static str,
    /// Six hex digits, no `#`.
    pub color: &'static str,
    pub description: &'static str,
}

/// The run is paused until the issue author (or a maintainer) answers.
pub const AWAITING_RESPONSE: &str = "awaiting-response";
/// The run failed and the issue stays open; see the diagnosis comment.
pub const FAILED: &str = "closer:failed";
pub const PHASE_PREPARATION: &str = "phase:preparation";
pub const PHASE_PROCESSING: &str = "phase:processing";
pub const PHASE_REVIEW: &str = "phase:review";
pub const PHASE_COMPLETE: &str = "phase:complete";

/// Every fixed label (the trigger label's name is configured: see
/// [`trigger_label_def`]).
pub const LABELS: &[LabelDef] = &[
    LabelDef {
        name: AWAITING_RESPONSE,
        color: "d93f0b",
        description: "closer asked a question and waits for an answer",
    },
    LabelDef {
        name: PHASE_PREPARATION,
        color: "c5def5",
        description: "closer: preparing the run (config, baseline)",
    },
    LabelDef {
        name: PHASE_PROCESSING,
        color: "1d76db",
        description: "closer: an agent is working on this issue",
    },
    LabelDef {
        name: PHASE_REVIEW,
        color: "5319e7",
        description: "closer: verified; pull request open for review",
    },
    LabelDef {
        name: PHASE_COMPLETE,
        color: "0e8a16",
        description: "closer: done and verified",
    },
    LabelDef {
        name: FAILED,
        color: "b60205",
        description: "closer could not finish; see the diagnosis comment",
    },
];

/// The colour of the trigger label.
pub const TRIGGER_COLOR: &str = "fbca04";

/// The trigger label, whatever the repository named it.
pub fn trigger_label_def(name: &str) -> crate::github::Label {
    crate::github::Label {
        name: name.to_owned(),
        color: TRIGGER_COLOR.to_owned(),
        description: Some("Let closer work on this issue until it is verified done".to_owned()),
    }
}

/// Whether GitHub takes `a` and `b` for one label: a repository's label
/// names are unique ignoring case, and payloads carry the spelling the
/// repository stored, whatever the configuration wrote.
pub fn same_label(a: &str, b: &str) -> bool {
    a == b || a.to_lowercase() == b.to_lowercase()
}

/// The definition of a fixed label by name.
pub fn label_def(name: &str) -> Option<&'static LabelDef> {
    LABELS.iter().find(|l| l.name == name)
}

impl LabelDef {
    /// The label as the GitHub client takes it.
    pub fn to_label(&self) -> crate::github::Label {
        crate::github::Label {
            name: self.name.to_owned(),
            color: self.color.to_owned(),
            description: Some(self.description.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_hex6(c: &str) -> bool {
        c.len() == 6 && c.chars().all(|ch| ch.is_ascii_hexdigit())
    }

    #[test]
    fn labels_are_complete_and_well_formed() {
        let names: Vec<&str> = LABELS.iter().map(|l| l.name).collect();
        assert_eq!(
            names,
            [
                "awaiting-response",
                "phase:preparation",
                "phase:processing",
                "phase:review",
                "phase:complete",
                "closer:failed"
            ]
        );
        for l in LABELS {
            assert!(is_hex6(l.color), "{}", l.name);
            // GitHub rejects label descriptions over 100 characters.
            assert!(!l.description.is_empty() && l.description.chars().count() <= 100);
        }
        let trigger = trigger_label_def("agent-please");
        assert_eq!(trigger.name, "agent-please");
        assert!(is_hex6(&trigger.color));
        assert!(trigger.description.is_some_and(|d| d.len() <= 100));
        assert_eq!(label_def("closer:failed").map(|l| l.color), Some("b60205"));
        assert_eq!(label_def("nope"), None);
    }
}
