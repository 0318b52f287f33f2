//! The node-ID list syntax of the `strimzi.io/next-node-ids` and `strimzi.io/remove-node-ids`
//! annotations: `[3]`, `[3, 4, 5]`, `[1000-1010]`, `[0, 1, 10-15]`, descending `[15-10]`.

use std::fmt;

/// A parsed node-ID list: single IDs and inclusive ranges, in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdRange {
    items: Vec<Item>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Single(i32),
    /// Inclusive; `start > end` walks downwards.
    Range {
        start: i32,
        end: i32,
    },
}

/// Why an annotation value is not a node-ID list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("{value:?} is not a node-ID list: it must be in brackets, e.g. [3, 4] or [10-15]")]
    NotBracketed { value: String },
    #[error("{value:?} is not a node-ID list: {item:?} is neither an ID nor a range like 10-15")]
    BadItem { value: String, item: String },
    #[error("{value:?} is not a node-ID list: {item:?} is larger than the largest node ID {max}", max = i32::MAX)]
    TooLarge { value: String, item: String },
}

impl NodeIdRange {
    /// Parses an annotation value. Blank and `[]` are an empty list.
    pub fn parse(value: &str) -> Result<Self, RangeError> {
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return Ok(Self { items: Vec::new() });
        }
        let inner = trimmed
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .ok_or_else(|| RangeError::NotBracketed {
                value: value.to_owned(),
            })?
            .trim();
        if inner.is_empty() {
            return Ok(Self { items: Vec::new() });
        }
        let items = inner
            .split(',')
            .map(|item| parse_item(value, item.trim()))
            .collect::<Result<_, _>>()?;
        Ok(Self { items })
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Every ID in the order written; ranges walk from their start to their end.
    pub fn ids(&self) -> impl Iterator<Item = i32> + '_ {
        self.items
            .iter()
            .flat_map(|item| -> Box<dyn Iterator<Item = i32>> {
                match *item {
                    Item::Single(id) => Box::new(std::iter::once(id)),
                    Item::Range { start, end } if start <= end => Box::new(start..=end),
                    Item::Range { start, end } => Box::new((end..=start).rev()),
                }
            })
    }
}

fn parse_item(value: &str, item: &str) -> Result<Item, RangeError> {
    let bad = || RangeError::BadItem {
        value: value.to_owned(),
        item: item.to_owned(),
    };
    match item.split_once('-') {
        None => parse_id(value, item).map(Item::Single),
        Some((start, end)) => {
            let (start, end) = (start.trim(), end.trim());
            if start.is_empty() || end.is_empty() {
                return Err(bad());
            }
            Ok(Item::Range {
                start: parse_id(value, start)?,
                end: parse_id(value, end)?,
            })
        }
    }
}

fn parse_id(value: &str, text: &str) -> Result<i32, RangeError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RangeError::BadItem {
            value: value.to_owned(),
            item: text.to_owned(),
        });
    }
    text.parse().map_err(|_| RangeError::TooLarge {
        value: value.to_owned(),
        item: text.to_owned(),
    })
}

impl fmt::Display for NodeIdRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match item {
                Item::Single(id) => write!(f, "{id}")?,
                Item::Range { start, end } => write!(f, "{start}-{end}")?,
            }
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(value: &str) -> Vec<i32> {
        NodeIdRange::parse(value).unwrap().ids().collect()
    }

    #[test]
    fn single_ids_lists_and_ranges() {
        assert_eq!(ids("[3]"), [3]);
        assert_eq!(ids("[3, 4, 5]"), [3, 4, 5]);
        assert_eq!(ids("[1000-1003]"), [1000, 1001, 1002, 1003]);
        assert_eq!(ids("[0, 1, 10-12]"), [0, 1, 10, 11, 12]);
    }

    #[test]
    fn descending_ranges_walk_down() {
        assert_eq!(ids("[15-12]"), [15, 14, 13, 12]);
        assert_eq!(ids("[7-7]"), [7]);
    }

    #[test]
    fn whitespace_is_allowed_around_everything() {
        assert_eq!(ids("  [ 1 ,2- 4 ,  9 ]  "), [1, 2, 3, 4, 9]);
    }

    #[test]
    fn blank_and_empty_brackets_are_an_empty_list() {
        assert!(NodeIdRange::parse("").unwrap().is_empty());
        assert!(NodeIdRange::parse(" [ ] ").unwrap().is_empty());
    }

    #[test]
    fn malformed_values_are_refused_with_the_offending_part() {
        assert_eq!(
            NodeIdRange::parse("3, 4"),
            Err(RangeError::NotBracketed {
                value: "3, 4".into()
            })
        );
        for (value, item) in [
            ("[a]", "a"),
            ("[1,,2]", ""),
            ("[1-]", "1-"),
            ("[-1]", "-1"),
            ("[1-2-3]", "2-3"),
            ("[+4]", "+4"),
            ("[1.5]", "1.5"),
        ] {
            match NodeIdRange::parse(value) {
                Err(RangeError::BadItem { item: got, .. }) => assert_eq!(got, item, "{value}"),
                other => panic!("{value}: {other:?}"),
            }
        }
        assert!(matches!(
            NodeIdRange::parse("[2147483648]"),
            Err(RangeError::TooLarge { .. })
        ));
    }

    #[test]
    fn error_messages_say_what_to_write() {
        let err = NodeIdRange::parse("[x]").unwrap_err().to_string();
        assert_eq!(
            err,
            "\"[x]\" is not a node-ID list: \"x\" is neither an ID nor a range like 10-15"
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics(value in ".{0,40}") {
            let _ = NodeIdRange::parse(&value);
        }

        #[test]
        fn display_round_trips(items in proptest::collection::vec((0i32..5000, proptest::option::of(0i32..5000)), 0..8)) {
            let text = format!("[{}]", items.iter().map(|(a, b)| match b {
                Some(b) => format!("{a}-{b}"),
                None => a.to_string(),
            }).collect::<Vec<_>>().join(","));
            let parsed = NodeIdRange::parse(&text).unwrap();
            let again = NodeIdRange::parse(&parsed.to_string()).unwrap();
            prop_assert_eq!(&parsed, &again);
            let expected: usize = items.iter().map(|(a, b)| b.map_or(1, |b| (a - b).unsigned_abs() as usize + 1)).sum();
            prop_assert_eq!(parsed.ids().count(), expected);
        }
    }
}
