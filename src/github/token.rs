//! The installation-token cache: one token per installation, reused while it
//! has more than five minutes left, refreshed under a lock so concurrent
//! callers trigger one exchange. It never prints a token.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use secrecy::SecretString;
use tokio::sync::Mutex;

use super::error::GitHubError;
use crate::clock::Millis;

/// Refresh a token when less than this is left (GitHub's last hour is ours
/// to spend, but a `git push` started now must not outlive the token).
pub const REFRESH_MARGIN: Duration = Duration::from_secs(5 * 60);

#[derive(Clone)]
struct Cached {
    token: SecretString,
    expires_at: Millis,
}

/// A cached installation token.
#[derive(Default)]
pub(crate) struct TokenCache {
    slot: Mutex<Option<Cached>>,
}

impl fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenCache([redacted])")
    }
}

impl TokenCache {
    /// The cached token if it is still fresh at `now`, else the one `fetch`
    /// returns (token, expiry). Callers queue on the lock during a fetch.
    pub async fn get<F, Fut>(&self, now: Millis, fetch: F) -> Result<SecretString, GitHubError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(SecretString, Millis), GitHubError>>,
    {
        let mut slot = self.slot.lock().await;
        if let Some(cached) = slot.as_ref()
            && cached.expires_at - now > REFRESH_MARGIN.as_millis() as Millis
        {
            return Ok(cached.token.clone());
        }
        let (token, expires_at) = fetch().await?;
        *slot = Some(Cached {
            token: token.clone(),
            expires_at,
        });
        Ok(token)
    }

    /// Forgets the token (GitHub answered 401 to it).
    pub async fn clear(&self) {
        *self.slot.lock().await = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use std::sync::atomic::{AtomicU32, Ordering};

    const HOUR: Millis = 3_600_000;

    async fn fetch_n(
        n: &AtomicU32,
        expires_at: Millis,
    ) -> Result<(SecretString, Millis), GitHubError> {
        let i = n.fetch_add(1, Ordering::SeqCst) + 1;
        Ok((SecretString::from(format!("t{i}")), expires_at))
    }

    #[tokio::test]
    async fn reuses_until_five_minutes_are_left() {
        let cache = TokenCache::default();
        let n = AtomicU32::new(0);
        let t = cache.get(0, || fetch_n(&n, HOUR)).await.unwrap();
        assert_eq!(t.expose_secret(), "t1");
        let t = cache
            .get(HOUR - 6 * 60_000, || fetch_n(&n, 2 * HOUR))
            .await
            .unwrap();
        assert_eq!(t.expose_secret(), "t1");
        let t = cache
            .get(HOUR - 5 * 60_000, || fetch_n(&n, 2 * HOUR))
            .await
            .unwrap();
        assert_eq!(t.expose_secret(), "t2");
    }

    #[tokio::test]
    async fn a_failed_fetch_caches_nothing_and_clear_forgets() {
        let cache = TokenCache::default();
        let n = AtomicU32::new(0);
        let err = cache
            .get(0, || async { Err(GitHubError::Unauthorized) })
            .await;
        assert_eq!(err.unwrap_err(), GitHubError::Unauthorized);
        cache.get(0, || fetch_n(&n, HOUR)).await.unwrap();
        cache.clear().await;
        let t = cache.get(0, || fetch_n(&n, HOUR)).await.unwrap();
        assert_eq!(t.expose_secret(), "t2");
    }
}
