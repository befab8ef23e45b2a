//! Pull request reviews and review comments: list a pull request's review
//! comments (paginated, oldest first), list its reviews and one review's
//! comments, and reply in a thread as the App's bot
//! (`POST /pulls/{n}/comments/{id}/replies`; like GitHub, a reply goes to
//! the thread's first comment, and replying to a reply answers 422).

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::super::auth;
use super::super::json;
use super::super::state::FakeReviewComment;
use super::{Answer, Fake, body, invalid, lock, reply, required_str, within_limits};

#[derive(Deserialize)]
pub struct Page {
    per_page: Option<usize>,
    page: Option<usize>,
}

impl Page {
    fn window(&self) -> (usize, usize) {
        let per_page = self.per_page.unwrap_or(30).clamp(1, 100);
        let skip = self.page.unwrap_or(1).max(1).saturating_sub(1) * per_page;
        (skip, per_page)
    }
}

pub async fn list_comments(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
    Query(page): Query<Page>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("pull_requests", "read"))?;
    let repo = st.repo(&full);
    if !repo.pulls.contains_key(&number) {
        return Err(auth::not_found());
    }
    let (skip, take) = page.window();
    let items: Vec<Value> = repo
        .review_comments
        .values()
        .filter(|c| c.pull == number)
        .skip(skip)
        .take(take)
        .map(|c| json::review_comment(&st, repo, c))
        .collect();
    Ok(reply(StatusCode::OK, Value::Array(items)))
}

pub async fn list_reviews(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("pull_requests", "read"))?;
    let repo = st.repo(&full);
    if !repo.pulls.contains_key(&number) {
        return Err(auth::not_found());
    }
    let items: Vec<Value> = repo
        .reviews
        .values()
        .filter(|r| r.pull == number)
        .map(|r| json::review(&st, repo, r))
        .collect();
    Ok(reply(StatusCode::OK, Value::Array(items)))
}

pub async fn review_comments(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number, review)): Path<(String, String, u64, u64)>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("pull_requests", "read"))?;
    let repo = st.repo(&full);
    if repo.reviews.get(&review).is_none_or(|r| r.pull != number) {
        return Err(auth::not_found());
    }
    let items: Vec<Value> = repo
        .review_comments
        .values()
        .filter(|c| c.review == Some(review))
        .map(|c| json::review_comment(&st, repo, c))
        .collect();
    Ok(reply(StatusCode::OK, Value::Array(items)))
}

pub async fn create_reply(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number, to)): Path<(String, String, u64, u64)>,
    bytes: Bytes,
) -> Answer {
    let request = body(&bytes)?;
    within_limits(&request, "PullRequestReviewComment")?;
    let text = required_str(&request, "PullRequestReviewComment", "body")?.to_owned();
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("pull_requests", "write"))?;
    let Some(first) = st
        .repo(&full)
        .review_comments
        .get(&to)
        .filter(|c| c.pull == number)
        .cloned()
    else {
        return Err(auth::not_found());
    };
    if first.in_reply_to.is_some() {
        return Err(invalid(
            "PullRequestReviewComment",
            "in_reply_to",
            "invalid",
        ));
    }
    let id = st.take_id();
    let now = st.now();
    let author = st.bot();
    let app = st.app.id;
    let comment = FakeReviewComment {
        id,
        pull: number,
        review: None,
        body: text,
        author,
        via_app: Some(app),
        path: first.path,
        line: first.line,
        start_line: first.start_line,
        diff_hunk: first.diff_hunk,
        in_reply_to: Some(to),
        created_at: now,
        updated_at: now,
    };
    st.repo_mut(&full)
        .review_comments
        .insert(id, comment.clone());
    let st = &*st;
    Ok(reply(
        StatusCode::CREATED,
        json::review_comment(st, st.repo(&full), &comment),
    ))
}
