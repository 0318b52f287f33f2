//! One store for a kind watched in several namespaces ([`Merged`], [`reflect_each`]): each
//! namespace's watch events are applied to one reflector store, so every reader (a controller
//! needs one `Store<K>`) sees every namespace, without one namespace's relist dropping
//! another's objects.
//!
//! kube's reflector `Writer` takes a watcher's `Init` .. `InitDone` as a complete list of the
//! store and swaps it in whole: two watches fed into one writer would let namespace A's relist
//! wipe namespace B's objects. Here each namespace's relist is buffered and, at its `InitDone`,
//! applied object by object, and only that namespace's objects missing from it are removed. The
//! store becomes ready (`Store::wait_until_ready`) once every namespace has listed once: before
//! that, "absent" may mean "not listed yet". With one watch, events go to the writer unchanged,
//! exactly as kube's reflector does. [`controller`] runs a kube controller on such a store.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use std::fmt::Debug;

use futures::{Stream, StreamExt};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// One namespace's part of a [`Merged`] store.
#[derive(Debug)]
struct Part<K> {
    /// `None`: a watch of every namespace (then the only part).
    namespace: Option<String>,
    /// The relist under way, from its `Init`.
    relist: Option<Vec<K>>,
    listed: bool,
}

/// The writer of one store fed by one watch per namespace.
#[derive(Debug)]
pub struct Merged<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    writer: Writer<K>,
    store: Store<K>,
    parts: Vec<Part<K>>,
    /// Set once every part has listed once.
    synced: Arc<AtomicBool>,
}

impl<K> Merged<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    /// A store fed by one watch per entry of `namespaces`, in that order.
    pub fn new(writer: Writer<K>, namespaces: Vec<Option<String>>) -> Self {
        Self {
            store: writer.as_reader(),
            writer,
            parts: namespaces
                .into_iter()
                .map(|namespace| Part {
                    namespace,
                    relist: None,
                    listed: false,
                })
                .collect(),
            synced: Arc::default(),
        }
    }

    /// The store every reader shares.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// True once every namespace has listed once (the store is ready then).
    pub fn synced(&self) -> Arc<AtomicBool> {
        self.synced.clone()
    }

    /// Applies an event of the watch of part `part`.
    pub fn apply(&mut self, part: usize, event: &watcher::Event<K>) {
        if self.parts.len() <= 1 {
            self.writer.apply_watcher_event(event);
            if matches!(event, watcher::Event::InitDone) {
                self.synced.store(true, Ordering::Release);
            }
            return;
        }
        let Some(p) = self.parts.get_mut(part) else {
            return;
        };
        match event {
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => {
                self.writer.apply_watcher_event(event);
            }
            watcher::Event::Init => p.relist = Some(Vec::new()),
            watcher::Event::InitApply(k) => p.relist.get_or_insert_default().push(k.clone()),
            watcher::Event::InitDone => {
                let list = p.relist.take().unwrap_or_default();
                p.listed = true;
                let namespace = p.namespace.clone();
                let first_complete =
                    !self.synced.load(Ordering::Acquire) && self.parts.iter().all(|p| p.listed);
                if first_complete {
                    self.swap_in(namespace.as_deref(), list);
                    self.synced.store(true, Ordering::Release);
                } else {
                    self.relisted(namespace.as_deref(), list);
                }
            }
        }
    }

    /// Replaces `namespace`'s objects with `list`, one by one, leaving other namespaces'.
    fn relisted(&mut self, namespace: Option<&str>, list: Vec<K>) {
        let mut listed = HashSet::with_capacity(list.len());
        for k in list {
            listed.insert(ObjectRef::from_obj(&k));
            self.writer.apply_watcher_event(&watcher::Event::Apply(k));
        }
        for gone in self.store.state().into_iter().filter(|k| {
            k.meta().namespace.as_deref() == namespace
                && !listed.contains(&ObjectRef::from_obj(&**k))
        }) {
            self.writer
                .apply_watcher_event(&watcher::Event::Delete(K::clone(&gone)));
        }
    }

    /// [`Merged::relisted`] as one complete list of the store (every other namespace's objects
    /// and `namespace`'s `list`), which marks the store ready.
    fn swap_in(&mut self, namespace: Option<&str>, list: Vec<K>) {
        let others: Vec<Arc<K>> = self
            .store
            .state()
            .into_iter()
            .filter(|k| k.meta().namespace.as_deref() != namespace)
            .collect();
        self.writer.apply_watcher_event(&watcher::Event::Init);
        for k in others {
            self.writer
                .apply_watcher_event(&watcher::Event::InitApply(K::clone(&k)));
        }
        for k in list {
            self.writer
                .apply_watcher_event(&watcher::Event::InitApply(k));
        }
        self.writer.apply_watcher_event(&watcher::Event::InitDone);
    }
}

/// The watch event streams `streams`, one per part of `merged` in its order, as one stream of
/// `(part, item)`, each event applied to `merged`'s store before it is passed on (as kube's
/// `reflect` does for one stream).
pub fn reflect_each<K, S>(
    streams: Vec<S>,
    mut merged: Merged<K>,
) -> impl Stream<Item = (usize, Result<watcher::Event<K>, watcher::Error>)> + Send
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    let tagged = streams
        .into_iter()
        .enumerate()
        .map(|(i, s)| s.map(move |item| (i, item)).boxed());
    futures::stream::select_all(tagged).map(move |(part, item)| {
        if let Ok(event) = &item {
            merged.apply(part, event);
        }
        (part, item)
    })
}

