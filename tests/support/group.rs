//! One test group at a time: the tests of the `e2e` and `node` binaries were test binaries of
//! their own, and cargo runs test binaries one after another while it runs the tests inside one
//! binary in parallel threads. Merged into one binary they would overlap on one cluster, and the
//! controllers several of them start (each watches every namespace) would act on each other's
//! objects. So every test there takes its group, the name of the binary it came from:
//!
//! - tests of one group run together, in parallel, as they did inside their own binary;
//! - tests of different groups never overlap: a test waits until no test of another group runs.
//!
//! libtest starts tests in the order of their names, and a test's name begins with its module
//! (the former binary), so a group's tests are started one after another and a test waits only
//! at the boundary between two groups. Which waiting group goes first is not fixed (the next
//! group in name order may overtake the one before it); a group may even run in two stretches,
//! and its [`PerGroup`] value is then built again for the second. [`run`] holds the group while the test's tokio runtime
//! exists: the runtime, and every task a test spawned on it (a controller), is shut down before
//! the next group may start. Tests that need no cluster (the `it` binary) take no group.
//!
//! What the tests of a group share (a controller, a published catalog) lives in a [`PerGroup`]:
//! built by the first test that asks, dropped when the group is released (before another group
//! may start), so a group's controller never runs beside another group's tests.

use std::future::Future;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

struct Holders {
    /// The group whose tests run now, if any.
    group: Option<&'static str>,
    /// How many tests of that group run now.
    count: usize,
}

static HOLDERS: Mutex<Holders> = Mutex::new(Holders { group: None, count: 0 });
static RELEASED: Condvar = Condvar::new();

type Hook = Box<dyn FnOnce() + Send>;

/// What to run when a group is released, by group: registered by [`PerGroup`].
static ON_RELEASE: Mutex<Vec<(&'static str, Hook)>> = Mutex::new(Vec::new());

/// A test's hold on its group; the group is free for others once every holder is dropped.
#[must_use = "the group is held only while the guard lives"]
pub struct GroupGuard;

/// Takes `group` for the calling test, waiting while a test of another group runs.
pub fn group(group: &'static str) -> GroupGuard {
    let mut h = HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
    while h.group.is_some_and(|g| g != group) {
        h = RELEASED.wait(h).unwrap_or_else(|e| e.into_inner());
    }
    h.group = Some(group);
    h.count += 1;
    GroupGuard
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let mut h = HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
        h.count -= 1;
        if h.count == 0 {
            // The hooks run while the group is still marked as held: a test of another group
            // starts only after they are done (a test of this group waits for them too).
            let group = h.group;
            let hooks: Vec<Hook> = {
                let mut all = ON_RELEASE.lock().unwrap_or_else(|e| e.into_inner());
                let (mine, others) = std::mem::take(&mut *all).into_iter().partition(|(g, _)| Some(*g) == group);
                *all = others;
                mine.into_iter().map(|(_, hook)| hook).collect()
            };
            for hook in hooks {
                hook();
            }
            h.group = None;
            RELEASED.notify_all();
        }
    }
}

/// Runs an async test body in `group` ([`group`]) on a runtime of its own: a current-thread one
/// when `worker_threads` is 0 (as `#[tokio::test]`), else a multi-thread one with that many
/// workers (as `#[tokio::test(flavor = "multi_thread", worker_threads = N)]`). The runtime and
/// its tasks are shut down before the group is released, also when the body panics.
pub fn run<F: Future>(group_name: &'static str, worker_threads: usize, body: F) -> F::Output {
    let _group = group(group_name);
    let runtime = if worker_threads == 0 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(worker_threads).enable_all().build()
    }
    .expect("tokio runtime");
    let out = runtime.block_on(body);
    // Wait for the workers (and blocking tasks) to stop before another group may start.
    runtime.shutdown_timeout(Duration::from_secs(30));
    out
}

/// A value the tests of one group share (a fixture): built by the first of them that calls
/// [`PerGroup::get_or_init`], dropped when the group is released (its last running test ends),
/// outside any test's runtime. Declare it as a `static` beside the tests of the group.
pub struct PerGroup<T> {
    group: &'static str,
    slot: tokio::sync::Mutex<Option<Arc<T>>>,
}

impl<T: Send + Sync + 'static> PerGroup<T> {
    /// An empty slot for the fixture of `group` (the name the tests pass to [`run`]).
    pub const fn new(group: &'static str) -> PerGroup<T> {
        PerGroup { group, slot: tokio::sync::Mutex::const_new(None) }
    }

    /// The group's value, built with `init` by the first caller while the others wait.
    ///
    /// # Panics
    /// When called outside the group (the caller must hold it, through [`run`] or [`group`]).
    pub async fn get_or_init<F, Fut>(&'static self, init: F) -> Arc<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let held = HOLDERS.lock().unwrap_or_else(|e| e.into_inner()).group;
        assert_eq!(held, Some(self.group), "the fixture of group {} used outside its group", self.group);
        let mut slot = self.slot.lock().await;
        if let Some(value) = slot.as_ref() {
            return value.clone();
        }
        let value = Arc::new(init().await);
        *slot = Some(value.clone());
        let hook: Hook = Box::new(move || {
            // Every test of the group has ended: nobody holds the slot's lock or another Arc.
            let value = self.slot.try_lock().ok().and_then(|mut slot| slot.take());
            drop(value);
        });
        ON_RELEASE.lock().unwrap_or_else(|e| e.into_inner()).push((self.group, hook));
        value
    }
}
