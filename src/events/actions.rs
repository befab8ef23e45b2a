//! Webhook `action` values as closed enums. GitHub adds actions over time, so
//! each enum keeps the ones closer acts on and an `Other` for the rest: an
//! unknown action is recorded, never a parse failure.

/// `installation` actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallationAction {
    Created,
    Deleted,
    Suspend,
    Unsuspend,
    NewPermissionsAccepted,
    Other(String),
}

impl InstallationAction {
    pub fn parse(s: &str) -> Self {
        match s {
            "created" => Self::Created,
            "deleted" => Self::Deleted,
            "suspend" => Self::Suspend,
            "unsuspend" => Self::Unsuspend,
            "new_permissions_accepted" => Self::NewPermissionsAccepted,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The name GitHub gives the action.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Created => "created",
            Self::Deleted => "deleted",
            Self::Suspend => "suspend",
            Self::Unsuspend => "unsuspend",
            Self::NewPermissionsAccepted => "new_permissions_accepted",
            Self::Other(other) => other,
        }
    }
}

/// `installation_repositories` actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepositoriesAction {
    Added,
    Removed,
    Other(String),
}

impl RepositoriesAction {
    pub fn parse(s: &str) -> Self {
        match s {
            "added" => Self::Added,
            "removed" => Self::Removed,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The name GitHub gives the action.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Added => "added",
            Self::Removed => "removed",
            Self::Other(other) => other,
        }
    }
}

/// `issues` actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssuesAction {
    Opened,
    Edited,
    Labeled,
    Unlabeled,
    Closed,
    Reopened,
    Deleted,
    Assigned,
    Unassigned,
    /// Moved to another repository (`changes` says where).
    Transferred,
    Other(String),
}

impl IssuesAction {
    pub fn parse(s: &str) -> Self {
        match s {
            "opened" => Self::Opened,
            "edited" => Self::Edited,
            "labeled" => Self::Labeled,
            "unlabeled" => Self::Unlabeled,
            "closed" => Self::Closed,
            "reopened" => Self::Reopened,
            "deleted" => Self::Deleted,
            "assigned" => Self::Assigned,
            "unassigned" => Self::Unassigned,
            "transferred" => Self::Transferred,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The name GitHub gives the action.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Opened => "opened",
            Self::Edited => "edited",
            Self::Labeled => "labeled",
            Self::Unlabeled => "unlabeled",
            Self::Closed => "closed",
            Self::Reopened => "reopened",
            Self::Deleted => "deleted",
            Self::Assigned => "assigned",
            Self::Unassigned => "unassigned",
            Self::Transferred => "transferred",
            Self::Other(other) => other,
        }
    }
}

/// `issue_comment` and `pull_request_review_comment` actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommentAction {
    Created,
    Edited,
    Deleted,
    Other(String),
}

impl CommentAction {
    pub fn parse(s: &str) -> Self {
        match s {
            "created" => Self::Created,
            "edited" => Self::Edited,
            "deleted" => Self::Deleted,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The name GitHub gives the action.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Created => "created",
            Self::Edited => "edited",
            Self::Deleted => "deleted",
            Self::Other(other) => other,
        }
    }
}

/// `pull_request` actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullRequestAction {
    Opened,
    Closed,
    Reopened,
    Synchronize,
    Edited,
    Other(String),
}

impl PullRequestAction {
    pub fn parse(s: &str) -> Self {
        match s {
            "opened" => Self::Opened,
            "closed" => Self::Closed,
            "reopened" => Self::Reopened,
            "synchronize" => Self::Synchronize,
            "edited" => Self::Edited,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The name GitHub gives the action.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Opened => "opened",
            Self::Closed => "closed",
            Self::Reopened => "reopened",
            Self::Synchronize => "synchronize",
            Self::Edited => "edited",
            Self::Other(other) => other,
        }
    }
}

/// `pull_request_review` actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewAction {
    Submitted,
    Edited,
    Dismissed,
    Other(String),
}

impl ReviewAction {
    pub fn parse(s: &str) -> Self {
        match s {
            "submitted" => Self::Submitted,
            "edited" => Self::Edited,
            "dismissed" => Self::Dismissed,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The name GitHub gives the action.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Submitted => "submitted",
            Self::Edited => "edited",
            Self::Dismissed => "dismissed",
            Self::Other(other) => other,
        }
    }
}

/// `repository` actions closer acts on: the two that change its full name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepositoryAction {
    Renamed,
    Transferred,
    Deleted,
    Other(String),
}

impl RepositoryAction {
    pub fn parse(s: &str) -> Self {
        match s {
            "renamed" => Self::Renamed,
            "transferred" => Self::Transferred,
            "deleted" => Self::Deleted,
            other => Self::Other(other.to_owned()),
        }
    }

    /// The name GitHub gives the action.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Renamed => "renamed",
            Self::Transferred => "transferred",
            Self::Deleted => "deleted",
            Self::Other(other) => other,
        }
    }
}
