//! What Kafka Exporter shows of one read of a Kafka cluster, as Prometheus text: its brokers,
//! each partition's offsets and replicas, and each consumer group's members, committed offsets
//! and lag, under the metric and label names of Kafka Exporter (danielqsj/kafka_exporter) that
//! Strimzi's dashboards and alerts query. Pure: a [`Scrape`] and [`Filters`] in, text out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use regex::Regex;

/// One read of the cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// Broker ID → `host:port`.
    pub brokers: BTreeMap<i32, String>,
    pub topics: Vec<Topic>,
    pub groups: Vec<Group>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topic {
    pub name: String,
    pub partitions: Vec<Partition>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Partition {
    pub index: i32,
    /// -1 without a leader.
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The high watermark, when its leader answered.
    pub newest: Option<i64>,
    /// The log start offset, when its leader answered.
    pub oldest: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    pub id: String,
    pub members: usize,
    /// The partitions assigned to its members.
    pub assigned: BTreeSet<(String, i32)>,
    /// Committed offsets by topic and partition.
    pub committed: BTreeMap<(String, i32), i64>,
}

/// Which topics and groups are shown (Strimzi's `topicRegex`, `topicExcludeRegex`,
/// `groupRegex`, `groupExcludeRegex`, `showAllOffsets`). A regex matches anywhere in the name,
/// as Kafka Exporter's Go regexps do.
#[derive(Debug, Clone)]
pub struct Filters {
    pub topic: Regex,
    pub topic_exclude: Option<Regex>,
    pub group: Regex,
    pub group_exclude: Option<Regex>,
    /// Every partition of a topic the group consumes; else only those assigned to its members
    /// now.
    pub show_all_offsets: bool,
}

impl Filters {
    pub fn topic(&self, name: &str) -> bool {
        self.topic.is_match(name)
            && !self
                .topic_exclude
                .as_ref()
                .is_some_and(|r| r.is_match(name))
    }

    pub fn group(&self, id: &str) -> bool {
        self.group.is_match(id) && !self.group_exclude.as_ref().is_some_and(|r| r.is_match(id))
    }
}

/// One metric family: its samples are written under one `# HELP` and `# TYPE`.
struct Family<'a> {
    out: &'a mut String,
}

