//! `POST /graphql` (and GHES's `/api/graphql`) for Projects (v2) boards.
//! Not a GraphQL engine: an operation is recognised by the field it names
//! (`projectV2(number:` under `organization(login:` or `user(login:`,
//! `addProjectV2ItemById`, `updateProjectV2ItemFieldValue`,
//! `clearProjectV2ItemFieldValue`, an issue's `projectItems` under
//! `node(id:`), and its values
//! are read from `variables` only, so a client that splices values into the
//! query text fails here as it should. Answers are GitHub-shaped: HTTP 200
//! with `data`, or `errors` with a `type` such as `NOT_FOUND`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Map, Value, json};

use super::super::auth;
use super::super::projects::{FakeProject, FakeProjectItem};
use super::super::state::State as Model;
use super::{Answer, Fake, body, lock, reply};

/// A GraphQL error: `type` (when GitHub gives one) and message.
struct GqlError {
    kind: Option<&'static str>,
    message: String,
    path: Vec<&'static str>,
}

fn not_found(message: String, path: Vec<&'static str>) -> GqlError {
    GqlError {
        kind: Some("NOT_FOUND"),
        message,
        path,
    }
}

fn untyped(message: String) -> GqlError {
    GqlError {
        kind: None,
        message,
        path: Vec::new(),
    }
}

pub async fn handle(State(fake): State<Fake>, headers: HeaderMap, bytes: Bytes) -> Answer {
    let request = body(&bytes)?;
    let mut st = lock(&fake);
    let installation = auth::require_installation(&st, &headers)?;
    let account = st
        .installations
        .get(&installation)
        .map(|i| i.account.clone())
        .unwrap_or_default();
    let query = request.get("query").and_then(Value::as_str).unwrap_or("");
    let vars = request
        .get("variables")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let answer = if query.is_empty() {
        Err((
            Value::Null,
            untyped("A query attribute must be specified and must be a string.".into()),
        ))
    } else if query.contains("addProjectV2ItemById") {
        add_item(&mut st, &account, &vars).map_err(|e| (Value::Null, e))
    } else if query.contains("updateProjectV2ItemFieldValue") {
        set_value(&mut st, &account, &vars).map_err(|e| (Value::Null, e))
    } else if query.contains("clearProjectV2ItemFieldValue") {
        clear_value(&mut st, &account, &vars).map_err(|e| (Value::Null, e))
    } else if query.contains("projectItems") {
        issue_items(&st, &account, &vars)
    } else if query.contains("projectV2(number:") {
        board(&st, &account, query, &vars)
    } else {
        Err((
            Value::Null,
            untyped("the fake GitHub does not model this operation".into()),
        ))
    };
    let body = match answer {
        Ok(data) => json!({ "data": data }),
        Err((data, e)) => {
            let mut error =
                json!({ "message": e.message, "locations": [{"line": 1, "column": 1}] });
            if let Some(kind) = e.kind {
                error["type"] = json!(kind);
            }
            if !e.path.is_empty() {
                error["path"] = json!(e.path);
            }
            json!({ "data": data, "errors": [error] })
        }
    };
    Ok(reply(StatusCode::OK, body))
}

fn string_var<'a>(
    vars: &'a Map<String, Value>,
    name: &str,
    kind: &str,
) -> Result<&'a str, GqlError> {
    vars.get(name).and_then(Value::as_str).ok_or_else(|| {
        untyped(format!(
            "Variable ${name} of type {kind}! was provided invalid value"
        ))
    })
}

/// `organization|user(login: $owner) { projectV2(number: $number) { … } }`.
fn board(
    st: &Model,
    account: &str,
    query: &str,
    vars: &Map<String, Value>,
) -> Result<Value, (Value, GqlError)> {
    let (root, what) = if query.contains("organization(login:") {
        ("organization", "an Organization")
    } else if query.contains("user(login:") {
        ("user", "a User")
    } else {
        return Err((
            Value::Null,
            untyped("projectV2 is asked of an unknown owner".into()),
        ));
    };
    let login = string_var(vars, "owner", "String").map_err(|e| (Value::Null, e))?;
    let number = vars.get("number").and_then(Value::as_u64).ok_or_else(|| {
        (
            Value::Null,
            untyped("Variable $number of type Int! was provided invalid value".into()),
        )
    })?;
    if !st.account_exists(root, login) {
        let message = format!("Could not resolve to {what} with the login of '{login}'.");
        return Err((json!({ root: null }), not_found(message, vec![root])));
    }
    // An installation token reaches only its own account's boards.
    let visible = login.eq_ignore_ascii_case(account);
    match st.project(root, login, number).filter(|_| visible) {
        Some(project) => Ok(json!({ root: { "projectV2": project_json(project) } })),
        None => Err((
            json!({ root: { "projectV2": null } }),
            not_found(
                format!("Could not resolve to a ProjectV2 with the number {number}."),
                vec![root, "projectV2"],
            ),
        )),
    }
}

fn project_json(p: &FakeProject) -> Value {
    let nodes: Vec<Value> = p
        .fields
        .iter()
        .map(|f| match &f.options {
            Some(options) => json!({
                "__typename": "ProjectV2SingleSelectField",
                "id": f.id,
                "name": f.name,
                "options": options.iter().map(|o| json!({ "id": o.id, "name": o.name })).collect::<Vec<_>>(),
            }),
            // The query's inline fragment selects nothing else of other fields.
            None => json!({ "__typename": "ProjectV2Field" }),
        })
        .collect();
    json!({ "id": p.id, "title": p.title, "fields": { "nodes": nodes } })
}

