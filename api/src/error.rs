//! Errors of the API crate: conversions between typed and JSON forms, and CRD rendering.

/// An error converting or rendering API objects.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A value could not be converted to or from JSON.
    #[error("JSON conversion failed: {0}")]
    Json(#[source] serde_json::Error),
    /// A value could not be rendered as YAML.
    #[error("YAML rendering failed: {0}")]
    Yaml(#[source] serde_yaml::Error),
    /// A file could not be read or written.
    #[error("I/O error on {0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// A value expected to be a JSON object was something else.
    #[error("expected a JSON object, got {0}")]
    NotAnObject(String),
}
