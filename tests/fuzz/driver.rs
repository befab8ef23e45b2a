//! Runs one fuzz target for a budget: each input comes from its own seed, so
//! a failure names the seed that reproduces it (`CLOSER_FUZZ_REPLAY`). A
//! panic, whether from the library or from a broken property, is caught,
//! counted and its first message kept; the run goes on.

use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;
use std::time::{Duration, Instant};

use fastrand::Rng;

/// One fuzz target: a name and a function that draws one input from the
/// generator and feeds it to the library, asserting what must hold.
pub struct Target {
    pub name: &'static str,
    pub one: fn(&mut Rng),
}

/// How much to run.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    Inputs(u64),
    Seconds(f64),
}

/// What one target's run found.
#[derive(Debug)]
pub struct Report {
    pub name: &'static str,
    pub inputs: u64,
    pub panics: u64,
    /// The seed and message of the first panic.
    pub first: Option<(u64, String)>,
    pub elapsed: Duration,
    /// The slowest single input, and its seed (to replay and time it: a
    /// slow input on a loaded machine may be the machine's doing).
    pub slowest: Duration,
    pub slowest_seed: u64,
}

impl Report {
    pub fn line(&self) -> String {
        let rate = self.inputs as f64 / self.elapsed.as_secs_f64().max(1e-9);
        let mut line = format!(
            "{:<16} inputs {:>10}  panics {:>3}  {:>8.1} s  {:>9.0}/s  slowest {:>7.2} ms ({:#x})",
            self.name,
            self.inputs,
            self.panics,
            self.elapsed.as_secs_f64(),
            rate,
            self.slowest.as_secs_f64() * 1000.0,
            self.slowest_seed,
        );
        if let Some((seed, message)) = &self.first {
            line.push_str(&format!(
                "\n  first panic: CLOSER_FUZZ_REPLAY={}:{seed:#x}: {message}",
                self.name
            ));
        }
        line
    }
}

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// A target's panics are recorded for the report instead of printed once
/// per input; any other panic (a test's own assertion) is printed as usual.
fn quiet_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.get() {
                return default(info);
            }
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_owned());
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{message}{at}")));
        }));
    });
}

/// Runs `target` for `budget`, the inputs' seeds drawn from `seed`.
pub fn run(target: &Target, budget: Budget, seed: u64) -> Report {
    quiet_panics();
    let mut seeds = Rng::with_seed(seed ^ name_hash(target.name));
    let started = Instant::now();
    let mut report = Report {
        name: target.name,
        inputs: 0,
        panics: 0,
        first: None,
        elapsed: Duration::ZERO,
        slowest: Duration::ZERO,
        slowest_seed: 0,
    };
    while !spent(budget, report.inputs, started) {
        let input_seed = seeds.u64(..);
        let one = Instant::now();
        QUIET.set(true);
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| {
            (target.one)(&mut Rng::with_seed(input_seed))
        }));
        QUIET.set(false);
        if one.elapsed() > report.slowest {
            report.slowest = one.elapsed();
            report.slowest_seed = input_seed;
        }
        report.inputs += 1;
        if outcome.is_err() {
            report.panics += 1;
            if report.first.is_none() {
                let message = LAST_PANIC
                    .with(|p| p.borrow_mut().take())
                    .unwrap_or_default();
                report.first = Some((input_seed, message));
            }
        }
    }
    report.elapsed = started.elapsed();
    report
}

/// Runs one input of `target` from `seed`, panics not caught: the way to
/// reproduce a reported failure under a debugger or with a backtrace.
pub fn replay(target: &Target, seed: u64) {
    (target.one)(&mut Rng::with_seed(seed));
}

fn spent(budget: Budget, inputs: u64, started: Instant) -> bool {
    match budget {
        Budget::Inputs(n) => inputs >= n,
        // The clock is read every 64 inputs: cheap, and still on time.
        Budget::Seconds(s) => inputs.is_multiple_of(64) && started.elapsed().as_secs_f64() >= s,
    }
}

/// Each target draws its own sequence from the same base seed.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}