/// The board with this node id, if the caller's installation can see it.
fn visible_project<'a>(
    st: &'a mut Model,
    account: &str,
    id: &str,
) -> Result<&'a mut FakeProject, GqlError> {
    st.project_by_id_mut(id)
        .filter(|p| p.owner.login().eq_ignore_ascii_case(account))
        .ok_or_else(|| {
            not_found(
                format!("Could not resolve to a node with the global id of '{id}'"),
                Vec::new(),
            )
        })
}

/// `node(id: $content) { ... on Issue { projectItems { nodes { id project
/// { id } } } } }`: the issue's items on the boards the installation sees.
/// An id that names nothing answers `node: null` with a `NOT_FOUND` error.
fn issue_items(
    st: &Model,
    account: &str,
    vars: &Map<String, Value>,
) -> Result<Value, (Value, GqlError)> {
    let content = string_var(vars, "content", "ID").map_err(|e| (Value::Null, e))?;
    if !st.content_exists(content) {
        return Err((
            json!({ "node": null }),
            not_found(
                format!("Could not resolve to a node with the global id of '{content}'"),
                vec!["node"],
            ),
        ));
    }
    let nodes: Vec<Value> = st
        .projects
        .iter()
        .filter(|p| p.owner.login().eq_ignore_ascii_case(account))
        .filter_map(|p| p.items.get(content).map(|i| (p, i)))
        .map(|(p, i)| json!({ "id": i.id, "project": { "id": p.id } }))
        .collect();
    Ok(json!({ "node": { "projectItems": { "nodes": nodes } } }))
}

/// `addProjectV2ItemById(input: {projectId: $project, contentId: $content})`.
fn add_item(st: &mut Model, account: &str, vars: &Map<String, Value>) -> Result<Value, GqlError> {
    let project_id = string_var(vars, "project", "ID")?.to_owned();
    let content = string_var(vars, "content", "ID")?.to_owned();
    if !st.content_exists(&content) {
        return Err(not_found(
            format!("Could not resolve to a node with the global id of '{content}'"),
            vec!["addProjectV2ItemById"],
        ));
    }
    let item_id = format!("PVTI_{}", st.take_id());
    let project = visible_project(st, account, &project_id)?;
    // Adding what is already there answers the existing item.
    let item = project
        .items
        .entry(content.clone())
        .or_insert(FakeProjectItem {
            id: item_id,
            content,
            values: Default::default(),
        });
    Ok(json!({ "addProjectV2ItemById": { "item": { "id": item.id } } }))
}

/// `updateProjectV2ItemFieldValue(input: {…, value: {singleSelectOptionId: $option}})`.
fn set_value(st: &mut Model, account: &str, vars: &Map<String, Value>) -> Result<Value, GqlError> {
    let project_id = string_var(vars, "project", "ID")?;
    let item_id = string_var(vars, "item", "ID")?;
    let field_id = string_var(vars, "field", "ID")?;
    let option_id = string_var(vars, "option", "String")?;
    let project = visible_project(st, account, project_id)?;
    let field = project.field(field_id).cloned().ok_or_else(|| {
        not_found(
            format!("Could not resolve to a node with the global id of '{field_id}'"),
            vec!["updateProjectV2ItemFieldValue"],
        )
    })?;
    let Some(options) = field.options else {
        return Err(untyped(format!(
            "The field {} is not a single select field",
            field.name
        )));
    };
    if !options.iter().any(|o| o.id == option_id) {
        return Err(untyped(format!(
            "The single select option Id does not belong to the field {}",
            field.name
        )));
    }
    let item = item_mut(project, item_id, "updateProjectV2ItemFieldValue")?;
    item.values.insert(field.id, option_id.to_owned());
    Ok(json!({ "updateProjectV2ItemFieldValue": { "projectV2Item": { "id": item.id } } }))
}

/// `clearProjectV2ItemFieldValue(input: {projectId, itemId, fieldId})`:
/// the item's value of that field is gone.
fn clear_value(
    st: &mut Model,
    account: &str,
    vars: &Map<String, Value>,
) -> Result<Value, GqlError> {
    const OP: &str = "clearProjectV2ItemFieldValue";
    let project_id = string_var(vars, "project", "ID")?;
    let item_id = string_var(vars, "item", "ID")?;
    let field_id = string_var(vars, "field", "ID")?;
    let project = visible_project(st, account, project_id)?;
    if project.field(field_id).is_none() {
        return Err(not_found(
            format!("Could not resolve to a node with the global id of '{field_id}'"),
            vec![OP],
        ));
    }
    let item = item_mut(project, item_id, OP)?;
    item.values.remove(field_id);
    Ok(json!({ OP: { "projectV2Item": { "id": item.id } } }))
}

/// The board's item `item_id`, or the `NOT_FOUND` error of mutation `op`.
fn item_mut<'a>(
    project: &'a mut FakeProject,
    item_id: &str,
    op: &'static str,
) -> Result<&'a mut FakeProjectItem, GqlError> {
    project
        .items
        .values_mut()
        .find(|i| i.id == item_id)
        .ok_or_else(|| {
            not_found(
                format!("Could not resolve to ProjectV2Item with the id of '{item_id}'"),
                vec![op],
            )
        })
}
