//! An HTTP answer's body read as it streams, up to a cap: a server that
//! sends more than the caller can use is refused once it passes the cap,
//! before closer holds all of it (a live goal's server, the LLM endpoint).

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the response body is larger than {} MiB", .0 / (1024 * 1024))]
    TooLarge(usize),
    #[error("reading the body failed: {0}")]
    Read(#[source] reqwest::Error),
}

/// The body of `response`, refused past `max` bytes (at once when the
/// declared length says so).
pub async fn read_capped(
    mut response: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, BodyError> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Read)? {
        if body.len() + chunk.len() > max {
            return Err(BodyError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
