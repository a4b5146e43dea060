//! Counting panics per thread through one process-wide hook (chained to the one before it):
//! a chaos run owns the thread its current-thread runtime runs on, so a panic in any of its
//! tasks counts against that run only.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    static PANICS: Cell<u64> = const { Cell::new(0) };
}

static INSTALL: Once = Once::new();

/// Installs the counting hook (once per process).
pub fn install_counter() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.set(p.get() + 1));
            previous(info);
        }));
    });
}

/// Panics seen on this thread since the hook was installed.
pub fn count_on_this_thread() -> u64 {
    PANICS.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_is_counted_on_its_thread_only() {
        install_counter();
        let before = count_on_this_thread();
        let other = std::thread::spawn(|| {
            let _ = std::panic::catch_unwind(|| panic!("counted over there"));
            count_on_this_thread()
        })
        .join()
        .unwrap();
        assert!(other >= 1);
        assert_eq!(count_on_this_thread(), before);
    }
}
