//! GitHub Projects (v2) boards through the GraphQL API: find a board by its
//! owner and number, add an issue to it, set a single-select field (Status)
//! to the option named like the run's phase, or clear it when the run holds
//! no phase. A board without the field or
//! the option is a typed error the engine reports once; it must never be
//! retried as if it were a passing failure, and no mutation is sent before
//! the field and option are known to exist.

use serde_json::json;

use super::client::InstallationClient;
use super::decode;
use super::error::GitHubError;
use super::models::{ProjectBoard, ProjectField, ProjectOption};
use super::transport::ApiResponse;
use super::types::{IssueNumber, RepoName};

/// The item id a dry-run `add_to_project` answers (nothing was added).
pub const DRY_RUN_ITEM_ID: &str = "dry-run-item";

/// What the board query asks of a `ProjectV2`: its id, title and the
/// single-select fields with their options (other field kinds answer `{}`).
const BOARD_FRAGMENT: &str = "fragment board on ProjectV2 { id title \
     fields(first: 100) { nodes { __typename \
     ... on ProjectV2SingleSelectField { id name options { id name } } } } }";

const ADD_ITEM: &str = "mutation($project: ID!, $content: ID!) { \
     addProjectV2ItemById(input: {projectId: $project, contentId: $content}) { item { id } } }";

/// An issue's items on boards (100 at most: an issue is rarely on more).
const ISSUE_ITEMS: &str = "query($content: ID!) { node(id: $content) { ... on Issue { \
     projectItems(first: 100) { nodes { id project { id } } } } } }";

const SET_SINGLE_SELECT: &str = "mutation($project: ID!, $item: ID!, $field: ID!, $option: String!) { \
     updateProjectV2ItemFieldValue(input: {projectId: $project, itemId: $item, \
     fieldId: $field, value: {singleSelectOptionId: $option}}) { projectV2Item { id } } }";

const CLEAR_VALUE: &str = "mutation($project: ID!, $item: ID!, $field: ID!) { \
     clearProjectV2ItemFieldValue(input: {projectId: $project, itemId: $item, \
     fieldId: $field}) { projectV2Item { id } } }";

/// Common board spellings accepted for each phase when no option carries
/// the phase's own name. Covers GitHub's "Board" template (Todo, In
/// Progress, Done) and its "Team planning" template (Backlog, Ready, In
/// progress, In review, Done).
const PHASE_ALIASES: [(&str, &[&str]); 4] = [
    ("preparation", &["Todo", "To do", "Ready"]),
    ("processing", &["In progress", "Doing"]),
    ("review", &["In review"]),
    ("complete", &["Done", "Completed"]),
];

/// Why a board's Status could not follow the phase. The first three are the
/// repository's configuration: report them once (in the status comment),
/// do not retry them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectSyncError {
    /// The board has no single-select field with the configured name.
    #[error("the project board has no single-select field named {field:?}")]
    MissingField { field: String },
    /// The field has no option for the phase (by name or common spelling).
    #[error("the {field:?} field of the project board has no option {}", accepted_names(.option))]
    MissingOption { field: String, option: String },
    /// No such board for the owner, or the App cannot see it.
    #[error(
        "the project board was not found, or the App cannot see it (it needs the Projects permission)"
    )]
    ProjectNotFound,
    /// GitHub failed (transient or not): see [`GitHubError`].
    #[error(transparent)]
    GitHub(#[from] GitHubError),
}

impl ProjectSyncError {
    /// A problem the maintainer must fix in the board or the config: report
    /// it once, do not retry. A missing permission (`Forbidden`) is one too.
    pub fn is_config_problem(&self) -> bool {
        match self {
            ProjectSyncError::MissingField { .. }
            | ProjectSyncError::MissingOption { .. }
            | ProjectSyncError::ProjectNotFound => true,
            ProjectSyncError::GitHub(e) => matches!(e, GitHubError::Forbidden { .. }),
        }
    }
}

