//! The service's client commands — `upload`, `list`, `download`, `delete` and `group …` — over
//! [`assignor_client`], so nobody has to hand-write curl.
//!
//! Every command takes `--server URL` (or `ASSIGNOR_SERVER`; default the embedded demo's
//! address), `--token` (or `ASSIGNOR_TOKEN`) and `--json`. Without a token, the demo token is
//! sent to the default server only: a demo convenience must not authenticate anywhere else,
//! so another server answers 401 and the error says to pass the token. Tokens are never
//! printed.
//!
//! Output: a readable summary on stdout; usage reports on stderr, as `assignor assign` prints
//! them, and assignments as the contract's output JSON on stdout. With `--json`, stdout
//! carries one line: the service's JSON answer as sent (`{"deleted": NAME}` for `delete`,
//! whose answer is empty), or `{"error": {...}}` when it refused.
//!
//! Exit codes: 0 done; 1 the service refused or failed the operation (including a rejected
//! token); 2 bad usage, an unreadable file, or no conversation with the service (unreachable,
//! or not answering like an assignor service).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use assignor_client::{
    Client, ClientError, CommittedTarget, DEFAULT_SERVER, DescribedGroup, Reply, UsageReport,
};
use assignor_coordinator::{ASSIGNOR_NAME, NUM_STANDBY_REPLICAS, RACK_AWARE_ASSIGNMENT_TAGS};
use assignor_sandbox::{Limits, Usage};
use assignor_service::config::DEMO_TOKEN;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::report::report;
use crate::{parse_key_value, read_input};

#[derive(Subcommand)]
pub enum Command {
    /// Upload (or replace) a component on the service under NAME, which must be its name():
    /// prints the checks it passed, and the trial assignment's usage on stderr.
    Upload(UploadArgs),
    /// List the assignors this tenant can select: the built-ins and its uploads.
    List(ServerArgs),
    /// Download an upload of this tenant's, byte for byte as uploaded and checked against its
    /// SHA-256 (e.g. to run it with `assignor assign` or `check`, or to load it in a broker).
    Download(DownloadArgs),
    /// Delete an uploaded assignor (refused while a group selects it).
    Delete(DeleteArgs),
    /// Configure, load, assign and inspect a group on the service.
    #[command(subcommand)]
    Group(GroupCommand),
}

#[derive(Subcommand)]
pub enum GroupCommand {
    /// Set and delete group config keys, all or nothing (e.g.
    /// `streams.assignor.name=balanced`); prints the group's overrides.
    SetConfig(SetConfigArgs),
    /// The config the group's next computation uses.
    GetConfig(GroupArgs),
    /// Replace the whole group with a document in the input JSON contract (topology,
    /// members, optional configs).
    Put(PutArgs),
    /// Trigger an assignment: the target on stdout as the output JSON, its usage on stderr.
    Assign(GroupArgs),
    /// The committed target assignment: as the output JSON, its usage on stderr.
    Assignment(GroupArgs),
    /// Epochs, the assignor of the next computation, configs, members, the last failure.
    Describe(GroupArgs),
    /// Download the capture of the group's last failed computation, for `assignor replay`.
    Capture(CaptureArgs),
    /// Delete the group: its state, target assignment and capture.
    Delete(GroupArgs),
}

#[derive(Args)]
pub struct CaptureArgs {
    /// The group id.
    group: String,
    /// Where to write it; default `<group>.capture` in the current directory.
    #[arg(long, short)]
    output: Option<PathBuf>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Args)]
pub struct ServerArgs {
    /// The assignor service's URL, http://HOST:PORT.
    #[arg(long, env = "ASSIGNOR_SERVER", default_value = DEFAULT_SERVER, value_name = "URL")]
    server: String,
    /// The tenant's bearer token. Default: the embedded demo's token, for the default server
    /// only.
    #[arg(long, env = "ASSIGNOR_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the service's JSON answer instead of the readable form.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct UploadArgs {
    /// The name groups select it by; the component's name() must be the same.
    name: String,
    /// The component, e.g. target/wasm32-wasip2/release/my_assignor.wasm.
    file: PathBuf,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Args)]
