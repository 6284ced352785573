//! A tenant's view of the one shared store: every key it writes is prefixed with
//! `tenant/<name>/`, and it loads only its own keys, so a tenant's coordinator cannot read or
//! overwrite another tenant's groups however its group ids are spelled.

use std::sync::Arc;

use crate::store::{Store, StoreError, SyncToken};

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

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
}
