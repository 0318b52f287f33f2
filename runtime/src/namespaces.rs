//! The namespaces a kstretch process watches (`--namespace=a,b`, or every namespace), checked
//! once at start-up, and the one [`Api`] per namespace they take: a Kubernetes watch covers one
//! namespace or all of them.

use k8s_openapi::NamespaceResourceScope;
use kube::{Api, Client, Resource};

/// Every namespace, or a list of distinct namespaces (never empty).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Namespaces {
    #[default]
    All,
    List(Vec<String>),
}

/// Why a `--namespace` value is refused; the process does not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NamespacesError {
    #[error(
        "--namespace {given:?} has an empty element: separate namespaces with single commas, or leave --namespace unset (or empty) to watch every namespace"
    )]
    Empty { given: String },
    #[error("--namespace {given:?} names namespace {namespace:?} more than once")]
    Duplicate { given: String, namespace: String },
    #[error(
        "--namespace {given:?}: {namespace:?} is not a namespace name (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)"
    )]
    Invalid { given: String, namespace: String },
}

impl Namespaces {
    /// Checks the values of `--namespace` (split at commas, each trimmed): none, or one empty
    /// value, is every namespace; an empty element in a list, a name given twice or a name that
    /// cannot be a namespace is refused.
    pub fn parse(values: &[String]) -> Result<Self, NamespacesError> {
        let given = values.join(",");
        if values.iter().all(|v| v.trim().is_empty()) && values.len() <= 1 {
            return Ok(Self::All);
        }
        let mut list: Vec<String> = Vec::with_capacity(values.len());
        for value in values {
            let namespace = value.trim();
            if namespace.is_empty() {
                return Err(NamespacesError::Empty { given });
            }
            if !is_dns_label(namespace) {
                return Err(NamespacesError::Invalid {
                    namespace: namespace.to_owned(),
                    given,
                });
            }
            if list.iter().any(|n| n == namespace) {
                return Err(NamespacesError::Duplicate {
                    namespace: namespace.to_owned(),
                    given,
                });
            }
            list.push(namespace.to_owned());
        }
        Ok(Self::List(list))
    }

    /// Exactly `namespace`.
    pub fn one(namespace: impl Into<String>) -> Self {
        Self::List(vec![namespace.into()])
    }

    /// The listed namespaces; `None` for every namespace.
    pub fn list(&self) -> Option<&[String]> {
        match self {
            Self::All => None,
            Self::List(list) => Some(list),
        }
    }

    /// The first listed namespace (for what lives in one namespace: the Lease, the agent's
    /// term ConfigMap); `None` for every namespace.
    pub fn first(&self) -> Option<&str> {
        self.list().and_then(|l| l.first()).map(String::as_str)
    }

    /// The namespace when exactly one is watched.
    pub fn single(&self) -> Option<&str> {
        match self.list() {
            Some([one]) => Some(one),
            _ => None,
        }
    }

    /// True when more than one namespace is listed (each then has its own watch and check).
    pub fn several(&self) -> bool {
        self.list().is_some_and(|l| l.len() > 1)
    }

    /// Whether objects in `namespace` are watched.
    pub fn contains(&self, namespace: &str) -> bool {
        self.list().is_none_or(|l| l.iter().any(|n| n == namespace))
    }

    /// One `Api` per watched namespace, with its namespace, or one over every namespace.
    pub fn apis<K>(&self, client: &Client) -> Vec<(Option<String>, Api<K>)>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self.list() {
            None => vec![(None, Api::all(client.clone()))],
            Some(list) => list
                .iter()
                .map(|ns| (Some(ns.clone()), Api::namespaced(client.clone(), ns)))
                .collect(),
        }
    }
}

impl std::fmt::Display for Namespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.list() {
            None => f.write_str("all namespaces"),
            Some(list) => f.write_str(&list.join(",")),
        }
    }
}

/// An RFC 1123 label: what every namespace name is (and what cluster aliases must be).
pub fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    name.len() <= 63
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parse(values: &[&str]) -> Result<Namespaces, NamespacesError> {
        Namespaces::parse(&values.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn unset_or_empty_is_every_namespace() {
        assert_eq!(parse(&[]).unwrap(), Namespaces::All);
        assert_eq!(parse(&[""]).unwrap(), Namespaces::All);
        assert_eq!(parse(&[" "]).unwrap(), Namespaces::All);
        assert!(Namespaces::All.contains("anything"));
        assert_eq!(Namespaces::All.single(), None);
        assert_eq!(Namespaces::All.to_string(), "all namespaces");
    }

    #[test]
    fn one_namespace_or_a_list() {
        let one = parse(&["kafka"]).unwrap();
        assert_eq!(one, Namespaces::one("kafka"));
        assert_eq!(one.single(), Some("kafka"));
        assert!(!one.several());
        let two = parse(&["a", " b "]).unwrap();
        assert_eq!(two.list(), Some(&["a".to_owned(), "b".to_owned()][..]));
        assert!(two.several() && two.contains("b") && !two.contains("c"));
        assert_eq!(two.single(), None);
        assert_eq!(two.to_string(), "a,b");
    }

    #[test]
    fn empty_elements_duplicates_and_bad_names_are_refused() {
        assert!(matches!(
            parse(&["a", ""]),
            Err(NamespacesError::Empty { .. })
        ));
        assert!(matches!(
            parse(&["", ""]),
            Err(NamespacesError::Empty { .. })
        ));
        let err = parse(&["a", "b", "a"]).unwrap_err();
        assert_eq!(
            err,
            NamespacesError::Duplicate {
                given: "a,b,a".into(),
                namespace: "a".into()
            }
        );
        assert!(err.to_string().contains("more than once"), "{err}");
        for bad in ["Kafka", "-a", "a-", "a_b", &"x".repeat(64)] {
            assert!(
                matches!(parse(&[bad]), Err(NamespacesError::Invalid { .. })),
                "{bad}"
            );
        }
    }
}
