//! Helper of the service restart tests (`all/service_restart.rs`): `assignor serve` in a
//! process of its own, so a test can SIGKILL it mid-load or stop it with SIGTERM.
//!
//! `service-runner KEY=VALUE…` reads the service config from the given keys (as `--set`
//! overrides), opens the service, binds `service.listen`, prints `listening <address>`,
//! flushed, and serves until SIGINT or SIGTERM; then, once the requests in flight are done,
//! prints `stopped` and exits 0.

use std::io::Write as _;
use std::net::TcpListener;

use assignor_service::Service;
use assignor_service::config::ServiceConfig;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let keys: Vec<String> = std::env::args().skip(1).collect();
    let config = ServiceConfig::load(None, &keys)?;
    let service = Service::open(&config)?;
    let listener = TcpListener::bind(config.listen)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening {}", listener.local_addr()?)?;
    out.flush()?;
    service.run(listener)?;
    writeln!(out, "stopped")?;
    Ok(())
}
