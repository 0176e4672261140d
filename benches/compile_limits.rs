//! How long compiling takes at the static complexity limits of
//! `runtime::complexity`: the worst shapes that `add` and fetch still
//! accept, so that BENCHMARKS.md can say what one agent can cost a node's
//! CPU at install time. Run with `cargo bench -p agentsite --bench
//! compile_limits`; each shape is compiled three times and the median
//! reported, with the same engine configuration a node uses.

#[path = "../tests/support/mod.rs"]
mod support;

use agentsite::runtime::{Capacity, Mode, engine_config};
use agentsite::testing::{MAX_BLOCKS, MAX_FUNCTION_SIZE, MAX_LOCALS, check_complexity};
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use support::branchy;

/// A component whose one core module holds `function` (WAT of one func).
fn component(function: &str) -> Vec<u8> {
    wat::parse_str(format!("(component (core module {function}))")).expect("valid WAT")
}

/// `locals` locals, each set from a constant and all live until summed at
/// the end: every value is live at once, the register allocator's worst.
fn all_live(locals: u64) -> String {
    let mut f = format!(
        "(func (result i32) (local {})",
        "i32 ".repeat(locals as usize)
    );
    for i in 0..locals {
        let _ = write!(f, " (local.set {i} (i32.const {i}))");
    }
    f.push_str(" (i32.const 0)");
    for i in 0..locals {
        let _ = write!(f, " (local.get {i}) (i32.add)");
    }
    f.push(')');
    f
}

/// A body of about `size` bytes cycling through `locals` locals: each step
/// reads two of them and writes a third, far apart, so that values stay
/// live across long stretches.
fn long_body(size: usize, locals: u64) -> String {
    let mut f = format!(
        "(func (result i32) (local {})",
        "i32 ".repeat(locals as usize)
    );
    // Each step encodes to 8 to 11 bytes, depending on the indices.
    let steps = size.saturating_sub(locals as usize * 2) / 11;
    for step in 0..steps as u64 {
        let (a, b, c) = (
            step % locals,
            (step * 7 + 3) % locals,
            (step * 13 + 5) % locals,
        );
        let _ = write!(
            f,
            " (local.set {c} (i32.add (local.get {a}) (local.get {b})))"
        );
    }
    f.push_str(" (local.get 0))");
    f
}

/// `locals` locals and `branches` conditional writes, each to another
/// local, then every local read: at each merge of control flow every local
/// may have come from either side, so the compiler's SSA construction
/// looks back through all merges for each local (locals × branches).
fn compile_time(engine: &wasmtime::Engine, bytes: &[u8]) -> Duration {
    let mut times: Vec<Duration> = (0..3)
        .map(|_| {
            let started = Instant::now();
            wasmtime::component::Component::new(engine, bytes).expect("it compiles");
            started.elapsed()
        })
        .collect();
    times.sort();
    times[1]
}

