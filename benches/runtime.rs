//! Runtime benchmarks (criterion):
//!
//! * `warm_call`: `calculator.add` with a fresh instance per call through
//!   agentsite's runtime (limits, capabilities, result checks), next to a
//!   bare wasmtime embedding of the same component with the same engine
//!   configuration, `InstancePre` and a fresh store per call: the baseline;
//!   and the same agent built for the async-agent world
//!   (`calculator-async`), called through the WASI 0.3 engine.
//! * `first_call`: the first call of an agent precompiled when it was added,
//!   in a fresh process: measured inside a child process from opening the
//!   node to the result, and as a whole `agentsite call` command.
//! * `compile`: compiling each example agent.
//!
//! Before the criterion groups, the warm-call latencies are also timed one
//! by one and printed as p50/p99, because criterion reports means of batches.
//!
//! Run with `cargo bench -p agentsite --bench runtime` after building the
//! examples (`cd examples && cargo build --release --target wasm32-wasip2`).

use agentsite::capabilities::bindings::exports::agentsite::agent::tools;
use agentsite::config::Limits;
use agentsite::policy::Grants;
use agentsite::runtime::{Capacity, Mode, Runtime, ToolCall, engine_config};
use criterion::{Criterion, criterion_group};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use wasmtime::component::{Component, InstancePre, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

const ARGS: &str = r#"{"a": 2, "b": 3}"#;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/target/wasm32-wasip2/release")
}

fn example(name: &str) -> Vec<u8> {
    let path = examples().join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; build the examples first: cd examples && cargo build --release --target wasm32-wasip2",
            path.display()
        )
    })
}

/// agentsite's path: `Runtime::call` on a prepared agent.
struct Agentsite {
    runtime: Runtime,
    agent: agentsite::runtime::LoadedAgent,
    _kv: tempfile::TempDir,
}

impl Agentsite {
    /// The example agent `name` (`calculator` or `calculator_async`).
    fn new(name: &str) -> Self {
        let kv = tempfile::tempdir().unwrap();
        let runtime =
            Runtime::new(kv.path().to_owned(), Capacity::SERVER, Default::default()).unwrap();
        assert!(runtime.pooling(), "benchmarks expect the pooling allocator");
        let component = runtime
            .compile(&example(name), Limits::default().compile_deadline)
            .unwrap()
            .component;
        let id = agentsite::AgentId::of(b"calculator");
        let agent = runtime
            .prepare(id, "calculator", &component, &Limits::default())
            .unwrap();
        Agentsite {
            runtime,
            agent,
            _kv: kv,
        }
    }

    async fn call(&self) {
        let call = ToolCall {
            tool: "add",
            arguments: ARGS,
            grants: Grants::pure(Limits::default()),
            caller: None,
            sources: Default::default(),
        };
        let output = self.runtime.call(&self.agent, call).await.unwrap();
        assert!(!output.is_error);
    }
}

/// The baseline: the same component embedded with nothing but wasmtime and
/// wasmtime-wasi, the same engine configuration, a cached `InstancePre` and
/// a fresh store per call, loading only the `tools` interface's functions
/// from each instance (the least a bindgen embedding can look up).
struct Bare {
    engine: Engine,
    pre: InstancePre<BareState>,
    tools: tools::GuestIndices,
}

struct BareState {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for BareState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl Bare {
    fn new() -> Self {
        let engine = Engine::new(&engine_config(Capacity::SERVER, Mode::Synchronous)).unwrap();
        let component = Component::new(&engine, example("calculator")).unwrap();
        let mut linker = Linker::<BareState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        // Every import of the calculator is one of WASI 0.2's, linked above.
        let pre = linker.instantiate_pre(&component).unwrap();
        let tools = tools::GuestIndices::new(&pre).unwrap();
        Bare { engine, pre, tools }
    }

    async fn call(&self) {
        let state = BareState {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
        };
        let mut store = Store::new(&self.engine, state);
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = self.pre.instantiate_async(&mut store).await.unwrap();
        let result = self
            .tools
            .load(&mut store, &instance)
            .unwrap()
            .call_call_tool(&mut store, "add", ARGS)
            .await
            .unwrap()
            .unwrap();
        assert!(!result.is_error);
    }
}

/// The single-threaded executor both embeddings are driven on.
fn executor() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Times `n` calls one by one and prints p50/p99.
fn percentiles(name: &str, n: usize, mut call: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..n / 10 {
        call();
    }
    let mut samples: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            call();
            start.elapsed()
        })
        .collect();
    samples.sort();
    let p50 = samples[n / 2];
    let p99 = samples[n * 99 / 100];
    println!("{name:<28} p50 {p50:>10.2?}   p99 {p99:>10.2?}   ({n} calls)");
    (p50, p99)
}

