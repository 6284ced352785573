//! What the service tells its operator: Prometheus metrics after real assignments, failures
//! and uploads, and logs that never carry a token.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use assignor_tests::guests;
use serde_json::json;
use tracing::dispatcher::{self, DefaultGuard, Dispatch};

use crate::service::{
    GROUP_DOC, Server, TOKEN_A, TOKEN_ADMIN, TOKEN_B, config, error_code, group_doc,
};

/// `/metrics` answers only the admin, and after two good assignments, one endless loop and
/// one rejected upload it counts each under its tenant and assignor: assignments, failures by
/// kind, fuel and duration histograms, uploads by outcome.
#[test]
fn metrics_count_assignments_failures_and_uploads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&config(dir.path()));
    let a = server.client(TOKEN_A);
    assert_eq!(a.upload("hashmap-user", guests::HASHMAP_USER).0, 201);
    assert_eq!(
        a.upload("loops-on-large-groups", guests::LOOPS_ON_LARGE_GROUPS)
            .0,
        201,
        "the looping guest passes the upload trial"
    );
    assert_eq!(a.upload("panics", guests::PANICS).0, 422);
    for group in ["small-1", "small-2"] {
        assert_eq!(
            a.put(&format!("/v1/groups/{group}"), GROUP_DOC.as_bytes())
                .0,
            200
        );
        a.set_config(group, json!({"streams.assignor.name": "hashmap-user"}), &[]);
        assert_eq!(a.post(&format!("/v1/groups/{group}/assign")).0, 200);
    }
    assert_eq!(a.put("/v1/groups/big", group_doc(8, 16).as_bytes()).0, 200);
    a.set_config(
        "big",
        json!({"streams.assignor.name": "loops-on-large-groups"}),
        &[],
    );
    let (status, body) = a.post("/v1/groups/big/assign");
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["error"]["kind"], "out-of-fuel", "{body}");

    for token in ["", TOKEN_A, TOKEN_B] {
        assert_eq!(
            server.client(token).get_text("/metrics").0,
            401,
            "{token:?}"
        );
    }
    let (status, text) = server.client(TOKEN_ADMIN).get_text("/metrics");
    assert_eq!(status, 200, "{text}");
    for line in [
        r#"assignor_assignments_total{tenant="a",assignor="hashmap-user"} 2"#,
        r#"assignor_assignment_failures_total{tenant="a",assignor="loops-on-large-groups",kind="out-of-fuel"} 1"#,
        r#"assignor_assignment_fuel_count{tenant="a",assignor="hashmap-user"} 2"#,
        r#"assignor_assignment_duration_seconds_count{tenant="a",assignor="hashmap-user"} 2"#,
        r#"assignor_assignment_duration_seconds_count{tenant="a",assignor="loops-on-large-groups"} 1"#,
        r#"assignor_uploads_total{tenant="a",outcome="accepted"} 2"#,
        r#"assignor_uploads_total{tenant="a",outcome="trial"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in:\n{text}");
    }
    assert!(!text.contains("tenant=\"b\""), "b did nothing:\n{text}");
    assert!(
        !text.contains("loops-on-large-groups\"} 1\nassignor_assignments_total"),
        "a failure is no assignment"
    );
}

/// Everything the service's threads log, kept in memory.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

thread_local! {
    /// The capture, as this runtime thread's default subscriber while the thread lives.
    static GUARD: std::cell::RefCell<Option<DefaultGuard>> = const { std::cell::RefCell::new(None) };
}

/// A service run logging at TRACE, every thread of it captured, with requests carrying good,
/// wrong, admin and malformed tokens (uploads, groups, assignments, a failure, limits,
/// metrics): no token appears anywhere in the output, though tenants and routes do.
#[test]
fn tokens_never_reach_the_logs() {
    let captured = Captured::default();
    let sink = captured.clone();
    let dispatch = Dispatch::new(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish(),
    );
    // With a single scoped dispatcher alive, tracing decides whether a call site is
    // interesting by asking only the default of the thread that first reaches it, and caches
    // the answer: a site first reached by another test's (uncaptured) server thread would be
    // off for this one too. A second dispatcher makes it ask every live one.
    let _every_dispatcher_asked = Dispatch::new(tracing_subscriber::registry());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    let on_start = dispatch.clone();
    builder
        .on_thread_start(move || {
            let guard = dispatcher::set_default(&on_start);
            GUARD.with(|g| *g.borrow_mut() = Some(guard));
        })
        .on_thread_stop(|| GUARD.with(|g| drop(g.borrow_mut().take())));
    let server = dispatcher::with_default(&dispatch, || {
        Server::start_with(&config(dir.path()), builder)
    });

    let wrong = "token-nobody-has-0f4e1d";
    let a = server.client(TOKEN_A);
    assert_eq!(a.upload("hashmap-user", guests::HASHMAP_USER).0, 201);
    assert_eq!(
        a.upload("loops-on-large-groups", guests::LOOPS_ON_LARGE_GROUPS)
            .0,
        201
    );
    assert_eq!(a.upload("panics", guests::PANICS).0, 422);
    assert_eq!(a.put("/v1/groups/orders", GROUP_DOC.as_bytes()).0, 200);
    assert_eq!(a.post("/v1/groups/orders/assign").0, 200);
    assert_eq!(a.put("/v1/groups/big", group_doc(8, 16).as_bytes()).0, 200);
    a.set_config(
        "big",
        json!({"streams.assignor.name": "loops-on-large-groups"}),
        &[],
    );
    assert_eq!(a.post("/v1/groups/big/assign").0, 500);
    assert_eq!(server.client(TOKEN_B).get("/v1/groups/orders").0, 404);
    for token in [wrong, TOKEN_ADMIN, &format!("{TOKEN_A} trailing")] {
        let (status, body) = server.client(token).get("/v1/assignors");
        assert_eq!((status, error_code(&body)), (401, "AUTHENTICATION_FAILED"));
    }
    let admin = server.client(TOKEN_ADMIN);
    assert_eq!(admin.get_text("/metrics").0, 200);
    assert_eq!(
        admin
            .put("/v1/admin/tenants/b/limits", br#"{"fuel": 5000000}"#)
            .0,
        200
    );
    drop(server);

    let text = String::from_utf8(
        captured
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone(),
    )
    .expect("UTF-8 logs");
    assert!(
        text.contains("tenant=a") && text.contains("route=/v1/groups/{group}/assign"),
        "the capture saw the requests:\n{text}"
    );
    assert!(
        text.contains("outcome=\"out-of-fuel\"") || text.contains("outcome=out-of-fuel"),
        "{text}"
    );
    for token in [TOKEN_A, TOKEN_B, TOKEN_ADMIN, wrong] {
        assert!(!text.contains(token), "token {token:?} logged:\n{text}");
    }
}
