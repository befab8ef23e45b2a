//! Issue comments: list with pagination, create (as the App's bot, with
//! `performed_via_github_app`), edit, and reactions to a comment. As on
//! GitHub, a pull request is an issue here: its conversation takes
//! comments by its number.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::super::auth;
use super::super::json;
use super::super::state::{FakeComment, FakeReaction, ReactionSubject, State as Model};
use super::issues::{REACTIONS, reaction_json};
use super::{Answer, Fake, body, invalid, lock, reply, required_str, within_limits};

#[derive(Deserialize)]
pub struct Page {
    per_page: Option<usize>,
    page: Option<usize>,
}

pub async fn list(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
    Query(page): Query<Page>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "read"))?;
    let repo = st.repo(&full);
    if !repo.has_conversation(number) {
        return Err(auth::not_found());
    }
    let per_page = page.per_page.unwrap_or(30).clamp(1, 100);
    let skip = page.page.unwrap_or(1).max(1).saturating_sub(1) * per_page;
    let items: Vec<Value> = repo
        .comments
        .values()
        .filter(|c| c.issue == number)
        .skip(skip)
        .take(per_page)
        .map(|c| json::comment(&st, repo, c))
        .collect();
    Ok(reply(StatusCode::OK, Value::Array(items)))
}

pub async fn create(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
    bytes: Bytes,
) -> Answer {
    let request = body(&bytes)?;
    within_limits(&request, "IssueComment")?;
    let text = required_str(&request, "IssueComment", "body")?.to_owned();
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "write"))?;
    if !st.repo(&full).has_conversation(number) {
        return Err(auth::not_found());
    }
    let id = st.take_id();
    let now = st.now();
    let comment = FakeComment {
        id,
        issue: number,
        body: text,
        author: st.bot(),
        via_app: Some(st.app.id),
        created_at: now,
        updated_at: now,
    };
    st.repo_mut(&full).comments.insert(id, comment.clone());
    let st = &*st;
    Ok(reply(
        StatusCode::CREATED,
        json::comment(st, st.repo(&full), &comment),
    ))
}

pub async fn edit(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, id)): Path<(String, String, u64)>,
    bytes: Bytes,
) -> Answer {
    let request = body(&bytes)?;
    within_limits(&request, "IssueComment")?;
    let text = required_str(&request, "IssueComment", "body")?.to_owned();
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "write"))?;
    let now = st.now();
    let comment = st
        .repo_mut(&full)
        .comments
        .get_mut(&id)
        .ok_or_else(auth::not_found)?;
    comment.body = text;
    comment.updated_at = now;
    let comment = comment.clone();
    let st = &*st;
    Ok(reply(
        StatusCode::OK,
        json::comment(st, st.repo(&full), &comment),
    ))
}

pub async fn react(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, id)): Path<(String, String, u64)>,
    bytes: Bytes,
) -> Answer {
    let request = body(&bytes)?;
    let content = required_str(&request, "Reaction", "content")?.to_owned();
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "write"))?;
    if !st.repo(&full).comments.contains_key(&id) {
        return Err(auth::not_found());
    }
    add_reaction(&mut st, &full, ReactionSubject::Comment(id), content)
}

/// Adds a reaction by the App's bot; the same one twice answers 200 with
/// the existing reaction, like GitHub.
pub fn add_reaction(
    st: &mut Model,
    full: &str,
    subject: ReactionSubject,
    content: String,
) -> Answer {
    if !REACTIONS.contains(&content.as_str()) {
        return Err(invalid("Reaction", "content", "invalid"));
    }
    let bot = st.bot();
    let user = json::user(&st.base_url, &bot);
    let existing = st
        .repo(full)
        .reactions
        .iter()
        .find(|r| r.subject == subject && r.content == content && r.user == bot.login)
        .cloned();
    if let Some(r) = existing {
        return Ok(reply(StatusCode::OK, reaction_json(&r, &user)));
    }
    let reaction = FakeReaction {
        id: st.take_id(),
        subject,
        content,
        user: bot.login,
    };
    st.repo_mut(full).reactions.push(reaction.clone());
    Ok(reply(StatusCode::CREATED, reaction_json(&reaction, &user)))
}
