//! Which node IDs a pool gained and lost between two recorded lists, for the Events that tell a
//! user their cluster grew or shrank.

use std::collections::BTreeSet;

/// IDs in `after` but not `before` (added) and in `before` but not `after` (removed), sorted.
pub fn id_changes(before: &[i32], after: &[i32]) -> (Vec<i32>, Vec<i32>) {
    let before: BTreeSet<i32> = before.iter().copied().collect();
    let after: BTreeSet<i32> = after.iter().copied().collect();
    (
        after.difference(&before).copied().collect(),
        before.difference(&after).copied().collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_and_removed_ids_are_sorted_and_order_blind() {
        assert_eq!(id_changes(&[], &[2, 0, 1]), (vec![0, 1, 2], vec![]));
        assert_eq!(id_changes(&[0, 1, 2], &[2, 1, 0]), (vec![], vec![]));
        assert_eq!(id_changes(&[0, 1, 2], &[0, 5, 3]), (vec![3, 5], vec![1, 2]));
        assert_eq!(id_changes(&[4], &[]), (vec![], vec![4]));
    }
}
