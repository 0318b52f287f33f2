//! `logging` of a `Kafka`'s nodes and of a `KafkaConnect`'s workers: the log4j2 properties file
//! they read, built as Strimzi builds it, so that a change reaches running nodes without a restart
//! (log4j2 re-reads the file every `monitorInterval` seconds, and kubelet refreshes the mounted
//! ConfigMap). Pure.

use std::collections::BTreeMap;

use kstretch_api::common::{ConfigMapKeyRef, Logging, LoggingType};

use crate::status::Refusal;

/// The key of the file in the nodes' ConfigMap, and its name where it is mounted.
pub const FILE: &str = "log4j2.properties";
/// The refusal's reason when the configuration cannot be read.
pub const REASON: &str = "InvalidLoggingConfig";
/// How often log4j2 looks for a changed file, in seconds (Strimzi's interval), unless the
/// user's own configuration says otherwise.
const MONITOR_INTERVAL: &str = "30";

/// One of Strimzi's default configurations: its name, then what they all share (everything
/// on the console, the root logger at INFO), then its own loggers.
#[derive(Debug)]
pub struct Defaults {
    name: &'static str,
    loggers: &'static [(&'static str, &'static str)],
}

/// What every default configuration holds after its name.
const CONSOLE_AT_INFO: &[(&str, &str)] = &[
    ("appender.console.type", "Console"),
    ("appender.console.name", "STDOUT"),
    ("appender.console.layout.type", "PatternLayout"),
    (
        "appender.console.layout.pattern",
        "%d{yyyy-MM-dd HH:mm:ss} %-5p [%t] %c{1}:%L - %m%n",
    ),
    ("rootLogger.level", "INFO"),
    ("rootLogger.appenderRefs", "console"),
    ("rootLogger.appenderRef.console.ref", "STDOUT"),
    ("rootLogger.additivity", "false"),
];

/// Strimzi's default configuration of Kafka nodes: INFO but the request loggers at WARN.
pub const KAFKA_DEFAULTS: Defaults = Defaults {
    name: "KafkaConfig",
    loggers: &[
        ("logger.kafka.name", "kafka"),
        ("logger.kafka.level", "INFO"),
        ("logger.orgapachekafka.name", "org.apache.kafka"),
        ("logger.orgapachekafka.level", "INFO"),
        ("logger.requestlogger.name", "kafka.request.logger"),
        ("logger.requestlogger.level", "WARN"),
        (
            "logger.requestchannel.name",
            "kafka.network.RequestChannel$",
        ),
        ("logger.requestchannel.level", "WARN"),
        ("logger.controller.name", "org.apache.kafka.controller"),
        ("logger.controller.level", "INFO"),
        ("logger.logcleaner.name", "kafka.log.LogCleaner"),
        ("logger.logcleaner.level", "INFO"),
        ("logger.statechange.name", "state.change.logger"),
        ("logger.statechange.level", "INFO"),
        ("logger.authorizer.name", "kafka.authorizer.logger"),
        ("logger.authorizer.level", "INFO"),
    ],
};

/// Strimzi's default configuration of Connect workers: INFO but the plugin scanner at ERROR.
pub const CONNECT_DEFAULTS: Defaults = Defaults {
    name: "KafkaConnectConfig",
    loggers: &[
        ("logger.reflections.name", "org.reflections"),
        ("logger.reflections.level", "ERROR"),
        ("logger.reflections.additivity", "false"),
    ],
};

impl Defaults {
    /// Every key and value, in the order Strimzi writes them.
    fn pairs(&self) -> Vec<(String, String)> {
        std::iter::once(&("name", self.name))
            .chain(CONSOLE_AT_INFO)
            .chain(self.loggers)
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }
}

/// The `-D` option that points log4j2 at the file in `dir`.
pub fn java_option(dir: &str) -> String {
    format!("-Dlog4j2.configurationFile={dir}/{FILE}")
}

/// Where an `external` configuration is read from; `None` for `inline` (or none at all).
pub fn external_source(logging: Option<&Logging>) -> Option<&ConfigMapKeyRef> {
    logging
        .filter(|l| l.type_ == LoggingType::External)
        .and_then(|l| l.value_from.as_ref())
        .map(|v| &v.config_map_key_ref)
}

/// What is wrong with `logging` at `path` before anything is read, if anything.
pub fn invalid(path: &str, logging: Option<&Logging>) -> Option<String> {
    let logging = logging?;
    match logging.type_ {
        LoggingType::External if logging.value_from.is_none() => Some(format!(
            "{path}.logging is external without valueFrom: name the ConfigMap key that holds the log4j2 configuration in valueFrom.configMapKeyRef"
        )),
        LoggingType::External if !logging.loggers.is_empty() => Some(format!(
            "{path}.logging is external and also sets loggers: put the loggers into the ConfigMap, or use type inline"
        )),
        _ => None,
    }
}

/// The `external` configuration's text from the ConfigMap's `data` (`None`: the ConfigMap does
/// not exist), or why it cannot be used.
pub fn external_text(
    path: &str,
    source: &ConfigMapKeyRef,
    data: Option<&BTreeMap<String, String>>,
) -> Result<String, Refusal> {
    crate::config_map::key_text(source, data, |what| {
        Refusal::new(
            REASON,
            format!(
                "{path}.logging names {what}; create it with a log4j2 properties file or fix valueFrom.configMapKeyRef (what runs keeps its logging until then)"
            ),
        )
    })
}

