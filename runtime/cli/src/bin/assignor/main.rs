//! The `assignor` command: run an assignment through the sandbox (`assign`), try the embedded
//! sample (`demo`), check a broker config's assignor list (`registry`), or run the
//! multi-tenant service (`serve`) and drive it (`upload`, `list`, `delete`, `group`). See the
//! README for the JSON contract.

/// The service allocates on many threads per request; mimalloc's per-thread heaps cost less
/// CPU there than glibc's arenas (`cargo bench -p assignor-tests --bench service`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use assignor_coordinator::config::BrokerConfig;
use assignor_coordinator::{Assignor, BUILTIN_NAMES, Registry, builtin, json};
use assignor_protocol::{ErrorDoc, Outcome};
use assignor_sandbox::wire;
use assignor_sandbox::{
    DEFAULT_COMPILE_TIMEOUT, DEFAULT_FUEL, DEFAULT_MAX_CODE_BYTES, DEFAULT_MAX_COMPILED_BYTES,
    DEFAULT_MAX_COMPONENT_BYTES, DEFAULT_MAX_FUNCTION_BYTES, DEFAULT_MAX_ID_BYTES,
    DEFAULT_MAX_INPUT_BYTES, DEFAULT_MAX_MEMBERS, DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_PARTITIONS, DEFAULT_MAX_STDERR_BYTES,
    DEFAULT_MAX_SUBTOPOLOGIES, DEFAULT_MAX_TASKS, DEFAULT_MEMORY_BYTES, DEFAULT_TIMEOUT,
    DEFAULT_WASM_STACK_BYTES, Limits, Runtime, TaskAssignorError,
};
use assignor_service::Service;
use assignor_service::config::{self as service_config, ServiceConfig, StoreConfig};
use clap::{Args, Parser, Subcommand};

mod check;
mod remote;
mod replay;
mod report;

use report::report;

/// The balanced sample assignor, built from `sample-assignors/balanced` by the build script.
const SAMPLE_COMPONENT: &[u8] = include_bytes!(env!("BALANCED_ASSIGNOR_COMPONENT_WASM"));
/// The example group of the JSON contract.
const DEMO_GROUP: &str = include_str!("../../../../demo/group.json");

#[derive(Parser)]
#[command(
    name = "assignor",
    version,
    about = "Sandboxed Kafka Streams task assignors"
)]
struct Cli {
    #[command(flatten)]
    cache: CacheArgs,
    #[command(subcommand)]
    command: Command,
}

/// Where the one-shot commands (`assign`, `demo`, `check`, `replay`, `registry`) keep compiled
/// components between runs, so a component is compiled once, not on every run. The cache's
/// entries are keyed by the component's SHA-256 and the engine (wasmtime's version, the engine
/// configuration the limits make, the target), written atomically, checked on every read, and
/// safe to share by concurrent runs.
#[derive(Args)]
struct CacheArgs {
    /// Where compiled components are cached between runs [default: $XDG_CACHE_HOME/assignor,
    /// else ~/.cache/assignor]. Its files are loaded as native code: it must be yours and
    /// writable by nobody else, or it is not used.
    #[arg(long, global = true, env = "ASSIGNOR_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile components afresh, reading and writing no cache (whatever --cache-dir or
    /// ASSIGNOR_CACHE_DIR say).
    #[arg(long, global = true)]
    no_cache: bool,
    /// Most the cache's entries may take, in MiB; the least recently used go first.
    #[arg(long, global = true, value_name = "MIB", default_value_t = DEFAULT_CACHE_MIB)]
    cache_max_mib: u64,
}

/// The default of `--cache-max-mib`: room for a few hundred sample-sized components (the
/// samples compile to 0.7–2 MB) and a few of the largest the code limits allow.
const DEFAULT_CACHE_MIB: u64 = 1024;

impl CacheArgs {
    /// The cache directory to use, if any: none with `--no-cache`, when no default can be
    /// found, or when the directory is not private to this user (a warning says which).
    fn dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        let dir = self.cache_dir.clone().or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .filter(|d| !d.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|d| d.join("assignor"))
        })?;
        match private_dir(&dir) {
            Ok(()) => Some(dir),
            Err(why) => {
                eprintln!(
                    "warning: not caching compiled components in {}: {why}; compiling afresh \
                     (pick a private directory with --cache-dir, or --no-cache)",
                    dir.display()
                );
                None
            }
        }
    }
}

