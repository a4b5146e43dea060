//! Request IDs: UUID-shaped, unique per process (a counter), as AWS returns one per call.

use std::sync::atomic::{AtomicU64, Ordering};

/// The next request ID, e.g. `d0f1ce3a-0000-4000-8000-000000000007`.
pub(crate) fn next() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("d0f1ce3a-0000-4000-8000-{:012x}", n & 0xffff_ffff_ffff)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_uuid_shaped_and_distinct() {
        let (a, b) = (super::next(), super::next());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(
            a.split('-').map(str::len).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
    }
}
