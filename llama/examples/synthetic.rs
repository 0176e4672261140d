//! Writes a small model of random weights (see `agentsite_llama::synthetic`):
//! `cargo run -p agentsite-llama --example synthetic -- FAMILY FORMAT OUT.gguf [--sub-billion]`,
//! FORMAT one of q4_0, q4_1, q4_k, q5_k, q6_k, q8_0, f16, bf16; `--sub-billion`
//! writes Qwen3 0.6B's shape (for speed figures) instead of a test's.

use agentsite_llama::synthetic::{Recipe, write};
use candle_core::quantized::GgmlDType;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (family, format, out, recipe): (_, _, _, fn(_, _) -> _) = match &args[..] {
        [family, format, out] => (family, format, out, Recipe::small),
        [family, format, out, size] if size == "--sub-billion" => {
            (family, format, out, Recipe::sub_billion)
        }
        _ => return Err("usage: synthetic FAMILY FORMAT OUT.gguf [--sub-billion]".into()),
    };
    let format = match format.as_str() {
        "q4_0" => GgmlDType::Q4_0,
        "q4_1" => GgmlDType::Q4_1,
        "q4_k" => GgmlDType::Q4K,
        "q5_k" => GgmlDType::Q5K,
        "q6_k" => GgmlDType::Q6K,
        "q8_0" => GgmlDType::Q8_0,
        "f16" => GgmlDType::F16,
        "bf16" => GgmlDType::BF16,
        other => return Err(format!("no format {other:?}")),
    };
    let family = agentsite_llama::arch::named(family)
        .ok_or_else(|| format!("the engine runs no family {family:?}"))?
        .name;
    let mut file = std::fs::File::create(out).map_err(|e| e.to_string())?;
    write(&recipe(family, format), &mut file)
}