impl InstallationClient {
    /// The Projects (v2) board `number` of `owner`, an organization or a
    /// user (tried in that order). `NotFound` when neither has it, or the
    /// App cannot see it.
    pub async fn project_board(
        &self,
        owner: &str,
        number: u64,
    ) -> Result<ProjectBoard, GitHubError> {
        // GraphQL's `Int` is 32 bits: a larger number names no board.
        let Ok(number) = i32::try_from(number) else {
            return Err(GitHubError::NotFound);
        };
        for root in ["organization", "user"] {
            let query = format!(
                "query($owner: String!, $number: Int!) {{ {root}(login: $owner) {{ \
                 projectV2(number: $number) {{ ...board }} }} }} {BOARD_FRAGMENT}"
            );
            let variables = json!({ "owner": owner, "number": number });
            let board = self
                .graphql_query(&query, variables)
                .await
                .and_then(|resp| decode::project_board(&resp.body, reset(&resp), self.now_ms()));
            match board {
                Ok(Some(board)) => return Ok(board),
                Ok(None) | Err(GitHubError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Err(GitHubError::NotFound)
    }

    /// The issue's GraphQL node id, from `GET /repos/{o}/{r}/issues/{n}`.
    pub async fn issue_node_id(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<String, GitHubError> {
        let issue = self.get_issue(repo, number).await?;
        if issue.node_id.is_empty() {
            return Err(GitHubError::decode(
                "issue",
                format_args!("{repo}#{number} has no node_id"),
            ));
        }
        Ok(issue.node_id)
    }

    /// `addProjectV2ItemById`: puts an issue or pull request (by node id) on
    /// a board and answers the item id. Adding one already there answers
    /// the same item. In dry run: [`DRY_RUN_ITEM_ID`].
    pub async fn add_to_project(
        &self,
        project_id: &str,
        content_node_id: &str,
    ) -> Result<String, GitHubError> {
        let variables = json!({ "project": project_id, "content": content_node_id });
        match self.graphql_mutation(ADD_ITEM, variables).await? {
            Some(resp) => decode::added_project_item(&resp.body, reset(&resp), self.now_ms()),
            None => Ok(DRY_RUN_ITEM_ID.to_owned()),
        }
    }

    /// The issue's (by node id) item on the board `project_id`, if it is
    /// on it; never puts it there.
    pub async fn project_item(
        &self,
        project_id: &str,
        content_node_id: &str,
    ) -> Result<Option<String>, GitHubError> {
        let variables = json!({ "content": content_node_id });
        let resp = self.graphql_query(ISSUE_ITEMS, variables).await?;
        decode::issue_project_item(&resp.body, reset(&resp), self.now_ms(), project_id)
    }

    /// `updateProjectV2ItemFieldValue` with `singleSelectOptionId`: sets a
    /// single-select field of a board item. Setting it twice is harmless.
    pub async fn set_single_select(
        &self,
        project_id: &str,
        item_id: &str,
        field_id: &str,
        option_id: &str,
    ) -> Result<(), GitHubError> {
        let variables = json!({
            "project": project_id, "item": item_id, "field": field_id, "option": option_id,
        });
        match self.graphql_mutation(SET_SINGLE_SELECT, variables).await? {
            Some(resp) => decode::updated_project_item(&resp.body, reset(&resp), self.now_ms()),
            None => Ok(()),
        }
    }
}

impl InstallationClient {
    /// `clearProjectV2ItemFieldValue`: empties a field of a board item (a
    /// single-select's item then shows under "No Status"). Clearing it
    /// twice is harmless.
    pub async fn clear_field_value(
        &self,
        project_id: &str,
        item_id: &str,
        field_id: &str,
    ) -> Result<(), GitHubError> {
        let variables = json!({ "project": project_id, "item": item_id, "field": field_id });
        match self.graphql_mutation(CLEAR_VALUE, variables).await? {
            Some(resp) => decode::cleared_project_item(&resp.body, reset(&resp), self.now_ms()),
            None => Ok(()),
        }
    }
}

/// The answer's `x-ratelimit-reset`, for a `RATE_LIMITED` error.
fn reset(resp: &ApiResponse) -> Option<&str> {
    resp.header("x-ratelimit-reset")
}

/// A project board and the single-select field that follows the phases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    /// The user or organisation that owns the board.
    pub owner: String,
    /// The board's number.
    pub number: u64,
    /// The single-select field's name.
    pub status_field: String,
}

/// Puts the issue on the configured board and sets its status field to the
/// option for `phase` (`preparation`, `processing`, `review`, `complete`;
/// see [`status_option`]). The field and option are checked before anything
/// is written. Every step is idempotent, so after
/// `GitHub(MaybeApplied)` calling it again is safe.
pub async fn sync_project_status(
    client: &InstallationClient,
    board: &Board,
    repo: &RepoName,
    issue: IssueNumber,
    phase: &str,
) -> Result<(), ProjectSyncError> {
    let project = find_board(client, board).await?;
    let field = status_field(&project, board)?;
    let option = status_option(field, phase).ok_or_else(|| ProjectSyncError::MissingOption {
        field: field.name.clone(),
        option: phase.to_owned(),
    })?;
    let content = client.issue_node_id(repo, issue).await?;
    let item = client.add_to_project(&project.id, &content).await?;
    client
        .set_single_select(&project.id, &item, &field.id, &option.id)
        .await?;
    tracing::info!(%repo, %issue, board = %board.number, option = %option.name,
        "project board status set");
    Ok(())
}

/// Empties the issue's status field on the configured board: its run no
/// longer holds a phase (its pull request was closed unmerged, or a round
/// failed). An issue not on the board (a person took its card off) is
/// left off it; idempotent as [`sync_project_status`] is.
pub async fn clear_project_status(
    client: &InstallationClient,
    board: &Board,
    repo: &RepoName,
    issue: IssueNumber,
) -> Result<(), ProjectSyncError> {
    let project = find_board(client, board).await?;
    let field = status_field(&project, board)?;
    let content = client.issue_node_id(repo, issue).await?;
    let Some(item) = client.project_item(&project.id, &content).await? else {
        tracing::info!(%repo, %issue, board = %board.number,
            "not on the project board: no status to empty");
        return Ok(());
    };
    client
        .clear_field_value(&project.id, &item, &field.id)
        .await?;
    tracing::info!(%repo, %issue, board = %board.number, "project board status cleared");
    Ok(())
}

/// The configured board, or the typed error for a board that is not there.
async fn find_board(
    client: &InstallationClient,
    board: &Board,
) -> Result<ProjectBoard, ProjectSyncError> {
    match client.project_board(&board.owner, board.number).await {
        Ok(project) => Ok(project),
        Err(GitHubError::NotFound) => Err(ProjectSyncError::ProjectNotFound),
        Err(e) => Err(e.into()),
    }
}

/// The board's single-select field named in the config.
fn status_field<'a>(
    project: &'a ProjectBoard,
    board: &Board,
) -> Result<&'a ProjectField, ProjectSyncError> {
    project
        .field(&board.status_field)
        .ok_or_else(|| ProjectSyncError::MissingField {
            field: board.status_field.clone(),
        })
}

/// The option of `field` for a phase: the option named like the phase
/// (case-insensitively), else the first option named like one of the
/// phase's common spellings (`preparation`: Todo, To do, Ready;
/// `processing`: In progress, Doing; `review`: In review; `complete`: Done,
/// Completed).
pub fn status_option<'a>(field: &'a ProjectField, phase: &str) -> Option<&'a ProjectOption> {
    let named = |name: &str| {
        field
            .options
            .iter()
            .find(|o| o.name.trim().eq_ignore_ascii_case(name.trim()))
    };
    named(phase).or_else(|| aliases(phase).iter().find_map(|alias| named(alias)))
}