/// Creates `dir` (mode 0700) if missing, and checks that it is this user's and writable by
/// nobody else: a file planted there would run as native code in this process.
fn private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create it ({e})"))?;
    let meta = std::fs::metadata(dir).map_err(|e| format!("cannot read it ({e})"))?;
    if !meta.is_dir() {
        return Err("it is not a directory".to_owned());
    }
    // /proc/self belongs to the process's effective user.
    if let Ok(me) = std::fs::metadata("/proc/self")
        && meta.uid() != me.uid()
    {
        return Err(format!(
            "it belongs to uid {}, not to this user",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "others may write to it (mode {:o})",
            meta.mode() & 0o777
        ));
    }
    Ok(())
}

#[derive(Subcommand)]
enum Command {
    /// Compute an assignment: the output JSON on stdout, a usage report on stderr.
    Assign(AssignArgs),
    /// Run the embedded sample component on the embedded example group.
    Demo(LimitArgs),
    /// Build the assignor registry from a broker config exactly as startup does (every
    /// component loaded and configured) and list it; exit 2 naming the first bad entry.
    Registry(BrokerArgs),
    /// Run the standard scenario suite and random groups against an assignor inside
    /// production limits: usage per case beside the limits, pass/fail per rule, a verdict.
    Check(check::CheckArgs),
    /// Rerun a captured call (a `.capture` file written when a call failed) and say whether
    /// it fails the same way, with the same fuel.
    Replay(replay::ReplayArgs),
    /// Run the assignor service (HTTP API). Without --config: an embedded demo with a `demo`
    /// tenant (token `demo-token`), the `sticky` and `balanced` built-ins, data in
    /// ./assignor-data, listening on 127.0.0.1:7878.
    Serve(ServeArgs),
    #[command(flatten)]
    Remote(remote::Command),
    /// Internal: compiles a component from stdin for a parent `assignor` (see
    /// `RuntimeBuilder::compiler`); LIMITS is the engine's configuration.
    #[command(name = assignor_sandbox::COMPILE_COMMAND, hide = true)]
    CompileComponent { limits: String },
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    broker: BrokerArgs,
    /// The data directory (uploads, groups, compiled cache); overrides `service.data.dir`.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The address to listen on, IP:PORT; overrides `service.listen`.
    #[arg(long)]
    listen: Option<String>,
    /// Where state is kept: `embedded` (default: redb in the data directory) or an etcd
    /// cluster, etcd://HOST:PORT[,HOST:PORT...]; overrides `service.store`.
    #[arg(long)]
    store: Option<String>,
}

#[derive(Args)]
struct BrokerArgs {
    /// A broker config in `server.properties` syntax (`group.streams.assignors`, ...).
    #[arg(long)]
    config: Option<PathBuf>,
    /// A config property that overrides the file, as KEY=VALUE (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

#[derive(Args)]
struct AssignArgs {
    /// A built-in assignor name (e.g. `balanced`) or a component file ending in `.wasm`.
    #[arg(long)]
    assignor: String,
    /// The group input JSON file, `-` for stdin.
    #[arg(long)]
    input: PathBuf,
    /// Print one JSON object on stdout: `{"assignment", "usage"}` or `{"error"}`.
    #[arg(long)]
    json: bool,
    /// Configuration passed to the assignor's `configure`, as KEY=VALUE (repeatable).
    #[arg(long = "config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    config: Vec<(String, String)>,
    #[command(flatten)]
    capture: CaptureArgs,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Args)]
struct CaptureArgs {
    /// Where captures of failed calls are written (for `assignor replay`).
    #[arg(
        long,
        default_value = "assignor-captures",
        conflicts_with = "no_capture"
    )]
    capture_dir: PathBuf,
    /// Do not write captures of failed calls.
    #[arg(long)]
    no_capture: bool,
}

impl CaptureArgs {
    /// The directory captures go to, unless turned off.
    fn dir(self) -> Option<PathBuf> {
        (!self.no_capture).then_some(self.capture_dir)
    }
}

