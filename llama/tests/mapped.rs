//! The model file is mapped, not copied: reading a model adds next to
//! nothing to the process's own (anonymous) memory, and running it reads
//! the weights where the file is. A test binary of its own, so that no
//! other test's allocations are counted.

#![cfg(target_os = "linux")]

use agentsite_llama::synthetic::{Recipe, write};
use agentsite_llama::{Model, Session};
use candle_core::quantized::{GgmlDType, gguf_file};

/// A line of /proc/self/status, in bytes.
fn status(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in /proc/self/status"));
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn a_models_weights_are_its_files_pages() {
    // About 20 MB of Q8_0 weights.
    let recipe = Recipe {
        width: 512,
        layers: 4,
        heads: 8,
        kv_heads: 4,
        feed_forward: 2048,
        vocabulary: 8192,
        ..Recipe::small("qwen3", GgmlDType::Q8_0)
    };
    let path = std::env::temp_dir().join(format!("agentsite-mapped-{}.gguf", std::process::id()));
    let mut out = std::fs::File::create(&path).unwrap();
    write(&recipe, &mut out).unwrap();
    drop(out);
    let size = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::File::open(&path).unwrap();
    let content = gguf_file::Content::read(&mut std::io::BufReader::new(&file)).unwrap();

    let before = status("RssAnon");
    let model = Model::map(&content, &file).unwrap();
    let mut session = Session::new(&model, 8);
    session.forward(&[1, 2, 3]).unwrap();
    session.forward(&[4]).unwrap();
    let grown = status("RssAnon").saturating_sub(before);
    std::fs::remove_file(&path).unwrap();
    eprintln!("a {size}-byte model file: the process's own memory grew by {grown} bytes");
    assert!(
        grown < size / 10,
        "reading and running a {size}-byte model took {grown} bytes of the process's own memory: its weights were copied"
    );
    assert!(session.logits().iter().all(|l| l.is_finite()));
}
