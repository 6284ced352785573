//! The function-runner style usage report the one-shot commands print.

use std::io::IsTerminal;

use assignor_sandbox::{Limits, Usage};

/// A function-runner style report: each figure with its limit beside it, flagged (in yellow
/// or red on a terminal) when near or over the limit.
pub fn report(assignor: &str, usage: &Usage, limits: &Limits) -> String {
    let color = std::io::stderr().is_terminal();
    let mut out = format!("{:<12} {assignor}\n", "assignor");
    let mut row = |label: &str, used: String, limit: Option<(String, f64)>| {
        let (text, ratio) = match limit {
            Some((limit, ratio)) => (format!("{used} / {limit}  ({:.1}%)", ratio * 100.0), ratio),
            None => (used, 0.0),
        };
        let (flag, paint) = match ratio {
            r if r >= 1.0 => ("  OVER LIMIT", "\x1b[31m"),
            r if r >= 0.8 => ("  near limit", "\x1b[33m"),
            _ => ("", ""),
        };
        let line = format!("{label:<12} {text}{flag}");
        if color && !paint.is_empty() {
            out.push_str(&format!("{paint}{line}\x1b[0m\n"));
        } else {
            out.push_str(&format!("{line}\n"));
        }
    };
    if let Some(fuel) = usage.fuel {
        let limit = match limits.get_fuel() {
            Some(l) => (l.to_string(), fuel as f64 / l as f64),
            None => ("unlimited".to_owned(), 0.0),
        };
        row("fuel", fuel.to_string(), Some(limit));
    }
    if let Some(memory) = usage.peak_memory_bytes {
        let l = limits.get_memory_bytes();
        row(
            "memory",
            mib(memory),
            Some((mib(l), memory as f64 / l as f64)),
        );
    }
    let wall = usage.wall_time.as_secs_f64();
    let timeout = limits.get_timeout().as_secs_f64();
    // Built-ins run natively, outside the deadline.
    let deadline = usage
        .fuel
        .map(|_| (format!("{} ms", timeout * 1e3), wall / timeout));
    row("wall time", format!("{:.3} ms", wall * 1e3), deadline);
    if let Some(input) = usage.input_bytes {
        row("input", format!("{input} B"), None);
    }
    if let Some(output) = usage.output_bytes {
        let l = limits.get_max_output_bytes();
        row(
            "output",
            format!("{output} B"),
            Some((format!("{l} B"), output as f64 / l as f64)),
        );
    }
    out
}

fn mib(bytes: usize) -> String {
    format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64)
}