#[derive(Args)]
struct LimitArgs {
    /// Fuel per call.
    #[arg(long, default_value_t = DEFAULT_FUEL, conflicts_with = "no_fuel")]
    fuel: u64,
    /// Disable the fuel limit; the wall-clock deadline still applies.
    #[arg(long)]
    no_fuel: bool,
    /// Linear memory per instance, in MiB.
    #[arg(long, default_value_t = DEFAULT_MEMORY_BYTES >> 20)]
    memory_mib: usize,
    /// Wall-clock deadline per call, in milliseconds.
    #[arg(long, default_value_t = DEFAULT_TIMEOUT.as_millis() as u64)]
    timeout_ms: u64,
    /// Longest a component's compilation may take, in milliseconds (it runs in a child
    /// process, killed past it).
    #[arg(long, default_value_t = DEFAULT_COMPILE_TIMEOUT.as_millis() as u64)]
    compile_timeout_ms: u64,
    /// Wasm stack, in KiB.
    #[arg(long, default_value_t = DEFAULT_WASM_STACK_BYTES >> 10)]
    stack_kib: usize,
    /// Largest output a guest may return, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_OUTPUT_BYTES)]
    max_output_bytes: usize,
    /// Guest stdout/stderr kept for error messages, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_STDERR_BYTES)]
    max_stderr_bytes: usize,
    /// A guest's error message kept, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,
    /// Largest component file, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_COMPONENT_BYTES)]
    max_component_bytes: usize,
    /// Largest function body in a component, in bytes (checked before compiling).
    #[arg(long, default_value_t = DEFAULT_MAX_FUNCTION_BYTES)]
    max_function_bytes: usize,
    /// Most code in a component, all function bodies together, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_CODE_BYTES)]
    max_code_bytes: usize,
    /// Largest compiled code of a component, in bytes (checked after compiling).
    #[arg(long, default_value_t = DEFAULT_MAX_COMPILED_BYTES)]
    max_compiled_bytes: usize,
    /// Largest input document, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_INPUT_BYTES)]
    max_input_bytes: usize,
    /// Most members in a group.
    #[arg(long, default_value_t = DEFAULT_MAX_MEMBERS)]
    max_members: usize,
    /// Most subtopologies in a topology.
    #[arg(long, default_value_t = DEFAULT_MAX_SUBTOPOLOGIES)]
    max_subtopologies: usize,
    /// Largest maxNumInputPartitions of a subtopology.
    #[arg(long, default_value_t = DEFAULT_MAX_PARTITIONS)]
    max_partitions: u32,
    /// Most tasks in a topology.
    #[arg(long, default_value_t = DEFAULT_MAX_TASKS)]
    max_tasks: usize,
    /// Longest id or name in a group, in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_ID_BYTES)]
    max_id_bytes: usize,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits::default()
            .fuel((!self.no_fuel).then_some(self.fuel))
            .memory_bytes(self.memory_mib << 20)
            .timeout(Duration::from_millis(self.timeout_ms))
            .compile_timeout(Duration::from_millis(self.compile_timeout_ms))
            .wasm_stack_bytes(self.stack_kib << 10)
            .max_output_bytes(self.max_output_bytes)
            .max_stderr_bytes(self.max_stderr_bytes)
            .max_message_bytes(self.max_message_bytes)
            .max_component_bytes(self.max_component_bytes)
            .max_function_bytes(self.max_function_bytes)
            .max_code_bytes(self.max_code_bytes)
            .max_compiled_bytes(self.max_compiled_bytes)
            .max_input_bytes(self.max_input_bytes)
            .max_members(self.max_members)
            .max_subtopologies(self.max_subtopologies)
            .max_partitions(self.max_partitions)
            .max_tasks(self.max_tasks)
            .max_id_bytes(self.max_id_bytes)
    }
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        die_quietly_on_closed_stdout();
    }
    // The one-shot commands print their own reports; the service logs its requests.
    let default_filter = match cli.command {
        Command::Serve(_) => "info",
        _ => "error",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cache = &cli.cache;
    let result = match cli.command {
        Command::Assign(args) => assign(args, cache),
        Command::Demo(limits) => demo(limits, cache),
        Command::Registry(args) => registry(args, cache),
        Command::Check(args) => check::check(args, cache),
        Command::Replay(args) => replay::replay(args, cache),
        Command::Serve(args) => serve(args),
        Command::Remote(command) => remote::run(command),
        Command::CompileComponent { limits } => Ok(assignor_sandbox::compiler_main(&limits)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", causes(&e));
            ExitCode::from(2)
        }
    }
}

/// `e` and its causes, each said once. The project's errors say their cause in their own
/// message and also keep it as their `source` (for embedders that walk the chain), so
/// anyhow's `{:#}`, which appends every source, would repeat each cause once per layer: a
/// cause already in the message so far is not appended again.
fn causes(e: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
        } else if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