/// The file the nodes read: the `external` text as given, or `defaults` with the `inline`
/// loggers on top; with `monitorInterval` unless it sets its own. `None` when `logging` is
/// not set: the nodes then keep the image's own configuration.
pub fn properties(
    defaults: &Defaults,
    logging: Option<&Logging>,
    external: Option<&str>,
) -> Option<String> {
    let logging = logging?;
    let mut text = match (logging.type_, external) {
        (LoggingType::External, Some(text)) => text.to_owned(),
        _ => {
            let mut pairs = defaults.pairs();
            for (key, value) in &logging.loggers {
                match pairs.iter_mut().find(|(k, _)| k == key) {
                    Some(slot) => slot.1 = value.clone(),
                    None => pairs.push((key.clone(), value.clone())),
                }
            }
            let mut text =
                "# Written by kstretch from the resource's logging; change it there.\n".to_owned();
            for (key, value) in pairs {
                text.push_str(&format!("{key} = {value}\n"));
            }
            text
        }
    };
    if !sets_monitor_interval(&text) {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("monitorInterval = {MONITOR_INTERVAL}\n"));
    }
    Some(text)
}

/// Whether a properties text sets `monitorInterval` itself.
fn sets_monitor_interval(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        !line.starts_with('#')
            && !line.starts_with('!')
            && line
                .split(['=', ':', ' ', '\t'])
                .next()
                .is_some_and(|key| key == "monitorInterval")
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use serde_json::json;

    fn logging(value: serde_json::Value) -> Logging {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn inline_loggers_go_on_top_of_strimzis_defaults_and_log4j2_looks_again_every_30_seconds() {
        let inline = logging(json!({"type": "inline", "loggers": {
            "rootLogger.level": "DEBUG",
            "logger.cleaner.name": "kafka.log.LogCleaner$",
            "logger.cleaner.level": "TRACE"}}));
        let text = properties(&KAFKA_DEFAULTS, Some(&inline), None).unwrap();
        assert!(text.contains("\nrootLogger.level = DEBUG\n"), "{text}");
        assert!(!text.contains("rootLogger.level = INFO"), "{text}");
        assert!(
            text.contains("\nlogger.requestlogger.level = WARN\n"),
            "{text}"
        );
        assert!(text.contains("\nlogger.cleaner.level = TRACE\n"), "{text}");
        assert!(text.ends_with("monitorInterval = 30\n"), "{text}");
        // Inline without loggers: Strimzi's defaults.
        let plain = properties(
            &KAFKA_DEFAULTS,
            Some(&logging(json!({"type": "inline"}))),
            None,
        );
        assert!(plain.unwrap().contains("\nlogger.kafka.level = INFO\n"));
        assert_eq!(
            properties(&KAFKA_DEFAULTS, None, None),
            None,
            "unset: the image's own"
        );
    }

    #[test]
    fn connect_workers_get_strimzis_connect_defaults() {
        let inline = logging(json!({"type": "inline", "loggers": {"rootLogger.level": "DEBUG"}}));
        let text = properties(&CONNECT_DEFAULTS, Some(&inline), None).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "name = KafkaConnectConfig");
        assert_eq!(lines[2], "appender.console.type = Console");
        assert!(lines.contains(&"rootLogger.level = DEBUG"));
        assert!(lines.contains(&"logger.reflections.level = ERROR"));
        assert!(!text.contains("kafka.request.logger"));
    }

    #[test]
    fn an_external_file_is_taken_as_written_with_its_own_monitor_interval_kept() {
        let external = logging(json!({"type": "external", "valueFrom": {
            "configMapKeyRef": {"name": "logs", "key": "log4j2.properties"}}}));
        let given = "rootLogger.level=WARN";
        assert_eq!(
            properties(&KAFKA_DEFAULTS, Some(&external), Some(given)).unwrap(),
            "rootLogger.level=WARN\nmonitorInterval = 30\n"
        );
        let own = "monitorInterval=5\nrootLogger.level=WARN\n";
        assert_eq!(
            properties(&KAFKA_DEFAULTS, Some(&external), Some(own)).unwrap(),
            own
        );
        assert_eq!(external_source(Some(&external)).unwrap().name, "logs");
        assert!(invalid(".spec.kafka", Some(&external)).is_none());
    }

    #[test]
    fn what_cannot_be_used_is_refused_naming_the_field_and_the_configmap() {
        let no_source = logging(json!({"type": "external"}));
        let message = invalid(".spec.kafka", Some(&no_source)).unwrap();
        assert!(message.starts_with(".spec.kafka.logging is external without valueFrom"));
        let both = logging(
            json!({"type": "external", "loggers": {"a": "b"}, "valueFrom": {
            "configMapKeyRef": {"name": "logs", "key": "k"}}}),
        );
        assert!(
            invalid(".spec.kafka", Some(&both))
                .unwrap()
                .contains("also sets loggers")
        );

        let source = ConfigMapKeyRef {
            name: "logs".into(),
            key: "k".into(),
            optional: None,
        };
        let absent = external_text(".spec.kafka", &source, None).unwrap_err();
        assert_eq!(absent.reason, REASON);
        assert!(
            absent
                .message
                .contains("ConfigMap logs, which does not exist"),
            "{absent:?}"
        );
        let data = BTreeMap::from([("other".to_owned(), "x".to_owned())]);
        let keyless = external_text(".spec.kafka", &source, Some(&data)).unwrap_err();
        assert!(
            keyless.message.contains("key k of ConfigMap logs"),
            "{keyless:?}"
        );
        let data = BTreeMap::from([("k".to_owned(), "rootLogger.level=WARN".to_owned())]);
        assert_eq!(
            external_text(".spec.kafka", &source, Some(&data)).unwrap(),
            "rootLogger.level=WARN"
        );
    }
}
