//! Pagination of describe answers: a page of at most `MaxResults` (or the action's default)
//! items from the offset an opaque `NextToken` names, and the token of the next page.

use super::error::WireError;

/// One page of results.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    pub next_token: Option<String>,
}

const TOKEN_PREFIX: &str = "dw1.";

/// The page of `all` that `token` (absent: the first) and `max_results` (absent: `default`,
/// absent too: everything) select.
pub(crate) fn page<T>(
    all: Vec<T>,
    token: Option<&str>,
    max_results: Option<i64>,
    default: Option<usize>,
) -> Result<Page<T>, WireError> {
    let start = match token.filter(|t| !t.is_empty()) {
        None => 0,
        Some(t) => t
            .strip_prefix(TOKEN_PREFIX)
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= all.len())
            .ok_or_else(|| WireError::InvalidNextToken(t.to_string()))?,
    };
    let size = match max_results {
        Some(n) if n < 1 => {
            return Err(WireError::invalid(
                "MaxResults",
                &n.to_string(),
                "must be at least 1",
            ));
        }
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
        None => default.unwrap_or(usize::MAX),
    };
    let end = start.saturating_add(size).min(all.len());
    let next_token = (end < all.len()).then(|| format!("{TOKEN_PREFIX}{end}"));
    let items = all.into_iter().skip(start).take(end - start).collect();
    Ok(Page { items, next_token })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_tokens_to_the_end() {
        let all: Vec<u32> = (0..5).collect();
        let first = page(all.clone(), None, Some(2), None).unwrap();
        assert_eq!(first.items, [0, 1]);
        let second = page(all.clone(), first.next_token.as_deref(), Some(2), None).unwrap();
        assert_eq!(second.items, [2, 3]);
        let last = page(all.clone(), second.next_token.as_deref(), Some(2), None).unwrap();
        assert_eq!((last.items, last.next_token), (vec![4], None));
        let everything = page(all.clone(), None, None, None).unwrap();
        assert_eq!((everything.items.len(), everything.next_token), (5, None));
        assert_eq!(
            page(all.clone(), None, None, Some(3)).unwrap().items.len(),
            3
        );
    }

    #[test]
    fn foreign_tokens_and_bad_sizes_are_refused() {
        let all: Vec<u32> = (0..5).collect();
        assert!(page(all.clone(), Some("x"), None, None).is_err());
        assert!(page(all.clone(), Some("dw1.9"), None, None).is_err());
        assert!(page(all, None, Some(0), None).is_err());
    }
}
