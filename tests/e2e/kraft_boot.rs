//! Placeholder: filled in by the kraft_boot work in progress.
