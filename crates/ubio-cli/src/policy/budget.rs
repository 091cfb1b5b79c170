//! The daemon's budget thread: keeps the scopes' page-cache budgets
//! (ubio_engine::budget), apart from the thread that looks, since
//! memory.reclaim writes take tens of milliseconds. It publishes its figures after each tick (the looker
//! reads them when it publishes the status) and takes a reloaded
//! configuration's scopes at its next tick.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use ubio_engine::budget::{CgroupBudget, Keeper};
use ubio_engine::scope::Scopes;

#[derive(Default)]
struct Inbox {
    reload: Option<Scopes>,
    figures: Vec<CgroupBudget>,
    notices: Vec<String>,
}

/// The thread and what it shares with the looker.
pub struct BudgetThread {
    inbox: Arc<Mutex<Inbox>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl BudgetThread {
    /// Start keeping the budgets of `scopes` (a thread only where some
    /// scope has one; a reload that adds one starts it then).
    pub fn start(scopes: &Scopes, dry_run: bool) -> BudgetThread {
        let mut me = BudgetThread {
            inbox: Arc::default(),
            stop: Arc::default(),
            thread: None,
        };
        me.reload(scopes, dry_run);
        me
    }

    /// Take a new configuration's scopes.
    pub fn reload(&mut self, scopes: &Scopes, dry_run: bool) {
        let budgeted = scopes.scopes.iter().any(|s| s.budget.is_some());
        if self.thread.is_none() && budgeted {
            let (inbox, stop) = (Arc::clone(&self.inbox), Arc::clone(&self.stop));
            let keeper = Keeper::new(scopes, dry_run);
            self.thread = std::thread::Builder::new()
                .name("ubio-policy-budget".into())
                .spawn(move || run(keeper, &inbox, &stop))
                .map_err(|e| super::log(&format!("no budget is kept: no thread: {e}")))
                .ok();
        } else {
            lock(&self.inbox).reload = Some(scopes.clone());
        }
    }

    /// The figures of the last tick.
    pub fn figures(&self) -> Vec<CgroupBudget> {
        lock(&self.inbox).figures.clone()
    }

    /// Lines for the log since the last call.
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut lock(&self.inbox).notices)
    }
}

impl Drop for BudgetThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(m: &Mutex<Inbox>) -> std::sync::MutexGuard<'_, Inbox> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn run(mut keeper: Keeper, inbox: &Mutex<Inbox>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        if let Some(scopes) = lock(inbox).reload.take() {
            keeper.reload(&scopes);
        }
        let wait = keeper.tick();
        let figures = keeper.figures();
        let notices = keeper.take_notices();
        let mut i = lock(inbox);
        i.figures = figures;
        i.notices.extend(notices);
        drop(i);
        std::thread::sleep(wait);
    }
}
