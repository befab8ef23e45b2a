//! Panics caught at a task's edge. A future polled under [`Caught`] ends
//! with the panic's message instead of ending the task that polls it: a job
//! runner's panic is that job's failure, and a background pass's panic
//! (reconciliation, retention) is that pass's, not the end of the loop that
//! runs them for the life of the process.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// `F`, whose panic while polled becomes `Err(message)`.
pub struct Caught<F>(pub F);

impl<F: Future + Unpin> Future for Caught<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = Pin::new(&mut self.0);
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(message(panic.as_ref()))),
        }
    }
}

/// The message a panic carried.
pub fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_while_polled_is_its_message_and_an_answer_is_kept() {
        let panicking = Caught(Box::pin(async {
            tokio::task::yield_now().await;
            panic!("bad value: {}", 42);
        }));
        assert_eq!(panicking.await, Err::<(), _>("bad value: 42".to_owned()));
        assert_eq!(Caught(Box::pin(async { 7 })).await, Ok(7));
    }
}