pub struct DownloadArgs {
    /// The uploaded assignor.
    name: String,
    /// Where to write it; default `<name>.wasm` in the current directory. An existing file is
    /// replaced only once the whole component has arrived and matched its hash.
    #[arg(long, short)]
    output: Option<PathBuf>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Args)]
pub struct DeleteArgs {
    /// The uploaded assignor.
    name: String,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Args)]
pub struct GroupArgs {
    /// The group id.
    group: String,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Args)]
pub struct SetConfigArgs {
    /// The group id.
    group: String,
    /// A key to set, as KEY=VALUE.
    #[arg(value_name = "KEY=VALUE", value_parser = parse_key_value)]
    set: Vec<(String, String)>,
    /// A key to delete, so the group uses the broker's value again (repeatable).
    #[arg(long, value_name = "KEY")]
    delete: Vec<String>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(Args)]
pub struct PutArgs {
    /// The group id.
    group: String,
    /// The group document (input JSON), `-` for stdin.
    file: PathBuf,
    #[command(flatten)]
    server: ServerArgs,
}

/// Where the token sent came from, to say which one to fix after a 401.
#[derive(Clone, Copy)]
enum TokenSource {
    Given,
    Demo,
    Missing,
}

/// A client for `args`, and how to print what it answers.
struct Session {
    client: Client,
    token: TokenSource,
    json: bool,
}

impl Session {
    fn open(args: &ServerArgs) -> anyhow::Result<Self> {
        let (token, source) = match &args.token {
            Some(t) => (Some(t.as_str()), TokenSource::Given),
            None if args.server.trim_end_matches('/') == DEFAULT_SERVER => {
                (Some(DEMO_TOKEN), TokenSource::Demo)
            }
            None => (None, TokenSource::Missing),
        };
        Ok(Self {
            client: Client::new(&args.server, token)?,
            token: source,
            json: args.json,
        })
    }