impl<'a> Family<'a> {
    fn new(out: &'a mut String, name: &str, help: &str) -> Self {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        Family { out }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: i64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The Prometheus text of `scrape` as `filters` select it.
pub fn render(scrape: &Scrape, filters: &Filters) -> String {
    let mut out = String::new();
    brokers(&mut out, &scrape.brokers);
    let topics: Vec<&Topic> = scrape
        .topics
        .iter()
        .filter(|t| filters.topic(&t.name))
        .collect();
    partitions(&mut out, &topics);
    let groups: Vec<&Group> = scrape
        .groups
        .iter()
        .filter(|g| filters.group(&g.id))
        .collect();
    consumer_groups(&mut out, &groups, &topics, filters.show_all_offsets);
    out
}

fn brokers(out: &mut String, brokers: &BTreeMap<i32, String>) {
    let count = i64::try_from(brokers.len()).unwrap_or(i64::MAX);
    Family::new(
        out,
        "kafka_brokers",
        "Number of Brokers in the Kafka Cluster.",
    )
    .sample("kafka_brokers", &[], count);
    let mut info = Family::new(
        out,
        "kafka_broker_info",
        "Information about the Kafka Broker.",
    );
    for (id, address) in brokers {
        info.sample(
            "kafka_broker_info",
            &[("address", address), ("id", &id.to_string())],
            1,
        );
    }
}

/// Per topic and partition: counts, offsets, leader and replicas.
fn partitions(out: &mut String, topics: &[&Topic]) {
    let mut count = Family::new(
        out,
        "kafka_topic_partitions",
        "Number of partitions for this Topic",
    );
    for t in topics {
        let n = i64::try_from(t.partitions.len()).unwrap_or(i64::MAX);
        count.sample("kafka_topic_partitions", &[("topic", &t.name)], n);
    }
    type Read = fn(&Partition) -> Option<i64>;
    let gauges: [(&str, &str, Read); 7] = [
        (
            "kafka_topic_partition_current_offset",
            "Current Offset of a Broker at Topic/Partition",
            |p| p.newest,
        ),
        (
            "kafka_topic_partition_oldest_offset",
            "Oldest Offset of a Broker at Topic/Partition",
            |p| p.oldest,
        ),
        (
            "kafka_topic_partition_leader",
            "Leader Broker ID of this Topic/Partition",
            |p| Some(i64::from(p.leader)),
        ),
        (
            "kafka_topic_partition_replicas",
            "Number of Replicas for this Topic/Partition",
            |p| i64::try_from(p.replicas.len()).ok(),
        ),
        (
            "kafka_topic_partition_in_sync_replica",
            "Number of In-Sync Replicas for this Topic/Partition",
            |p| i64::try_from(p.isr.len()).ok(),
        ),
        (
            "kafka_topic_partition_leader_is_preferred",
            "1 if Topic/Partition is using the Preferred Broker",
            |p| Some(i64::from(p.replicas.first() == Some(&p.leader))),
        ),
        (
            "kafka_topic_partition_under_replicated_partition",
            "1 if Topic/Partition is under Replicated",
            |p| Some(i64::from(p.isr.len() < p.replicas.len())),
        ),
    ];
    for (name, help, read) in gauges {
        let mut family = Family::new(out, name, help);
        for t in topics {
            for p in &t.partitions {
                if let Some(value) = read(p) {
                    let index = p.index.to_string();
                    family.sample(name, &[("partition", &index), ("topic", &t.name)], value);
                }
            }
        }
    }
}

/// One group's offset and lag of one partition; -1 where it committed none.
struct Row<'a> {
    group: &'a str,
    topic: &'a str,
    partition: i32,
    offset: i64,
    lag: Option<i64>,
}

/// Per group: members; per group and partition: committed offset and lag, with their sums
/// per topic. A topic shows for a group once the group committed an offset in it; then every
/// partition of it shows (or, without `show_all`, those assigned to its members now).
fn consumer_groups(out: &mut String, groups: &[&Group], topics: &[&Topic], show_all: bool) {
    let mut members = Family::new(
        out,
        "kafka_consumergroup_members",
        "Amount of members in a consumer group",
    );
    for g in groups {
        let n = i64::try_from(g.members).unwrap_or(i64::MAX);
        members.sample(
            "kafka_consumergroup_members",
            &[("consumergroup", &g.id)],
            n,
        );
    }
    let mut rows = Vec::new();
    for g in groups {
        for t in topics {
            if !g.committed.keys().any(|(topic, _)| topic == &t.name) {
                continue;
            }
            for p in &t.partitions {
                let key = (t.name.clone(), p.index);
                if !show_all && !g.assigned.contains(&key) {
                    continue;
                }
                let offset = g.committed.get(&key).copied().unwrap_or(-1);
                let lag = p
                    .newest
                    .map(|newest| if offset < 0 { -1 } else { newest - offset });
                rows.push(Row {
                    group: &g.id,
                    topic: &t.name,
                    partition: p.index,
                    offset,
                    lag,
                });
            }
        }
    }
    per_partition(
        out,
        "kafka_consumergroup_current_offset",
        "Current Offset of a ConsumerGroup at Topic/Partition",
        &rows,
        |r| Some(r.offset),
    );
    sums(
        out,
        "kafka_consumergroup_current_offset_sum",
        "Current Offset of a ConsumerGroup at Topic for all partitions",
        &rows,
        |r| Some(r.offset),
    );
    per_partition(
        out,
        "kafka_consumergroup_lag",
        "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
        &rows,
        |r| r.lag,
    );
    sums(
        out,
        "kafka_consumergroup_lag_sum",
        "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
        &rows,
        |r| r.lag,
    );
}

fn per_partition(
    out: &mut String,
    name: &str,
    help: &str,
    rows: &[Row],
    value: fn(&Row) -> Option<i64>,
) {
    let mut family = Family::new(out, name, help);
    for r in rows {
        if let Some(v) = value(r) {
            let partition = r.partition.to_string();
            family.sample(
                name,
                &[
                    ("consumergroup", r.group),
                    ("partition", &partition),
                    ("topic", r.topic),
                ],
                v,
            );
        }
    }
}

/// Sums per group and topic of the partitions' non-negative values (a partition without a
/// committed offset adds nothing).
fn sums(out: &mut String, name: &str, help: &str, rows: &[Row], value: fn(&Row) -> Option<i64>) {
    let mut totals: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for r in rows {
        let total = totals.entry((r.group, r.topic)).or_default();
        if let Some(v) = value(r).filter(|v| *v >= 0) {
            *total += v;
        }
    }
    let mut family = Family::new(out, name, help);
    for ((group, topic), total) in totals {
        family.sample(name, &[("consumergroup", group), ("topic", topic)], total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(show_all: bool) -> Filters {
        Filters {
            topic: Regex::new(".*").unwrap(),
            topic_exclude: Some(Regex::new("^__").unwrap()),
            group: Regex::new(".*").unwrap(),
            group_exclude: Some(Regex::new("^ignored$").unwrap()),
            show_all_offsets: show_all,
        }
    }

    fn partition(index: i32, leader: i32, replicas: &[i32], isr: &[i32], newest: i64) -> Partition {
        Partition {
            index,
            leader,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            newest: Some(newest),
            oldest: Some(0),
        }
    }

    fn scrape() -> Scrape {
        Scrape {
            brokers: BTreeMap::from([(0, "b-0:9091".to_owned()), (1, "b-1:9091".to_owned())]),
            topics: vec![
                Topic {
                    name: "orders".into(),
                    partitions: vec![
                        partition(0, 0, &[0, 1], &[0, 1], 100),
                        partition(1, 0, &[1, 0], &[0], 50),
                    ],
                },
                Topic {
                    name: "__consumer_offsets".into(),
                    partitions: vec![partition(0, 1, &[1], &[1], 7)],
                },
                Topic {
                    name: "unread".into(),
                    partitions: vec![partition(0, 1, &[1], &[1], 9)],
                },
            ],
            groups: vec![
                Group {
                    id: "billing".into(),
                    members: 1,
                    assigned: BTreeSet::from([("orders".to_owned(), 0)]),
                    committed: BTreeMap::from([(("orders".to_owned(), 0), 60)]),
                },
                Group {
                    id: "ignored".into(),
                    members: 3,
                    ..Group::default()
                },
            ],
        }
    }

    fn lines(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn brokers_partitions_and_group_lag_under_kafka_exporters_names() {
        let text = render(&scrape(), &filters(true));
        let samples = lines(&text);
        for expected in [
            "kafka_brokers 2",
            "kafka_broker_info{address=\"b-1:9091\",id=\"1\"} 1",
            "kafka_topic_partitions{topic=\"orders\"} 2",
            "kafka_topic_partition_current_offset{partition=\"1\",topic=\"orders\"} 50",
            "kafka_topic_partition_leader_is_preferred{partition=\"1\",topic=\"orders\"} 0",
            "kafka_topic_partition_under_replicated_partition{partition=\"1\",topic=\"orders\"} 1",
            "kafka_topic_partition_in_sync_replica{partition=\"0\",topic=\"orders\"} 2",
            "kafka_consumergroup_members{consumergroup=\"billing\"} 1",
            "kafka_consumergroup_current_offset{consumergroup=\"billing\",partition=\"0\",topic=\"orders\"} 60",
            "kafka_consumergroup_lag{consumergroup=\"billing\",partition=\"0\",topic=\"orders\"} 40",
            // A partition of a consumed topic without a committed offset: -1, as Kafka Exporter.
            "kafka_consumergroup_current_offset{consumergroup=\"billing\",partition=\"1\",topic=\"orders\"} -1",
            "kafka_consumergroup_lag{consumergroup=\"billing\",partition=\"1\",topic=\"orders\"} -1",
            "kafka_consumergroup_lag_sum{consumergroup=\"billing\",topic=\"orders\"} 40",
            "kafka_consumergroup_current_offset_sum{consumergroup=\"billing\",topic=\"orders\"} 60",
        ] {
            assert!(
                samples.contains(&expected),
                "{expected} missing from:\n{text}"
            );
        }
        // Excluded topics and groups, and topics the group never committed in, are not shown.
        assert!(!text.contains("__consumer_offsets"), "{text}");
        assert!(!text.contains("\"ignored\""), "{text}");
        assert!(
            !text.contains("consumergroup=\"billing\",partition=\"0\",topic=\"unread\""),
            "{text}"
        );
        // Every family is typed once.
        assert_eq!(
            text.matches("# TYPE kafka_consumergroup_lag gauge").count(),
            1
        );
    }

    #[test]
    fn without_show_all_only_the_partitions_assigned_now_show() {
        let text = render(&scrape(), &filters(false));
        assert!(text.contains("kafka_consumergroup_lag{consumergroup=\"billing\",partition=\"0\",topic=\"orders\"} 40"), "{text}");
        assert!(
            !text.contains("kafka_consumergroup_lag{consumergroup=\"billing\",partition=\"1\""),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