/// The common spellings accepted for a phase (none for an unknown phase).
fn aliases(phase: &str) -> &'static [&'static str] {
    PHASE_ALIASES
        .iter()
        .find(|(p, _)| p.eq_ignore_ascii_case(phase.trim()))
        .map_or(&[], |(_, names)| names)
}

/// `"review" (or "In review")`, for the missing-option message.
fn accepted_names(phase: &str) -> String {
    let mut text = format!("{phase:?}");
    let others = aliases(phase);
    if !others.is_empty() {
        let quoted: Vec<String> = others.iter().map(|a| format!("{a:?}")).collect();
        text.push_str(&format!(" (or {})", quoted.join(", ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(options: &[&str]) -> ProjectField {
        ProjectField {
            id: "F".into(),
            name: "Status".into(),
            options: options
                .iter()
                .enumerate()
                .map(|(i, name)| ProjectOption {
                    id: format!("o{i}"),
                    name: (*name).to_owned(),
                })
                .collect(),
        }
    }

    fn pick<'a>(f: &'a ProjectField, phase: &str) -> Option<&'a str> {
        status_option(f, phase).map(|o| o.name.as_str())
    }

    #[test]
    fn the_phase_name_wins_case_insensitively() {
        let f = field(&["Todo", "Processing", "In progress", "REVIEW", "Done"]);
        assert_eq!(pick(&f, "processing"), Some("Processing"));
        assert_eq!(pick(&f, "review"), Some("REVIEW"));
    }

    #[test]
    fn common_board_spellings_are_accepted() {
        let board = field(&["Todo", "In Progress", "Done"]);
        assert_eq!(pick(&board, "preparation"), Some("Todo"));
        assert_eq!(pick(&board, "processing"), Some("In Progress"));
        assert_eq!(pick(&board, "review"), None);
        assert_eq!(pick(&board, "complete"), Some("Done"));
        let planning = field(&["Backlog", "Ready", "In progress", "In review", "Done"]);
        assert_eq!(pick(&planning, "preparation"), Some("Ready"));
        assert_eq!(pick(&planning, "review"), Some("In review"));
    }

    #[test]
    fn an_unknown_phase_matches_only_its_own_name() {
        let f = field(&["Done", "Blocked"]);
        assert_eq!(pick(&f, "blocked"), Some("Blocked"));
        assert_eq!(pick(&f, "stuck"), None);
    }

    #[test]
    fn messages_name_the_field_and_what_was_looked_for() {
        let e = ProjectSyncError::MissingOption {
            field: "Status".into(),
            option: "review".into(),
        };
        assert_eq!(
            e.to_string(),
            r#"the "Status" field of the project board has no option "review" (or "In review")"#
        );
        assert!(e.is_config_problem());
        let e = ProjectSyncError::MissingField {
            field: "Stage".into(),
        };
        assert!(e.to_string().contains("\"Stage\""));
        assert!(ProjectSyncError::ProjectNotFound.is_config_problem());
        assert!(!ProjectSyncError::GitHub(GitHubError::Server { status: 502 }).is_config_problem());
    }
}
