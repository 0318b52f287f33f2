//! Registration of a component's Prometheus metrics as one table of name, help text and metric.

/// Registers each `name, help => metric` with `registry` (a `&mut Registry`), as a clone of
/// the metric, which shares its values with the handle the component keeps.
///
/// ```
/// use prometheus_client::metrics::counter::Counter;
/// let mut registry = kstretch_runtime::Registry::default();
/// let (sent, failed) = (Counter::<u64>::default(), Counter::<u64>::default());
/// kstretch_runtime::register_metrics!(&mut registry, {
///     "sent", "Messages sent" => sent,
///     "failed", format!("Messages {} could not send", "we") => failed,
/// });
/// sent.inc();
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains("sent_total 1"));
/// assert!(text.contains("# HELP failed Messages we could not send."));
/// ```
#[macro_export]
macro_rules! register_metrics {
    ($registry:expr, { $($name:expr, $help:expr => $metric:expr),* $(,)? }) => {{
        let registry: &mut $crate::Registry = &mut *$registry;
        $( registry.register($name, $help, $metric.clone()); )*
    }};
}