    /// Prints `reply` as the service's JSON, on one line, with `--json`; else with `human`.
    fn print<T>(
        &self,
        reply: Result<Reply<T>, ClientError>,
        human: impl FnOnce(&T),
    ) -> anyhow::Result<ExitCode> {
        match reply {
            Ok(reply) if self.json => {
                println!("{}", reply.json);
                Ok(ExitCode::SUCCESS)
            }
            Ok(reply) => {
                human(&reply.body);
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => self.fail(e),
        }
    }

    /// Exit 1 for what the service refused (with `--json`, its error object on stdout);
    /// an error for main to report with exit 2 when there was no conversation.
    fn fail(&self, e: ClientError) -> anyhow::Result<ExitCode> {
        match &e {
            ClientError::Refused { error, .. } => {
                if self.json {
                    println!("{}", json!({ "error": error }));
                }
                eprintln!("error: {e}");
                if let Some(passed) = error["passed"].as_array().filter(|p| !p.is_empty()) {
                    eprintln!("checks passed before it:");
                    for check in passed {
                        eprintln!("  ✓ {}", check.as_str().unwrap_or_default());
                    }
                }
                Ok(ExitCode::FAILURE)
            }
            ClientError::Unauthorized { message, .. } => {
                if self.json {
                    let error = json!({ "code": "AUTHENTICATION_FAILED", "message": message });
                    println!("{}", json!({ "error": error }));
                }
                eprintln!("error: {e}");
                eprintln!(
                    "{}",
                    match self.token {
                        TokenSource::Given => "the token came from --token or ASSIGNOR_TOKEN",
                        TokenSource::Demo =>
                            "no token was given, so the demo token was sent (the server is the \
                             default one); pass --token or set ASSIGNOR_TOKEN",
                        TokenSource::Missing =>
                            "no token was sent: pass --token or set ASSIGNOR_TOKEN (only the \
                             default server gets the demo token without one)",
                    }
                );
                Ok(ExitCode::FAILURE)
            }
            ClientError::Unreachable { .. } => Err(anyhow::anyhow!(
                "{e} (set the address with --server or ASSIGNOR_SERVER)"
            )),
            // A bad server address or token, an answer that breaks the protocol, and kinds a
            // newer client may add: main reports them with exit 2.
            _ => Err(e.into()),
        }
    }
}

/// Runs one client command.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Upload(args) => upload(args),
        Command::List(args) => list(&args),
        Command::Download(args) => download(args),
        Command::Delete(args) => {
            let s = Session::open(&args.server)?;
            match s.client.delete_assignor(&args.name) {
                Ok(()) if s.json => {
                    println!("{}", json!({ "deleted": args.name }));
                    Ok(ExitCode::SUCCESS)
                }
                Ok(()) => {
                    println!("deleted `{}`", args.name);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => s.fail(e),
            }
        }
        Command::Group(GroupCommand::SetConfig(args)) => set_config(args),
        Command::Group(GroupCommand::GetConfig(args)) => get_config(&args),
        Command::Group(GroupCommand::Put(args)) => {
            // The service applies its own limit; this one only keeps the client bounded.
            let document = read_input(&args.file, assignor_sandbox::DEFAULT_MAX_INPUT_BYTES)?;
            let s = Session::open(&args.server)?;
            s.print(s.client.put_group(&args.group, &document), describe_text)
        }
        Command::Group(GroupCommand::Assign(args)) => {
            let s = Session::open(&args.server)?;
            s.print(s.client.assign(&args.group), print_target)
        }
        Command::Group(GroupCommand::Assignment(args)) => {
            let s = Session::open(&args.server)?;
            s.print(s.client.assignment(&args.group), print_target)
        }
        Command::Group(GroupCommand::Describe(args)) => {
            let s = Session::open(&args.server)?;
            s.print(s.client.describe(&args.group), describe_text)
        }
        Command::Group(GroupCommand::Capture(args)) => capture(args),
        Command::Group(GroupCommand::Delete(args)) => {
            let s = Session::open(&args.server)?;
            match s.client.delete_group(&args.group) {
                Ok(()) if s.json => {
                    println!("{}", json!({ "deleted": args.group }));
                    Ok(ExitCode::SUCCESS)
                }
                Ok(()) => {
                    println!("deleted group `{}`", args.group);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => s.fail(e),
            }
        }
    }
}

fn capture(args: CaptureArgs) -> anyhow::Result<ExitCode> {
    let s = Session::open(&args.server)?;
    let bytes = match s.client.capture(&args.group) {
        Ok(bytes) => bytes,
        Err(e) => return s.fail(e),
    };
    let path = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("{}.capture", args.group.replace('/', "_"))));
    std::fs::write(&path, &bytes).with_context(|| format!("writing {}", path.display()))?;
    if s.json {
        println!("{}", json!({ "capture": path, "bytes": bytes.len() }));
    } else {
        println!(
            "wrote {} ({} bytes); rerun it with `assignor replay {0}` (add --assignor FILE.wasm \
             for an uploaded component)",
            path.display(),
            bytes.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn download(args: DownloadArgs) -> anyhow::Result<ExitCode> {
    let s = Session::open(&args.server)?;
    let download = match s.client.download(&args.name) {
        Ok(download) => download,
        Err(e) => return s.fail(e),
    };
    let path = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("{}.wasm", args.name.replace('/', "_"))));
    // Written beside the target and renamed over it, so that the path holds either the old
    // file or the whole new component, never a part.
    let mut partial = path.clone().into_os_string();
    partial.push(".part");
    let written = std::fs::write(&partial, &download.component)
        .and_then(|()| std::fs::rename(&partial, &path));
    if written.is_err() {
        // Best effort: what is left of a failed write is of no use to anyone.
        let _ = std::fs::remove_file(&partial);
    }
    written.with_context(|| format!("writing {}", path.display()))?;
    if s.json {
        println!(
            "{}",
            json!({ "assignor": args.name, "file": path, "sha256": download.sha256,
                    "bytes": download.component.len() })
        );
    } else {
        println!(
            "wrote {} ({} bytes, sha256 {})",
            path.display(),
            download.component.len(),
            short(&download.sha256)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn upload(args: UploadArgs) -> anyhow::Result<ExitCode> {
    let component =
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let s = Session::open(&args.server)?;
    s.print(s.client.upload(&args.name, &component), |r| {
        println!(
            "{} `{}`: sha256 {}, {} bytes",
            if r.replaced { "replaced" } else { "uploaded" },
            r.assignor,
            short(&r.sha256),
            r.bytes
        );
        println!("checks passed:");
        for check in &r.checks {
            println!("  ✓ {check}");
        }
        eprint!(
            "{}",
            usage_report(&format!("{} (trial)", r.assignor), &r.trial)
        );
    })
}

fn list(args: &ServerArgs) -> anyhow::Result<ExitCode> {
    let s = Session::open(args)?;
    s.print(s.client.list_assignors(), |assignors| {
        let width = assignors
            .iter()
            .map(|a| a.name.len())
            .max()
            .unwrap_or(0)
            .max(4);
        // Rows end where their text does: no padding after the last column.
        let row = |text: String| println!("{}", text.trim_end());
        row(format!(
            "{:<width$}  {:<9}  {:<7}  UPLOAD",
            "NAME", "KIND", "DEFAULT"
        ));
        for a in assignors {
            let upload = match (&a.sha256, a.bytes) {
                (Some(sha), Some(bytes)) => format!("sha256 {}, {bytes} bytes", short(sha)),
                _ => String::new(),
            };
            let default = if a.default { "yes" } else { "" };
            row(format!(
                "{:<width$}  {:<9}  {default:<7}  {upload}",
                a.name, a.kind
            ));
        }
    })
}

fn set_config(args: SetConfigArgs) -> anyhow::Result<ExitCode> {
    if args.set.is_empty() && args.delete.is_empty() {
        anyhow::bail!(
            "nothing to change: give KEY=VALUE pairs to set and/or --delete KEY (`assignor \
             group get-config {}` shows the current config)",
            args.group
        );
    }
    let s = Session::open(&args.server)?;
    let set: Vec<(&str, &str)> = args
        .set
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let delete: Vec<&str> = args.delete.iter().map(String::as_str).collect();
    s.print(s.client.set_group_config(&args.group, &set, &delete), |o| {
        println!(
            "group `{}` overrides (unset: the broker's value):",
            o.group_id
        );
        let c = &o.config;
        let rows = [
            (ASSIGNOR_NAME, c.assignor_name.clone()),
            (
                NUM_STANDBY_REPLICAS,
                c.num_standby_replicas.map(|n| n.to_string()),
            ),
            (
                RACK_AWARE_ASSIGNMENT_TAGS,
                c.rack_aware_assignment_tags.clone(),
            ),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (key, value) in rows {
            let value = value.unwrap_or_else(|| "(unset)".to_owned());
            println!("  {key:<width$}  {value}");
        }
    })
}

/// From the description: the service has no config read of its own, and the description holds
/// what matters, the values the next computation uses.
fn get_config(args: &GroupArgs) -> anyhow::Result<ExitCode> {
    let s = Session::open(&args.server)?;
    let reply = s.client.describe(&args.group).map(|r| Reply {
        json: json!({
            "groupId": r.json["groupId"],
            "assignorName": r.json["assignorName"],
            "configuredAssignor": r.json["configuredAssignor"],
            "configs": r.json["configs"],
        }),
        body: r.body,
    });
    s.print(reply, |d| {
        println!("group `{}`, config of its next computation:", d.group_id);
        let tags = &d.configs.rack_aware_assignment_tags;
        let rows = [
            (ASSIGNOR_NAME, assignor_text(d)),
            (
                NUM_STANDBY_REPLICAS,
                d.configs.num_standby_replicas.to_string(),
            ),
            (
                RACK_AWARE_ASSIGNMENT_TAGS,
                if tags.is_empty() {
                    "(none)".to_owned()
                } else {
                    tags.join(",")
                },
            ),
        ];
        for (key, value) in rows {
            println!("  {key:<34}  {value}");
        }
    })
}

/// The assignor of the next computation, and why when it is not the configured one.
fn assignor_text(d: &DescribedGroup) -> String {
    match &d.configured_assignor {
        None => format!("{} (the default; not set)", d.assignor_name),
        Some(c) if *c == d.assignor_name => c.clone(),
        Some(c) => format!(
            "{} (configured `{c}` is not registered: falling back to the default)",
            d.assignor_name
        ),
    }
}

fn describe_text(d: &DescribedGroup) {
    let row =
        |label: &str, value: String| println!("{}", format!("{label:<18} {value}").trim_end());
    row("group", d.group_id.clone());
    row("group epoch", d.group_epoch.to_string());
    row(
        "target epoch",
        match d.target_assignment_epoch {
            None => format!(
                "none yet (`assignor group assign {}` computes one)",
                d.group_id
            ),
            Some(e) if e == d.group_epoch => format!("{e} (up to date)"),
            Some(e) => format!(
                "{e} (behind the group; `assignor group assign {}` computes the next)",
                d.group_id
            ),
        },
    );
    row("next assignor", assignor_text(d));
    row(
        "standby replicas",
        d.configs.num_standby_replicas.to_string(),
    );
    let tags = &d.configs.rack_aware_assignment_tags;
    row(
        "rack-aware tags",
        if tags.is_empty() {
            "(none)".to_owned()
        } else {
            tags.join(",")
        },
    );
    row(
        &format!("members ({})", d.members.len()),
        d.members.join(", "),
    );
    if let (Some(assignor), Some(usage)) = (&d.target_assignor, &d.target_usage) {
        row(
            "target computed by",
            format!("{assignor}: {}", usage_line(usage)),
        );
    }
    match &d.last_failure {
        None => row("last failure", "none".to_owned()),
        Some(f) => {
            let now = now_ms();
            let retry = if f.retry_at_ms > now {
                format!("retry in {}", seconds(f.retry_at_ms - now))
            } else {
                "the next trigger retries".to_owned()
            };
            row(
                "last failure",
                format!(
                    "{} from `{}`, {} ago ({} in a row, group epoch {}; {retry}): {}",
                    f.kind,
                    f.assignor,
                    seconds(now.saturating_sub(f.at_ms)),
                    f.consecutive,
                    f.group_epoch,
                    f.message
                ),
            );
        }
    }
}

/// The contract's output JSON on stdout; epoch, assignor and usage on stderr, as
/// `assignor assign` prints them.
fn print_target(t: &CommittedTarget) {
    match serde_json::to_string_pretty(&t.assignment) {
        Ok(doc) => println!("{doc}"),
        Err(e) => eprintln!("error: cannot print the assignment: {e}"),
    }
    eprintln!("{:<12} {}", "epoch", t.target_assignment_epoch);
    eprint!("{}", usage_report(&t.assignor, &t.usage));
}

/// The same report a local call prints, from the service's figures.
fn usage_report(assignor: &str, usage: &UsageReport) -> String {
    let limits = Limits::default().with_call_limits(&usage.limits);
    report(assignor, &Usage::from(usage), &limits)
}

/// A usage on one line, for the description.
fn usage_line(u: &UsageReport) -> String {
    let mut parts = Vec::new();
    if let Some(fuel) = u.fuel {
        parts.push(format!("fuel {fuel}"));
    }
    if let Some(memory) = u.peak_memory_bytes {
        parts.push(format!(
            "memory {:.2} MiB",
            memory as f64 / f64::from(1 << 20)
        ));
    }
    parts.push(format!("{:.3} ms", u.wall_time_us as f64 / 1e3));
    parts.join(", ")
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn seconds(ms: u64) -> String {
    format!("{:.1} s", Duration::from_millis(ms).as_secs_f64())
}

/// Enough of a hash to tell uploads apart.
fn short(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
}