fn main() {
    let engine = wasmtime::Engine::new(&engine_config(Capacity::OneShot, Mode::Synchronous))
        .expect("an engine");
    // `COMPILE_SCAN=FILE...` prints the largest counts of FILE's functions.
    if let Ok(files) = std::env::var("COMPILE_SCAN") {
        for file in files.split(',') {
            let bytes = std::fs::read(file).expect("readable");
            let (mut most_blocks, mut most_locals, mut biggest) = (0u64, 0u64, 0usize);
            for payload in wasmparser::Parser::new(0).parse_all(&bytes) {
                if let Ok(wasmparser::Payload::CodeSectionEntry(body)) = payload {
                    biggest = biggest.max(body.range().len());
                    let locals: u64 = body
                        .get_locals_reader()
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|(n, _)| u64::from(n))
                        .sum();
                    most_locals = most_locals.max(locals);
                    let mut blocks = 0u64;
                    if let Ok(ops) = body.get_operators_reader() {
                        for op in ops.into_iter().flatten() {
                            if matches!(
                                op,
                                wasmparser::Operator::Block { .. }
                                    | wasmparser::Operator::Loop { .. }
                                    | wasmparser::Operator::If { .. }
                            ) {
                                blocks += 1;
                            }
                        }
                    }
                    most_blocks = most_blocks.max(blocks);
                }
            }
            println!(
                "{file}: most blocks {most_blocks}, most locals {most_locals}, biggest body {biggest}"
            );
        }
        return;
    }
    // `COMPILE_FILE=FILE...` compiles each component as the node's engine
    // would, past the complexity check: what an agent from another
    // toolchain costs to compile.
    if let Ok(files) = std::env::var("COMPILE_FILE") {
        for file in files.split(',') {
            let bytes = std::fs::read(file).expect("readable");
            let started = Instant::now();
            let outcome = wasmtime::component::Component::new(&engine, &bytes).map(|_| ());
            println!(
                "{file}: {} KiB compiled in {:.2} s ({})",
                bytes.len() / 1024,
                started.elapsed().as_secs_f64(),
                outcome.map_or_else(|e| format!("{e:#}"), |()| "ok".into())
            );
        }
        return;
    }
    // `COMPILE_BRANCHY=locals,branches` measures one compile of that shape.
    if let Ok(shape) = std::env::var("COMPILE_BRANCHY") {
        let numbers: Vec<u64> = shape.split(',').filter_map(|n| n.parse().ok()).collect();
        let bytes = component(&branchy(numbers[0], numbers[1]));
        let started = Instant::now();
        wasmtime::component::Component::new(&engine, &bytes).expect("it compiles");
        println!("{shape}: {:.2} s", started.elapsed().as_secs_f64());
        return;
    }
    let max_size = MAX_FUNCTION_SIZE - 4096;
    let shapes: Vec<(String, Vec<u8>)> = vec![
        (
            format!("{MAX_LOCALS} locals, all live"),
            component(&all_live(MAX_LOCALS)),
        ),
        (
            "1 MiB body, 16 locals".into(),
            component(&long_body(max_size, 16)),
        ),
        (
            format!("1 MiB body, {} locals", MAX_LOCALS / 2),
            component(&long_body(max_size - MAX_LOCALS as usize, MAX_LOCALS / 2)),
        ),
        (
            format!("100 locals, {MAX_BLOCKS} ifs"),
            component(&branchy(100, MAX_BLOCKS)),
        ),
        (
            format!("500 locals, {MAX_BLOCKS} ifs"),
            component(&branchy(500, MAX_BLOCKS)),
        ),
        (
            format!("2,000 locals, {MAX_BLOCKS} ifs"),
            component(&branchy(2_000, MAX_BLOCKS)),
        ),
        (
            format!("{MAX_LOCALS} locals, {MAX_BLOCKS} ifs"),
            component(&branchy(MAX_LOCALS, MAX_BLOCKS)),
        ),
        (
            "100 locals, 10,000 ifs".into(),
            component(&branchy(100, 10_000)),
        ),
        (
            "40,000 locals, 1 function".into(),
            component(&all_live(40_000)),
        ),
    ];
    println!("| shape | module size | compile time (median of 3) |");
    println!("|---|---|---|");
    // `COMPILE_SHAPES=2,5` measures only those rows (1-based).
    let only: Option<Vec<usize>> = std::env::var("COMPILE_SHAPES").ok().map(|list| {
        list.split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect()
    });
    for (row, (name, bytes)) in shapes.into_iter().enumerate() {
        if only.as_ref().is_some_and(|rows| !rows.contains(&(row + 1))) {
            continue;
        }
        // What is refused is refused before compiling: its compile time is
        // what a node no longer spends (`add` answers in milliseconds).
        let verdict = match check_complexity(&bytes) {
            Ok(()) => format!("{:.2} s", compile_time(&engine, &bytes).as_secs_f64()),
            Err(refused) => format!("refused: {refused}"),
        };
        println!("| {name} | {} KiB | {verdict} |", bytes.len() / 1024);
    }
}
