//! Placeholder: filled in by the kadmin work in progress.