/// Restores the default action of `SIGPIPE`, which Rust's runtime ignores: a one-shot
/// command whose output is piped into a reader that stops early (`assignor group describe g |
/// head`) then ends quietly, as Unix tools do, instead of panicking in `println!` on the
/// `EPIPE` error. Not for `serve`, where a client closing its connection must only fail that
/// write.
#[allow(unsafe_code)]
fn die_quietly_on_closed_stdout() {
    // SAFETY: called at start-up, before any other thread exists, with the default action,
    // which involves no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Reads the input document, at most `max` bytes of it: a larger one is refused after
/// `max + 1` bytes, never read whole.
fn read_input(path: &PathBuf, max: usize) -> anyhow::Result<String> {
    let (source, name): (Box<dyn Read>, String) = if path.as_os_str() == "-" {
        (Box::new(std::io::stdin()), "the input from stdin".into())
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
        (Box::new(file), path.display().to_string())
    };
    let mut bytes = Vec::new();
    source
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {name}"))?;
    if bytes.len() > max {
        anyhow::bail!(
            "{name} is over the input limit of {max} bytes (--max-input-bytes); shrink the group \
             or raise the limit"
        );
    }
    String::from_utf8(bytes).with_context(|| format!("reading {name}: not UTF-8"))
}

/// The command's runtime under `limits`: it compiles components in a child process of this
/// very program, killed at the compile time limit, so no component can keep a core busy
/// compiling past it, and keeps what it compiled in the `cache` directory for the next run.
fn runtime(limits: Limits, cache: &CacheArgs) -> anyhow::Result<Runtime> {
    let mut builder = Runtime::builder(limits).compiler(own_path()?);
    if let Some(dir) = cache.dir() {
        builder = builder
            .cache_dir(dir)
            .cache_max_bytes(cache.cache_max_mib.saturating_mul(1 << 20));
    }
    Ok(builder.build()?)
}

/// This program's path, to compile components with.
fn own_path() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("cannot find this program's own path to compile with")
}