/// A controller of `K` watching each of `apis` (one per namespace, or one over every
/// namespace) into one store. With one `Api` it is kube's `Controller::new`, unchanged.
pub fn controller<K>(apis: Vec<(Option<String>, Api<K>)>, config: watcher::Config) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (namespaces, mut apis): (Vec<Option<String>>, Vec<Api<K>>) = apis.into_iter().unzip();
    if apis.len() == 1
        && let Some(api) = apis.pop()
    {
        return Controller::new(api, config);
    }
    let merged = Merged::new(Writer::default(), namespaces);
    let store = merged.store();
    let streams = apis
        .into_iter()
        .map(|api| watcher(api, config.clone()))
        .collect();
    // As `Controller::new`: errors go on to the controller, which backs its triggers off.
    let trigger = reflect_each(streams, merged)
        .map(|(_, item)| item)
        .applied_objects();
    Controller::for_stream(trigger, store)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::ResourceExt;
    use kube::runtime::reflector;

    use super::*;

    fn cm(namespace: &str, name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.namespace = Some(namespace.into());
        cm.metadata.name = Some(name.into());
        cm
    }

    fn names(store: &Store<ConfigMap>) -> Vec<String> {
        let mut names: Vec<String> = store
            .state()
            .iter()
            .map(|k| format!("{}/{}", k.namespace().unwrap_or_default(), k.name_any()))
            .collect();
        names.sort();
        names
    }

    fn list(merged: &mut Merged<ConfigMap>, part: usize, objects: &[ConfigMap]) {
        merged.apply(part, &watcher::Event::Init);
        for k in objects {
            merged.apply(part, &watcher::Event::InitApply(k.clone()));
        }
        merged.apply(part, &watcher::Event::InitDone);
    }

    #[test]
    fn a_namespace_relist_leaves_the_other_namespaces_objects() {
        let (_, writer) = reflector::store::<ConfigMap>();
        let mut merged = Merged::new(writer, vec![Some("a".into()), Some("b".into())]);
        let (store, synced) = (merged.store(), merged.synced());
        list(&mut merged, 0, &[cm("a", "1")]);
        // a is there, but the store is not ready before b has listed.
        assert_eq!(names(&store), ["a/1"]);
        assert!(!synced.load(Ordering::Acquire));
        assert!(store.wait_until_ready().now_or_never().is_none());
        list(&mut merged, 1, &[cm("b", "1"), cm("b", "2")]);
        assert!(synced.load(Ordering::Acquire));
        assert!(store.wait_until_ready().now_or_never().is_some());
        assert_eq!(names(&store), ["a/1", "b/1", "b/2"]);
        // a's relist (after a reconnection) replaces a's objects only.
        merged.apply(0, &watcher::Event::Init);
        merged.apply(0, &watcher::Event::InitApply(cm("a", "2")));
        assert_eq!(
            names(&store),
            ["a/1", "b/1", "b/2"],
            "a relist shows when done"
        );
        merged.apply(0, &watcher::Event::InitDone);
        assert_eq!(names(&store), ["a/2", "b/1", "b/2"]);
        merged.apply(1, &watcher::Event::Delete(cm("b", "1")));
        merged.apply(1, &watcher::Event::Apply(cm("b", "3")));
        assert_eq!(names(&store), ["a/2", "b/2", "b/3"]);
        // An empty relist of b empties b only.
        list(&mut merged, 1, &[]);
        assert_eq!(names(&store), ["a/2"]);
    }

    #[test]
    fn one_watch_is_reflected_as_kube_does() {
        let (_, writer) = reflector::store::<ConfigMap>();
        let mut merged = Merged::new(writer, vec![None]);
        let (store, synced) = (merged.store(), merged.synced());
        list(&mut merged, 0, &[cm("a", "1"), cm("b", "1")]);
        assert!(synced.load(Ordering::Acquire));
        assert_eq!(names(&store), ["a/1", "b/1"]);
        // A relist is the whole store.
        list(&mut merged, 0, &[cm("b", "1")]);
        assert_eq!(names(&store), ["b/1"]);
    }

    #[tokio::test]
    async fn reflect_each_tags_each_item_with_its_part_after_applying_it() {
        let (_, writer) = reflector::store::<ConfigMap>();
        let merged = Merged::new(writer, vec![Some("a".into()), Some("b".into())]);
        let store = merged.store();
        let events = |ns: &str| {
            futures::stream::iter(vec![
                Ok(watcher::Event::Init),
                Ok(watcher::Event::InitApply(cm(ns, "1"))),
                Ok(watcher::Event::InitDone),
            ])
        };
        let items: Vec<_> = reflect_each(vec![events("a"), events("b")], merged)
            .collect()
            .await;
        let mut parts: Vec<usize> = items.iter().map(|(part, _)| *part).collect();
        parts.sort_unstable();
        assert_eq!(parts, [0, 0, 0, 1, 1, 1]);
        assert_eq!(names(&store), ["a/1", "b/1"]);
    }
}