fn warm_call_percentiles() {
    let rt = executor();
    let agentsite = Agentsite::new("calculator");
    let wasi_0_3 = Agentsite::new("calculator_async");
    let bare = Bare::new();
    let n = 20_000;
    println!("\nwarm call of calculator.add, fresh instance per call, timed one by one:");
    // Interleave rounds so that machine noise hits both sides alike.
    let mut ours = Vec::new();
    let mut base = Vec::new();
    let mut concurrent = Vec::new();
    for _ in 0..3 {
        base.push(percentiles("bare wasmtime (baseline)", n, || {
            rt.block_on(bare.call())
        }));
        ours.push(percentiles("agentsite runtime", n, || {
            rt.block_on(agentsite.call())
        }));
        concurrent.push(percentiles("agentsite, built for 0.3", n, || {
            rt.block_on(wasi_0_3.call())
        }));
    }
    let median = |v: &mut Vec<(Duration, Duration)>| {
        v.sort();
        v[v.len() / 2]
    };
    let (ours_p50, ours_p99) = median(&mut ours);
    let (base_p50, base_p99) = median(&mut base);
    let (concurrent_p50, concurrent_p99) = median(&mut concurrent);
    println!(
        "median of 3 rounds: agentsite p50 {ours_p50:.2?} p99 {ours_p99:.2?}; baseline p50 {base_p50:.2?} p99 {base_p99:.2?}; ratio p50 {:.2}x",
        ours_p50.as_secs_f64() / base_p50.as_secs_f64()
    );
    println!(
        "the same agent built for WASI 0.3: p50 {concurrent_p50:.2?} p99 {concurrent_p99:.2?}; {:.2}x the WASI 0.2 build's p50\n",
        concurrent_p50.as_secs_f64() / ours_p50.as_secs_f64()
    );
}

fn warm_call(c: &mut Criterion) {
    let rt = executor();
    let agentsite = Agentsite::new("calculator");
    let wasi_0_3 = Agentsite::new("calculator_async");
    let bare = Bare::new();
    let mut group = c.benchmark_group("warm_call");
    group.bench_function("bare_wasmtime", |b| b.iter(|| rt.block_on(bare.call())));
    group.bench_function("agentsite", |b| b.iter(|| rt.block_on(agentsite.call())));
    group.bench_function("agentsite_wasi_0_3", |b| {
        b.iter(|| rt.block_on(wasi_0_3.call()))
    });
    group.finish();
}

/// Run as a child process by `first_call`: opens the node in `data_dir` the
/// way `agentsite call` does and makes one call, then prints how long that
/// took in nanoseconds, from before `Node::open` to the result.
fn first_call_child(data_dir: &str) {
    let start = Instant::now();
    let rt = executor();
    let node = agentsite::Node::open(
        agentsite::config::DataDir::new(data_dir),
        agentsite::NodeConfig::default(),
        Capacity::OneShot,
    )
    .unwrap();
    let output = rt
        .block_on(node.call("calculator", "add", ARGS, None))
        .unwrap();
    let elapsed = start.elapsed();
    assert!(!output.is_error);
    println!("{}", elapsed.as_nanos());
}

/// Runs `command` to completion; returns its stdout, panicking with its
/// stderr if it failed.
fn run_ok(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn first_call(c: &mut Criterion) {
    let data = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_agentsite");
    let run = |args: &[&str]| {
        run_ok(
            Command::new(bin)
                .arg("--data-dir")
                .arg(data.path())
                .args(args),
        )
    };
    let wasm = examples().join("calculator.wasm");
    run(&["add", wasm.to_str().unwrap()]);
    let mut group = c.benchmark_group("first_call");
    group.sample_size(50);
    // The first call as a fresh process sees it: open the node, load the
    // precompiled agent, instantiate, call. Process start-up and exit are
    // left out; they are measured next.
    let this = std::env::current_exe().unwrap();
    group.bench_function("in_fresh_process", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let stdout = run_ok(Command::new(&this).arg(FIRST_CALL_CHILD).arg(data.path()));
                    Duration::from_nanos(stdout.trim().parse().unwrap())
                })
                .sum()
        })
    });
    // The whole `agentsite call` command, from exec to exit.
    group.bench_function("agentsite_call_command", |b| {
        b.iter(|| run(&["call", "calculator", "add", ARGS]))
    });
    group.finish();
}

fn compile(c: &mut Criterion) {
    let kv = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(kv.path().to_owned(), Capacity::SERVER, Default::default()).unwrap();
    let mut group = c.benchmark_group("compile");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(3));
    for name in [
        "calculator",
        "text",
        "notes",
        "hostile_loop",
        "hostile_bomb",
        "hostile_recurse",
        "hostile_flood",
        "hostile_trap",
        "hostile_snoop",
    ] {
        let bytes = example(name);
        let deadline = Limits::default().compile_deadline;
        group.bench_function(name, |b| {
            b.iter(|| runtime.compile(&bytes, deadline).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, warm_call, first_call, compile);

/// The argument that makes this binary the child of `first_call`.
const FIRST_CALL_CHILD: &str = "--first-call-child";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == FIRST_CALL_CHILD) {
        return first_call_child(&args[i + 1]);
    }
    if args.iter().all(|a| a != "--list") {
        warm_call_percentiles();
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