/// `Ok(code)`: the assignment ran (0) or failed (1); `Err`: bad arguments or input (2).
fn assign(args: AssignArgs, cache: &CacheArgs) -> anyhow::Result<ExitCode> {
    let limits = args.limits.limits();
    let text = read_input(&args.input, limits.get_max_input_bytes())?;
    let (group, topology) = json::parse_input_with(&text, &limits)?;
    let runtime = runtime(limits.clone(), cache)?;
    let config: BTreeMap<String, String> = args.config.into_iter().collect();
    if !args.assignor.ends_with(".wasm") && builtin(&args.assignor).is_none() {
        anyhow::bail!(
            "no built-in assignor named {:?} (built-ins: {}); a component file must end in .wasm",
            args.assignor,
            BUILTIN_NAMES.join(", ")
        );
    }
    let assignor = resolve_assignor(&runtime, &args.assignor, &config);
    let capture_dir = args.capture.dir();
    let result = assignor.and_then(|a| {
        a.assign(&group, &topology).inspect_err(|e| {
            let Some(dir) = &capture_dir else {
                return;
            };
            match replay::save_failure(dir, &a, &group, &topology, e) {
                Ok(path) => eprintln!(
                    "captured the call in {0}; rerun it with `assignor replay {0}`",
                    path.display()
                ),
                Err(e) => eprintln!("warning: {}", causes(&e)),
            }
        })
    });
    let mut stdout = std::io::stdout().lock();
    match result {
        Ok((assignment, usage)) => {
            let doc = json::assignment_doc(&group, &topology, &assignment);
            if args.json {
                let out = Outcome {
                    assignment: doc,
                    usage: wire::usage_report(&usage, &limits),
                };
                writeln!(stdout, "{}", serde_json::to_string(&out)?)?;
            } else {
                writeln!(stdout, "{}", serde_json::to_string_pretty(&doc)?)?;
            }
            eprint!("{}", report(&args.assignor, &usage, &limits));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            if args.json {
                writeln!(stdout, "{}", serde_json::to_string(&ErrorDoc::from(&e))?)?;
            }
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// A built-in by name, or a component file (a name ending in `.wasm`), configured with
/// `config`; an unknown built-in or a component that fails to load is a `load` error.
fn resolve_assignor(
    runtime: &Runtime,
    name: &str,
    config: &BTreeMap<String, String>,
) -> Result<Assignor, TaskAssignorError> {
    if name.ends_with(".wasm") {
        runtime
            .load_file(name, config)
            .map(|c| Assignor::Component(c.into()))
    } else {
        Assignor::builtin(name, config).map(|a| a.with_limits(runtime.limits()))
    }
}

fn demo(limits: LimitArgs, cache: &CacheArgs) -> anyhow::Result<ExitCode> {
    let (group, topology) = json::parse_input(DEMO_GROUP)?;
    let limits = limits.limits();
    let runtime = runtime(limits.clone(), cache)?;
    let assignor = runtime.load(SAMPLE_COMPONENT, "balanced_assignor.wasm", &BTreeMap::new())?;
    println!(
        "Loaded the sample component `{}` (sha256 {}) and ran the example group ({} members, {} \
         subtopologies) through the sandbox:\n",
        assignor.name(),
        &assignor.sha256()[..12],
        group.members.len(),
        topology.subtopologies.len(),
    );
    match assignor.assign(&group, &topology) {
        Ok((assignment, usage)) => {
            let doc = json::assignment_doc(&group, &topology, &assignment);
            println!("{}\n", serde_json::to_string_pretty(&doc)?);
            print!("{}", report(assignor.name(), &usage, &limits));
            println!(
                "\nNext: run it yourself with\n  cargo run -p assignor-cli -- assign \
                 --assignor balanced --input runtime/demo/group.json\nor see a limit hit with \
                 `cargo run -p assignor-cli -- demo --fuel 10000`."
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let mut overrides = args.broker.overrides;
    if let Some(dir) = &args.data_dir {
        overrides.push(format!("{}={}", service_config::DATA_DIR, dir.display()));
    }
    if let Some(listen) = &args.listen {
        overrides.push(format!("{}={listen}", service_config::LISTEN));
    }
    if let Some(store) = &args.store {
        overrides.push(format!("{}={store}", service_config::STORE));
    }
    let demo = args.broker.config.is_none();
    let mut config = match &args.broker.config {
        Some(file) => ServiceConfig::load(Some(file), &overrides)?,
        None => ServiceConfig::demo(&overrides)?,
    };
    config.broker.compiler = Some(own_path()?);
    let service = Service::open(&config)?;
    let listener = std::net::TcpListener::bind(config.listen)
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let state = match &config.store {
        StoreConfig::Etcd { endpoints } => format!(
            "state in etcd {}, compiled cache in {}",
            endpoints.join(","),
            config.data_dir.display()
        ),
        _ => format!("data in {}", config.data_dir.display()),
    };
    eprintln!(
        "assignor service listening on http://{addr} ({state}, {} tenant(s)); Ctrl-C or \
         SIGTERM stops it, finishing requests in flight",
        config.tenants.len()
    );
    if demo {
        eprintln!("{}", demo_hints(&addr.to_string()));
    }
    service.run(listener).context("serving")?;
    Ok(ExitCode::SUCCESS)
}

/// What to try against the embedded demo: the client commands, spelled as this very binary
/// so the lines can be pasted, and one curl line for the raw API.
fn demo_hints(addr: &str) -> String {
    let token = service_config::DEMO_TOKEN;
    let exe = std::env::current_exe().ok();
    let cwd = std::env::current_dir().ok();
    let command = match (&exe, &cwd) {
        (Some(exe), Some(cwd)) => exe.strip_prefix(cwd).unwrap_or(exe).display().to_string(),
        _ => "assignor".to_owned(),
    };
    let mut lines = vec![format!(
        "Try it (demo tenant `{}`, token `{token}`):",
        service_config::DEMO_TENANT
    )];
    if addr != service_config::DEFAULT_LISTEN {
        // The client sends the demo token by itself only to the default address.
        lines.push(format!(
            "  export ASSIGNOR_SERVER=http://{addr} ASSIGNOR_TOKEN={token}"
        ));
    }
    for args in [
        "list",
        "group put orders runtime/demo/group.json",
        "group assign orders",
        "group set-config orders streams.assignor.name=balanced",
        "group describe orders",
    ] {
        lines.push(format!("  {command} {args}"));
    }
    lines.push("Upload your own (its name() must be the NAME you give):".to_owned());
    lines.push(format!(
        "  {command} upload my-assignor target/wasm32-wasip2/release/my_assignor.wasm"
    ));
    lines.push("Or the HTTP API directly:".to_owned());
    lines.push(format!(
        "  curl -s -H 'Authorization: Bearer {token}' http://{addr}/v1/assignors"
    ));
    lines.join("\n")
}

fn registry(args: BrokerArgs, cache: &CacheArgs) -> anyhow::Result<ExitCode> {
    let config = BrokerConfig::load(args.config.as_deref(), &args.overrides)?;
    let runtime = runtime(config.limits.clone(), cache)?;
    let registry = Registry::build(&runtime, &config)?;
    let mut out = std::io::stdout().lock();
    for (i, (entry, name)) in config.assignors.iter().zip(registry.names()).enumerate() {
        let kind = match registry.get(name) {
            Some(Assignor::Component(c)) => format!("component {entry} sha256:{}", c.sha256()),
            _ => "built-in".to_owned(),
        };
        let default = if i == 0 { "  (default)" } else { "" };
        writeln!(out, "{name}\t{kind}{default}")?;
    }
    Ok(ExitCode::SUCCESS)
}
