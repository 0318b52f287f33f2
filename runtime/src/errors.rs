//! An error with its causes as one line, `outer: inner: innermost`: the outer text of many
//! errors (tonic's "transport error", reqwest's "error sending request") says nothing on its
//! own; the cause says which certificate was refused or that the connection was.

/// `err` and its causes; a cause whose text the line already ends with is not repeated.
pub fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Layer(&'static str, #[source] Option<Box<Layer>>);

    #[test]
    fn errors_show_their_causes_once() {
        let inner = Layer("invalid peer certificate: UnknownIssuer", None);
        let middle = Layer("tls handshake", Some(Box::new(inner)));
        let outer = Layer("transport error", Some(Box::new(middle)));
        assert_eq!(
            chain(&outer),
            "transport error: tls handshake: invalid peer certificate: UnknownIssuer"
        );
        let repeated = Layer("x: y", Some(Box::new(Layer("y", None))));
        assert_eq!(chain(&repeated), "x: y");
    }
}
