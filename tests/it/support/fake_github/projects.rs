//! The fake's GitHub Projects (v2) boards: owned by an organization or a
//! user, with fields (single-select ones have options) and items (an issue
//! or pull request by node id, with the option set per field). Plain data
//! and the lookups the GraphQL route needs; no HTTP here.

use std::collections::BTreeMap;

use super::state::State;

/// Who owns a board; GraphQL reaches it as `organization(login:)` or
/// `user(login:)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectOwner {
    Org(String),
    User(String),
}

impl ProjectOwner {
    pub fn org(login: &str) -> Self {
        ProjectOwner::Org(login.to_owned())
    }

    pub fn user(login: &str) -> Self {
        ProjectOwner::User(login.to_owned())
    }

    pub fn login(&self) -> &str {
        match self {
            ProjectOwner::Org(l) | ProjectOwner::User(l) => l,
        }
    }

    /// The GraphQL root field that reaches this owner.
    pub fn root(&self) -> &'static str {
        match self {
            ProjectOwner::Org(_) => "organization",
            ProjectOwner::User(_) => "user",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeOption {
    pub id: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeField {
    pub id: String,
    pub name: String,
    /// `Some` for a single-select field; `None` for a text field (Title).
    pub options: Option<Vec<FakeOption>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeProjectItem {
    pub id: String,
    /// The issue's or pull request's node id.
    pub content: String,
    /// field id → option id.
    pub values: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeProject {
    pub id: String,
    pub owner: ProjectOwner,
    pub number: u64,
    pub title: String,
    pub fields: Vec<FakeField>,
    /// content node id → item.
    pub items: BTreeMap<String, FakeProjectItem>,
}

impl FakeProject {
    /// A board with GitHub's built-in text fields (Title, Assignees) and the
    /// given single-select fields.
    pub fn new(
        st: &mut State,
        owner: ProjectOwner,
        number: u64,
        selects: &[(&str, &[&str])],
    ) -> Self {
        let id = format!("PVT_{}", st.take_id());
        let mut fields = Vec::new();
        for name in ["Title", "Assignees"] {
            fields.push(FakeField {
                id: format!("PVTF_{}", st.take_id()),
                name: name.to_owned(),
                options: None,
            });
        }
        for (name, options) in selects {
            let field_id = format!("PVTSSF_{}", st.take_id());
            let options = options
                .iter()
                .map(|o| FakeOption {
                    id: format!("{:08x}", st.take_id()),
                    name: (*o).to_owned(),
                })
                .collect();
            fields.push(FakeField {
                id: field_id,
                name: (*name).to_owned(),
                options: Some(options),
            });
        }
        Self {
            id,
            title: format!("{} board {number}", owner.login()),
            owner,
            number,
            fields,
            items: BTreeMap::new(),
        }
    }

    pub fn field(&self, id: &str) -> Option<&FakeField> {
        self.fields.iter().find(|f| f.id == id)
    }

    pub fn field_named(&self, name: &str) -> Option<&FakeField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The option name set on the item for `content` in the field `field`.
    pub fn value(&self, content: &str, field: &str) -> Option<String> {
        let field = self.field_named(field)?;
        let option_id = self.items.get(content)?.values.get(&field.id)?;
        field
            .options
            .as_ref()?
            .iter()
            .find(|o| &o.id == option_id)
            .map(|o| o.name.clone())
    }
}

impl State {
    /// Whether an issue or pull request with this node id exists.
    pub fn content_exists(&self, node_id: &str) -> bool {
        self.repos.values().any(|r| {
            r.issues.keys().any(|n| r.issue_node_id(*n) == node_id)
                || r.pulls.values().any(|p| format!("PR_{}", p.id) == node_id)
        })
    }

    /// The board `number` of `login` reached through `root`.
    pub fn project(&self, root: &str, login: &str, number: u64) -> Option<&FakeProject> {
        self.projects.iter().find(|p| {
            p.owner.root() == root
                && p.owner.login().eq_ignore_ascii_case(login)
                && p.number == number
        })
    }

    /// Whether `login` is an account of the kind `root` names.
    pub fn account_exists(&self, root: &str, login: &str) -> bool {
        self.projects
            .iter()
            .any(|p| p.owner.root() == root && p.owner.login().eq_ignore_ascii_case(login))
    }

    pub fn project_by_id_mut(&mut self, id: &str) -> Option<&mut FakeProject> {
        self.projects.iter_mut().find(|p| p.id == id)
    }
}
