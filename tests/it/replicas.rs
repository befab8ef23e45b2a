//! Several replicas on one database: reconciliation runs on each, on its
//! own timer, so two passes can look at the same run at the same moment.
//! Each of them acts on a run once: its missing step is queued once, and a
//! run whose steps keep dying is failed, and diagnosed, once.

use closer::model::RunState;

use crate::stories::a_run_whose_finish_dies;

/// Two passes at once (as on two replicas), three times over a run whose
/// `finish` step dies every time: each time one of them queues the step,
/// and the third time one of them fails the run, with one diagnosis.
/// Before, both queued it (two steps, two deaths, on their way to the
/// limit twice as fast) and both failed it, each with its diagnosis.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_reconciliation_passes_at_once_act_on_a_run_once() {
    let (mut s, n, run) = a_run_whose_finish_dies("replicas-reconcile").await;
    let engine = s.engine.clone().unwrap();
    let other = s.engine.clone().unwrap();
    for pass in 1..closer::engine::run::MAX_DEAD_STEPS {
        // No worker takes the step (and lets it die) while the passes run:
        // a pass after that would rightly queue it again.
        s.kill_workers();
        let (a, b) = tokio::join!(engine.reconcile(), other.reconcile());
        let (a, b) = (a.unwrap(), b.unwrap());
        let queued = a.requeued.len() + b.requeued.len();
        assert_eq!(queued, 1, "pass {pass}: {a:?} {b:?}");
        s.spawn_workers();
        s.idle().await;
    }
    let (a, b) = tokio::join!(engine.reconcile(), other.reconcile());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.failed.len() + b.failed.len(), 1, "{a:?} {b:?}");
    assert!(a.failed.contains(&run.id) || b.failed.contains(&run.id));
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    let diagnoses = s
        .bot_comments(n)
        .into_iter()
        .filter(|c| c.body.contains("could not carry the run forward"))
        .count();
    assert_eq!(diagnoses, 1);
    s.stop().await;
}
