//! A tenant's view of the one shared store: every key it writes is prefixed with
//! `tenant/<name>/`, and it loads only its own keys, so a tenant's coordinator cannot read or
//! overwrite another tenant's groups however its group ids are spelled.

use std::sync::Arc;

use assignor_coordinator::store::{
    Conditional, Guard, Revision, SharedStore, Snapshot, Store, StoreError, SyncToken, Watch,
};

/// A [`Store`] confined to the keys under one prefix.
#[derive(Debug)]
pub(crate) struct Namespaced {
    inner: Arc<dyn Store>,
    prefix: String,
}

impl Namespaced {
    /// The namespace of `tenant` in `inner`.
    pub(crate) fn tenant(inner: Arc<dyn Store>, tenant: &str) -> Self {
        Self {
            inner,
            // Tenant names never contain `/`, so one tenant's prefix is never a prefix of
            // another's.
            prefix: format!("tenant/{tenant}/"),
        }
    }
}

impl Store for Namespaced {
    fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        Ok(self
            .inner
            .load_all()?
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&self.prefix)?.to_owned(), v)))
            .collect())
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.inner.put(&format!("{}{key}", self.prefix), value)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(&format!("{}{key}", self.prefix))
    }

    fn put_unsynced(&self, key: &str, value: &[u8]) -> Result<SyncToken, StoreError> {
        self.inner
            .put_unsynced(&format!("{}{key}", self.prefix), value)
    }

    fn sync(&self, token: SyncToken) -> Result<(), StoreError> {
        self.inner.sync(token)
    }

    fn sync_then(&self, token: SyncToken, done: Box<dyn FnOnce(Result<(), StoreError>) + Send>) {
        self.inner.sync_then(token, done)
    }

    fn shared(&self) -> Option<&dyn SharedStore> {
        self.inner.shared().map(|_| self as &dyn SharedStore)
    }
}

/// The shared store's conditional operations, confined to the namespace like the rest.
impl SharedStore for Namespaced {
    fn load_prefix(&self, prefix: &str) -> Result<Snapshot, StoreError> {
        let snapshot = self
            .shared_inner()?
            .load_prefix(&format!("{}{prefix}", self.prefix))?;
        Ok(Snapshot {
            entries: snapshot
                .entries
                .into_iter()
                .filter_map(|(k, v, r)| Some((k.strip_prefix(&self.prefix)?.to_owned(), v, r)))
                .collect(),
            at: snapshot.at,
            damaged: snapshot
                .damaged
                .into_iter()
                .filter_map(|(k, why)| Some((k.strip_prefix(&self.prefix)?.to_owned(), why)))
                .collect(),
        })
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, Revision)>, StoreError> {
        self.shared_inner()?.get(&format!("{}{key}", self.prefix))
    }

    fn put_if(
        &self,
        key: &str,
        value: &[u8],
        expected: Revision,
    ) -> Result<Conditional, StoreError> {
        self.shared_inner()?
            .put_if(&format!("{}{key}", self.prefix), value, expected)
    }

    fn delete_if(&self, key: &str, expected: Revision) -> Result<Conditional, StoreError> {
        self.shared_inner()?
            .delete_if(&format!("{}{key}", self.prefix), expected)
    }

    fn write_if_guarded(
        &self,
        key: &str,
        value: Option<&[u8]>,
        expected: Revision,
        guards: &[Guard],
    ) -> Result<Conditional, StoreError> {
        let guards = guards
            .iter()
            .map(|guard| match guard {
                Guard::Key(key, revision) => {
                    Ok(Guard::Key(format!("{}{key}", self.prefix), *revision))
                }
                Guard::Unchanged { prefix, since } => Ok(Guard::Unchanged {
                    prefix: format!("{}{prefix}", self.prefix),
                    since: *since,
                }),
                // Not confined to the namespace: refused rather than checked outside it.
                other => Err(StoreError::Backend {
                    backend: format!("namespace {:?}", self.prefix),
                    source: format!("a guard this namespace cannot confine: {other:?}").into(),
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.shared_inner()?.write_if_guarded(
            &format!("{}{key}", self.prefix),
            value,
            expected,
            &guards,
        )
    }

    /// The service watches the whole store once, for every tenant (see `replication`), so
    /// a namespace has no watch of its own.
    fn watch(&self, _after: Revision) -> Result<Box<dyn Watch>, StoreError> {
        Err(StoreError::Backend {
            backend: format!("{:?}", self.inner),
            source: "a tenant's namespace is not watched on its own: watch the whole store".into(),
        })
    }
}

impl Namespaced {
    /// The inner store's conditional operations: reached only through [`Store::shared`],
    /// which offers them only when the inner store has them.
    fn shared_inner(&self) -> Result<&dyn SharedStore, StoreError> {
        self.inner.shared().ok_or_else(|| StoreError::Backend {
            backend: format!("{:?}", self.inner),
            source: "the store is not shared, so it has no conditional writes".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assignor_coordinator::store::MemoryStore;

    /// Two tenants writing the same key keep separate values and see only their own keys.
    #[test]
    fn tenants_see_only_their_own_keys() {
        let shared: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let a = Namespaced::tenant(shared.clone(), "a");
        let ab = Namespaced::tenant(shared.clone(), "ab");
        a.put("group/x", b"1").expect("put");
        ab.put("group/x", b"2").expect("put");
        assert_eq!(
            a.load_all().expect("load"),
            [("group/x".into(), b"1".to_vec())]
        );
        assert_eq!(
            ab.load_all().expect("load"),
            [("group/x".into(), b"2".to_vec())]
        );
        a.delete("group/x").expect("delete");
        assert!(a.load_all().expect("load").is_empty());
        assert_eq!(shared.load_all().expect("load").len(), 1);
    }

    /// `sync_then` reaches the shared store's own (here: one that answers without syncing),
    /// not the trait's default, which would block the caller for a flush.
    #[test]
    fn sync_then_is_the_shared_stores() {
        #[derive(Debug)]
        struct AnswersAsync;
        impl Store for AnswersAsync {
            fn load_all(&self) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
                Ok(Vec::new())
            }
            fn put(&self, _: &str, _: &[u8]) -> Result<(), StoreError> {
                Ok(())
            }
            fn delete(&self, _: &str) -> Result<(), StoreError> {
                Ok(())
            }
            fn sync(&self, _: SyncToken) -> Result<(), StoreError> {
                panic!("sync_then must not fall back to a blocking sync");
            }
            fn sync_then(
                &self,
                _: SyncToken,
                done: Box<dyn FnOnce(Result<(), StoreError>) + Send>,
            ) {
                done(Ok(()));
            }
        }
        let tenant = Namespaced::tenant(Arc::new(AnswersAsync), "a");
        let (tx, rx) = std::sync::mpsc::channel();
        tenant.sync_then(
            SyncToken::new(7),
            Box::new(move |r| tx.send(r.is_ok()).expect("receiver")),
        );
        assert_eq!(rx.try_recv(), Ok(true));
    }
}
