//! Bearer tokens → who is calling. Only hashes are kept; a presented token is hashed and
//! compared with every configured hash in constant time, so neither the comparison's timing
//! nor the tenants' order tells an attacker how close a guess was. Tokens are never logged.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use super::config::token_sha256;

/// Who a request comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// The tenant at this index of the service's tenant list.
    Tenant(usize),
    /// The admin.
    Admin,
}

/// Resolves the request's `Authorization: Bearer <token>`; `None` for a missing, malformed or
/// unknown token (all answer 401 alike).
pub(crate) fn authenticate(
    headers: &HeaderMap,
    tenants: &[[u8; 32]],
    admin: Option<&[u8; 32]>,
) -> Option<Caller> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?
        .trim();
    if token.is_empty() {
        return None;
    }
    let presented = token_sha256(token);
    // Every hash is compared, whatever matched: the time taken does not depend on which.
    let mut found = None;
    for (i, hash) in tenants.iter().enumerate() {
        if constant_time_eq(&presented, hash) {
            found = Some(Caller::Tenant(i));
        }
    }
    if let Some(admin) = admin
        && constant_time_eq(&presented, admin)
    {
        found = Some(Caller::Admin);
    }
    found
}

/// Compares two hashes without an early exit.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, value.parse().expect("header value"));
        h
    }

    /// A known token resolves to its tenant or the admin; anything else to nobody.
    #[test]
    fn tokens_resolve_by_hash() {
        let tenants = [token_sha256("a-secret"), token_sha256("b-secret")];
        let admin = token_sha256("root");
        let auth = |v: &str| authenticate(&headers(v), &tenants, Some(&admin));
        assert_eq!(auth("Bearer b-secret"), Some(Caller::Tenant(1)));
        assert_eq!(auth("Bearer root"), Some(Caller::Admin));
        assert_eq!(auth("Bearer wrong"), None);
        assert_eq!(auth("Basic a-secret"), None);
        assert_eq!(auth("Bearer "), None);
        assert_eq!(authenticate(&HeaderMap::new(), &tenants, None), None);
    }
}
